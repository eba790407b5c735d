import re
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from cliutil import assert_error_line

from sketchsim.cli import main
from sketchsim.errors import PluginError
from sketchsim.sketch import HardFamily
from sketchsim.sketch.measure import measure
from sketchsim.sketch.plugins import builtin_dir, discover, parse_params, resolve_spec

ROOT = Path(__file__).resolve().parents[2]
BUILTINS = {"raw", "block-counts", "clipped-counts", "kernel", "multihead"}


def doc_example(tmp_path) -> Path:
    text = (ROOT / "docs" / "protocols.md").read_text()
    code = re.search(r"Save it as\n`halfcounts.py`:\n\n```python\n(.*?)```", text, re.S).group(1)
    path = tmp_path / "halfcounts.py"
    path.write_text(code)
    return path


def test_builtins_discovered():
    found = {f.name: f for f in discover()}
    assert BUILTINS <= set(found)
    assert all(found[n].source == "built-in" and found[n].error is None for n in BUILTINS)


def test_params_parse_and_errors():
    proto, params, _ = resolve_spec("kernel:r=4,bits=8")
    assert params == {"r": 4, "bits": 8, "values": "identity"}
    with pytest.raises(PluginError, match="no parameter 'x'; accepted: r .*bits .*values"):
        resolve_spec("kernel:x=1")
    with pytest.raises(PluginError, match="bits expects int, got 'eight'"):
        resolve_spec("kernel:bits=eight")
    with pytest.raises(PluginError, match="values must be one of identity, blocks"):
        resolve_spec("kernel:values=cubes")
    with pytest.raises(PluginError, match="r must be >= 1"):
        resolve_spec("kernel:r=0")
    with pytest.raises(PluginError, match="not key=value"):
        parse_params("r", "kernel")
    with pytest.raises(PluginError, match="unknown protocol 'nope'"):
        resolve_spec("nope")


def test_doc_example_runs_from_file(tmp_path):
    path = doc_example(tmp_path)
    proto, params, source = resolve_spec(f"{path}:HALF:div=2")
    assert proto.name == "halfcounts" and params == {"div": 2} and source.startswith("file")
    fam = HardFamily(3, 3)
    rep = measure(fam, fam.all_answers(), proto, params)
    assert not rep.meets_bound and rep.collision is not None
    rep1 = measure(fam, fam.all_answers(), proto, {"div": 1})
    assert rep1.meets_bound and rep1.correct_fraction == 1.0


def test_doc_example_command(tmp_path):
    path = doc_example(tmp_path)
    res = CliRunner().invoke(
        main, ["transcript", "--q", "4", "--s", "3", "--quiet", "--protocol", f"{path}:HALF:div=2"]
    )
    assert res.exit_code == 0, res.output
    assert "same transcript" in res.output


def test_module_spec(tmp_path, monkeypatch):
    pkg = tmp_path / "myplug"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "half.py").write_text(doc_example(tmp_path).read_text())
    monkeypatch.syspath_prepend(str(tmp_path))
    proto, params, source = resolve_spec("myplug.half:halfcounts:div=3")
    assert proto.name == "halfcounts" and params["div"] == 3 and source == "module myplug.half"


def test_entry_point_plugin(tmp_path, monkeypatch):
    (tmp_path / "epplug.py").write_text(doc_example(tmp_path).read_text())
    dist = tmp_path / "epplug-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: epplug\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[sketchsim.protocols]\nhalfcounts = epplug:HALF\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    found = {f.name: f for f in discover()}
    assert found["halfcounts"].source == "entry point epplug:HALF"
    proto, params, _ = resolve_spec("halfcounts:div=2")
    assert params == {"div": 2}
    res = CliRunner().invoke(main, ["protocols"])
    assert res.exit_code == 0 and "halfcounts" in res.output and "epplug:HALF" in res.output


