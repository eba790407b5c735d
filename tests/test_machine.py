"""Machine facts, portable command lines and numba's cache folder on read-only installs."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner

import sketchsim
from sketchsim import numba_cache
from sketchsim.cli import main
from sketchsim.machine import machine_facts, portable_argv
from sketchsim.results import result_payload

NOWHERE = "/proc/sketchsim-no-such-folder"  # cannot be created, not even by root
BASELINE = {"ATEN_CPU_CAPABILITY": "default", "NUMBA_CPU_NAME": "generic"}


def test_portable_argv_has_no_absolute_paths(tmp_path):
    argv = [
        "/opt/venv/bin/sketchsim",
        "minrank",
        "--json",
        str(tmp_path / "out" / "m.json"),
        "--plot=/elsewhere/p.png",
        "/var/x/fam.npz",
        "--m",
        "2..6",
    ]
    out = portable_argv(argv, cwd=tmp_path)
    assert out == [
        "sketchsim",
        "minrank",
        "--json",
        "out/m.json",
        "--plot=<outside>/p.png",
        "<outside>/fam.npz",
        "--m",
        "2..6",
    ]
    assert portable_argv(["/a/b/__main__.py", "x"], cwd=tmp_path)[0] == "sketchsim"
    assert not any(a.startswith("/") or "=/" in a for a in out)


def test_result_files_record_the_machine_and_no_paths(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["/usr/bin/sketchsim", "--json", str(tmp_path / "r.json")])
    import numba  # noqa: F401  (loaded: described)

    payload = result_payload("x", {"path": str(tmp_path / "f.npz"), "n": [1, "/a/b.png"]}, {})
    assert payload["argv"] == ["sketchsim", "--json", "r.json"]
    assert payload["parameters"] == {"path": "f.npz", "n": [1, "<outside>/b.png"]}
    facts = payload["machine"]
    assert facts["cpu"] and facts["cpu_count"] >= 1
    assert facts["numba"]["target_cpu"] and facts["numba"]["threads"] >= 1


def _info(tmp_path, env=None):
    path = tmp_path / "info.json"
    subprocess.run(
        [sys.executable, "-m", "sketchsim", "info", "--json", str(path)],
        env={**os.environ, **(env or {})},
        capture_output=True,
        check=True,
    )
    return json.loads(path.read_text())


def test_info_reports_the_kernels_the_baseline_settings_force(tmp_path):
    """The CI leg's variables really change what torch and numba run (the report shows it)."""
    pytest.importorskip("torch")
    forced = _info(tmp_path, BASELINE)["machine"]
    assert forced["torch"]["cpu_capability"] == "DEFAULT"
    assert forced["numba"]["target_cpu"] == "generic"
    assert forced["env"].items() >= BASELINE.items()
    native = machine_facts(loaded_only=False)
    assert native["numba"]["target_cpu"] != "generic" or "NUMBA_CPU_NAME" in os.environ


def test_info_prints_a_table_with_versions_and_the_cache():
    res = CliRunner().invoke(main, ["info"])
    assert res.exit_code == 0, res.output
    rows = {
        line.split("│")[1].strip(): line.split("│")[2].strip()
        for line in res.output.splitlines()
        if line.startswith("│") and line.count("│") >= 3
    }
    assert rows["sketchsim"] == sketchsim.__version__, rows
    assert rows["numba target cpu"].split(",")[0] == machine_facts()["numba"]["target_cpu"]
    assert rows["numba cache"] and rows["cluster extra"]


def test_cache_folder_order(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    env = {"XDG_CACHE_HOME": str(tmp_path / "xdg")}
    assert numba_cache.decide(env, pkg) == numba_cache.CacheChoice(
        "package", str(pkg / "__pycache__")
    )
    given = numba_cache.decide({**env, "NUMBA_CACHE_DIR": str(tmp_path / "nc")}, pkg)
    assert (given.source, given.warning) == ("NUMBA_CACHE_DIR", None)
    bad = numba_cache.decide({**env, "NUMBA_CACHE_DIR": NOWHERE}, pkg)
    assert bad.source == "package" and "NUMBA_CACHE_DIR" in bad.warning
    ro = Path(NOWHERE) / "pkg"
    user = numba_cache.decide(env, ro)
    assert user == numba_cache.CacheChoice("user", str(tmp_path / "xdg" / "sketchsim" / "numba"))
    temp = numba_cache.decide({"XDG_CACHE_HOME": NOWHERE}, ro)
    assert temp.source == "temporary" and "for this run only" in temp.warning
    shutil.rmtree(temp.path)

    def refuse(prefix):
        raise OSError("read-only")

    off = numba_cache.decide({"XDG_CACHE_HOME": NOWHERE}, ro, make_temporary=refuse)
    assert off.path is None and "compiled on every run" in off.warning


def _read_only_copy(tmp_path) -> Path:
    """The package copied with every ``__pycache__`` a plain file: numba cannot cache beside it."""
    root = tmp_path / "ro"
    shutil.copytree(
        Path(sketchsim.__file__).parent,
        root / "sketchsim",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    for folder in [root / "sketchsim", *(p for p in (root / "sketchsim").rglob("*") if p.is_dir())]:
        (folder / "__pycache__").write_text("not a folder")
    return root


@pytest.mark.parametrize("mkdtemp_works", [True, False])
def test_a_read_only_install_and_home_run_with_one_warning_line(tmp_path, mkdtemp_works):
    root = _read_only_copy(tmp_path)
    code = (
        "import tempfile\n"
        + ("" if mkdtemp_works else "def no(*a, **k): raise OSError('ro')\ntempfile.mkdtemp = no\n")
        + "import numpy as np\nfrom sketchsim.minip.kernel import minip_targets\n"
        "x = np.array([[[1, 0], [1, 1], [0, 1]]], dtype=np.uint8)\n"
        "print(minip_targets(x).tolist())\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env.update(PYTHONPATH=str(root), XDG_CACHE_HOME=NOWHERE, HOME=NOWHERE)
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[[0, 1, 0]]"  # t_2 = min(1, 2, 1)
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("warning:"), out.stderr
    assert ("for this run only" if mkdtemp_works else "compiled on every run") in lines[0]
    if mkdtemp_works:  # the run's temporary cache is gone with the run
        folder = lines[0].split("compiling into ")[1].split(" for this run only")[0]
        assert folder.startswith(tempfile.gettempdir()) and not Path(folder).exists()


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def test_committed_records_hold_no_machine_paths():
    docs = Path(__file__).resolve().parents[1] / "docs"
    files = sorted(docs.rglob("*.json"))
    assert files
    for path in files:
        bad = [s for s in _strings(json.loads(path.read_text())) if s.startswith(("/", "~"))]
        assert not bad, (path.name, bad[:3])
