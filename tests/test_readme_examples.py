"""Every command the README shows is run here (at small sizes) or named below with why not.

The commands are read from README.md itself: backquoted ``sketchsim ...`` and
the indented shell lines.  Each is run through click exactly as written, with
size flags *appended* (click keeps the last value of a repeated option), so the
README's own flags and their combination are what runs; only the sizes shrink.
A README edit that adds a command fails :func:`test_every_readme_command_is_run_or_listed`
until it is added to :data:`RUN` or :data:`NOT_RUN`.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from sketchsim.cli import main

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"

#: README command -> flags appended to it (sizes only).
RUN: dict[str, list[str]] = {
    "sketchsim verify --m 8 --n 3 --construction rank1": [],
    "sketchsim transcript --q 64 --s 7": ["--samples", "2000", "--protocol", "block-counts"],
    "sketchsim transcript --protocol kernel:r=4,bits=8 --protocol my.py:MINE": [
        "--q",
        "4",
        "--s",
        "3",
    ],
    "sketchsim protocols": [],
    "sketchsim transcript --family mqar --q 4 --s 3": [],
    "sketchsim families": [],
    "sketchsim frontier --protocol kernel --vary bits=1..12 --q 4,8,16 --s 3,7 --plot f.png": [
        "--q",
        "4",
        "--s",
        "3",
    ],
    "sketchsim codes --m 24 --kind golay-octads": [],
    "sketchsim witness --out w.npz": [],
    "sketchsim certify w.npz": [],
    "sketchsim bound --m 8 --to 32": ["--to", "12"],
    "sketchsim info": [],
    "sketchsim sweep --suite witness --ranks 1,2,4,8,16,32 --plot w.png": [
        "--ranks",
        "1",
        "--seeds",
        "1",
        "--steps",
        "5",
        "--model",
        "kernel",
    ],
    "sketchsim sweep --suite ood": [
        "--scales",
        "6:8:20",
        "--ranks",
        "2",
        "--seeds",
        "1",
        "--steps",
        "5",
        "--model",
        "kernel",
    ],
    "sketchsim minrank --m 2..6": ["--m", "2", "--seeds", "1", "--steps", "20"],
    # every causal architecture, one tiny model each (weights into W under the test's folder)
    "sketchsim sweep --suite capacity --arch linear,based,gla,deltanet,gated-deltanet,mamba,"
    "window,retention --save-weights W": [
        "--q",
        "2",
        "--s",
        "1",
        "--seeds",
        "1",
        "--steps",
        "3",
        "--layers",
        "1",
        "--ranks",
        "1",
        "--value-widths",
        "2",
    ],
}

#: README commands not run by this file, and why.
NOT_RUN: dict[str, str] = {
    'pip install -e ".[dev]" && python -m pytest -q -n 2 -m "not slow"': (
        "the suite without the slow tests; .ci/run runs this line verbatim in CI, then "
        "the slow ones"
    ),
    "pip install . && sketchsim transcript --q 64 --s 7": (
        "installs the package (CI installs it in .ci/run); the sketchsim part is run above"
    ),
    "sketchsim reproduce --quick": (
        "about 14 s of training and every pipeline step; tests/experiments/test_reproduce.py "
        "runs the same reproduce() with tiny settings (reproduce has no size flags)"
    ),
    "sketchsim sweep --suite capacity --save-weights W": (
        "trains the capacity plan (minutes); test_readme_capacity_pair below runs it shrunk "
        "to one tiny model, then the capacity command on its folder"
    ),
    "sketchsim capacity W --plot c.png": (
        "needs the folder the capacity sweep writes: run by test_readme_capacity_pair below"
    ),
    "sketchsim prove W.npz --bits 4 --rounding cut --proof p.json": (
        "needs a causal weights file W.npz: test_readme_prove_pair below writes one and runs "
        "this command, then check-proof on its proof"
    ),
    "sketchsim check-proof p.json": "needs the proof prove writes: test_readme_prove_pair",
    "sketchsim verify --m 7 --n 4 --cluster local:2": (
        "starts a Dask cluster; tests/cluster/test_cluster_verify.py covers the path and "
        "test_readme_cluster_example_shards below runs this command at --m 5 --n 5 (slow)"
    ),
}


def readme_commands() -> set[str]:
    text = README.read_text()
    cmds = set(re.findall(r"`(sketchsim [^`]*)`", text))
    cmds |= {ln.strip() for ln in text.splitlines() if ln.startswith("    ") and "sketchsim" in ln}
    cmds |= {ln.strip() for ln in text.splitlines() if ln.startswith("    ") and "pytest" in ln}
    return cmds


def test_every_readme_command_is_run_or_listed():
    found = readme_commands()
    listed = set(RUN) | set(NOT_RUN)
    assert found - listed == set(), "README commands neither run nor listed"
    assert listed - found == set(), "listed commands no longer in the README"


def _invoke(cmd: str, extra: list[str]):
    argv = shlex.split(cmd)[1:] + extra
    return CliRunner().invoke(main, argv, catch_exceptions=False)


def _my_plugin(where: Path) -> None:
    """``my.py`` defining ``MINE``: the built-in block-counts protocol under another name."""
    src = (ROOT / "protocols" / "block_counts.py").read_text()
    src = src.replace('PROTOCOL = Protocol(\n    "block-counts"', 'MINE = Protocol(\n    "mine"')
    assert "MINE = Protocol(" in src
    (where / "my.py").write_text(src)


@pytest.mark.parametrize("cmd", sorted(RUN))
def test_readme_command_runs(cmd, tmp_path, monkeypatch):
    if "sweep" in cmd or "minrank" in cmd:
        pytest.importorskip("torch")
    monkeypatch.chdir(tmp_path)
    if "my.py" in cmd:
        _my_plugin(tmp_path)
    if cmd == "sketchsim certify w.npz":
        assert _invoke("sketchsim witness --out w.npz", []).exit_code == 0
    res = _invoke(cmd, RUN[cmd] + (["--json", "out.json"] if _measures(cmd) else []))
    assert res.exit_code == 0, res.output
    assert "Traceback" not in res.output and "error:" not in res.output
    if _measures(cmd):
        assert (tmp_path / "out.json").stat().st_size > 0
    for name in re.findall(r"\S+\.(?:png|npz)\b", cmd):
        assert (tmp_path / name).stat().st_size > 0, name
    if "my.py:MINE" in cmd:  # the file's protocol ran, and was correct (it is block-counts)
        import json

        runs = {p["name"]: p for p in json.loads((tmp_path / "out.json").read_text())["protocols"]}
        assert runs["mine"]["correct_fraction"] == 1.0


def _measures(cmd: str) -> bool:
    return cmd.split()[1] not in ("protocols", "families", "codes")


@pytest.mark.slow
def test_readme_cluster_example_shards(tmp_path):
    """The README's ``--cluster`` example starts the cluster and cuts the inputs into shards."""
    pytest.importorskip("distributed")
    from sketchsim.heads.exhaustive import uses_count_vectors

    cmd = next(c for c in readme_commands() if "--cluster" in c)
    m, n = int(shlex.split(cmd)[3]), int(shlex.split(cmd)[5])
    assert not uses_count_vectors(m, n), f"{cmd} would not start the cluster"
    assert not uses_count_vectors(5, 5)
    out = tmp_path / "v.json"
    res = _invoke(cmd, ["--m", "5", "--n", "5", "--json", str(out), "--quiet"])
    assert res.exit_code == 0, res.output
    assert "cluster is not started" not in res.output
    shards = list((tmp_path / "v.json.state").iterdir())
    assert len(shards) >= 2, shards