def test_broken_plugins_are_one_line_errors(tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text("import no_such_module_anywhere\n")
    with pytest.raises(PluginError, match="failed to import: ModuleNotFoundError"):
        resolve_spec(f"{broken}:X")
    with pytest.raises(PluginError, match="does not exist"):
        resolve_spec(f"{tmp_path}/missing.py:X")
    with pytest.raises(PluginError, match="failed to import"):
        resolve_spec("no_such_pkg_xyz.mod:X")
    with pytest.raises(PluginError, match="defines no protocol 'nope'; it has: halfcounts"):
        resolve_spec(f"{doc_example(tmp_path)}:nope")


def test_wheel_ships_builtins_not_top_level_protocols(tmp_path):
    """A non-editable install finds the built-ins and adds no top-level `protocols`."""
    out = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(ROOT)],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    wheel = next(tmp_path.glob("sketchsim-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert "sketchsim/builtin_protocols/kernel.py" in names
    assert not any(n.startswith("protocols/") for n in names)
    target = tmp_path / "site"
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "-q",
            "--target",
            str(target),
            str(wheel),
        ],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    assert not (target / "protocols").exists()
    code = textwrap.dedent(f"""
        import sys; sys.path.insert(0, {str(target)!r})
        import sketchsim.sketch.plugins as p
        print(p.builtin_dir())
        print(sorted(f.name for f in p.discover() if f.protocol))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith(str(target))
    assert BUILTINS <= set(eval(lines[1]))


def test_builtin_dir_in_source_tree():
    assert (builtin_dir() / "block_counts.py").exists()


def _install_entry_point(tmp_path, monkeypatch, module: str, code: str, ep_name: str, attr="P"):
    (tmp_path / f"{module}.py").write_text(code)
    dist = tmp_path / f"{module}-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(f"[sketchsim.protocols]\n{ep_name} = {module}:{attr}\n")
    monkeypatch.syspath_prepend(str(tmp_path))


def test_entry_point_reusing_a_builtin_name_is_reported_not_fatal(tmp_path, monkeypatch):
    fake = doc_example(tmp_path).read_text().replace('"halfcounts"', '"block-counts"')
    _install_entry_point(tmp_path, monkeypatch, "epfake", fake, "block-counts", "HALF")
    found = [f for f in discover() if f.name == "block-counts"]
    assert [f.source for f in found] == ["built-in", "entry point epfake:HALF"]
    assert found[0].protocol is not None and found[1].protocol is None
    assert "already taken by built-in" in found[1].error
    proto, _, source = resolve_spec("block-counts")
    assert source == "built-in" and proto.builtin
    res = CliRunner().invoke(main, ["protocols"])
    assert res.exit_code == 0 and "already taken" in res.output and "kernel" in res.output
    res = CliRunner().invoke(
        main, ["transcript", "--q", "2", "--s", "2", "--quiet", "--protocol", "block-counts"]
    )
    assert res.exit_code == 0, res.output


def test_entry_point_exiting_on_import_does_not_end_sketchsim(tmp_path, monkeypatch):
    _install_entry_point(tmp_path, monkeypatch, "epexit", "raise SystemExit(3)\n", "exiter")
    found = {f.name: f for f in discover()}
    assert found["exiter"].protocol is None
    assert "failed to import: SystemExit: 3" in found["exiter"].error
    res = CliRunner().invoke(main, ["protocols"])
    assert res.exit_code == 0 and "SystemExit" in res.output and "raw" in res.output
    res = CliRunner().invoke(
        main, ["transcript", "--q", "2", "--s", "2", "--quiet", "--protocol", "block-counts"]
    )
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(
        main, ["transcript", "--q", "2", "--s", "2", "--quiet", "--protocol", "exiter"]
    )
    assert_error_line(res, "protocol exiter (entry point epexit:P): failed to import: SystemExit")


def test_entry_point_identity_names_the_distribution(tmp_path, monkeypatch):
    _install_entry_point(
        tmp_path, monkeypatch, "epplug2", doc_example(tmp_path).read_text(), "half", "HALF"
    )
    found = {f.name: f for f in discover()}
    assert found["halfcounts"].identity == "dist epplug2 1.0 epplug2:HALF"


@pytest.mark.parametrize(
    "code", ["raise SystemExit(0)\n", "import sys\nsys.exit('bye')\n", "raise GeneratorExit\n"]
)
def test_file_plugin_exiting_on_import_is_one_line(tmp_path, code):
    path = tmp_path / "exits.py"
    path.write_text(code)
    with pytest.raises(PluginError, match="failed to import: (SystemExit|GeneratorExit)"):
        resolve_spec(f"{path}:X")
    res = CliRunner().invoke(
        main, ["transcript", "--q", "2", "--s", "2", "--quiet", "--protocol", f"{path}:X"]
    )
    assert_error_line(res, "failed to import")