def test_api_md_sweep_and_audit_example_runs(tmp_path, monkeypatch):
    """docs/api.md's second example (``sketchsim.sweep(plan)``, ``api.audit``) runs as written."""
    pytest.importorskip("torch")
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "api.md").read_text(), re.S)
    code = next(b for b in blocks if "sketchsim.sweep(plan" in b)
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "docs/api.md", "exec"), {"__name__": "api_md_example"})
    assert any((tmp_path / "heads").iterdir())


@pytest.mark.slow  # trains one tiny model, then measures it in the engine
def test_readme_capacity_pair(tmp_path, monkeypatch):
    """The README's capacity pair, in order, on one q = 3, s = 1 model of 100 steps."""
    pytest.importorskip("torch")
    monkeypatch.chdir(tmp_path)
    sweep = "sketchsim sweep --suite capacity --save-weights W"
    tiny = ["--q", "3", "--s", "1", "--seeds", "1", "--steps", "100", "--layers", "1"]
    res = _invoke(sweep, [*tiny, "--model", "kernel", "--feature-map", "elu1"])
    assert res.exit_code == 0, res.output
    assert list((tmp_path / "W").glob("*.npz"))
    res = _invoke("sketchsim capacity W --plot c.png", ["--json", "c.json"])
    assert res.exit_code == 0, res.output
    import json

    rows = json.loads((tmp_path / "c.json").read_text())["rows"]
    assert rows and all(r["bound_bits"] == 3.0 for r in rows)
    assert (tmp_path / "c.png").stat().st_size > 0


def test_readme_prove_pair(tmp_path, monkeypatch):
    """The README's ``prove`` then ``check-proof``, as written, on a model right by
    construction (:func:`sketchsim.prove.examples.counting_model`, F(4,7))."""
    from sketchsim.prove.examples import counting_model
    from sketchsim.sketch.family import HardFamily
    from sketchsim.sketch.weights_file import save_weights_file

    monkeypatch.chdir(tmp_path)
    save_weights_file(tmp_path / "W.npz", *counting_model(HardFamily(4, 7), 4))
    first = next(c for c in readme_commands() if c.startswith("sketchsim prove "))
    res = _invoke(first, [])
    assert res.exit_code == 0 and "proved" in res.output, res.output
    res = _invoke(next(c for c in readme_commands() if c.startswith("sketchsim check-proof")), [])
    assert res.exit_code == 0 and "VALID" in res.output, res.output
