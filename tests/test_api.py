"""The public API: docs/api.md's example runs as written, and the CLI calls the API."""

import re
from pathlib import Path

import sketchsim
from sketchsim import api

DOC = Path(__file__).resolve().parents[1] / "docs" / "api.md"


def test_the_documented_example_runs(capsys):
    code = re.search(r"```python\n(.*?)```", DOC.read_text(), re.S).group(1)
    exec(compile(code, str(DOC), "exec"), {})
    out = capsys.readouterr().out
    assert "block-counts: correct 1.000" in out and "kernel: bits >= " in out
    assert "bound 8.00 bits, 256 inputs (all)" in out  # the transcript command's table


def test_the_documented_runs_example_runs(capsys):
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    code = next(b for b in blocks if "sketchsim.run(" in b)
    exec(compile(code, str(DOC), "exec"), {})
    out = capsys.readouterr().out
    assert "measured: ['block-counts', 'raw'] resumed: ['block-counts', 'raw']" in out
    assert "q = 2: smallest bits decoded = " in out and "q = 4:" in out


def test_the_package_reexports_the_api_lazily():
    assert sketchsim.verify is api.verify and sketchsim.transcript is api.transcript
    assert set(sketchsim.__all__) >= {"verify", "transcript", "frontier", "reproduce"}


def test_transcript_reports_every_protocol_and_the_bound():
    run = api.transcript(q=2, s=1, protocols=["raw", "clipped-counts:levels=1"])
    assert [r.spec for r in run.reports] == ["raw", "clipped-counts:levels=1"]
    d = run.to_dict()
    assert d["bound_bits"] == 2.0 and d["inputs"] == 4 and len(d["protocols"]) == 2


def test_the_cli_verify_goes_through_the_api(monkeypatch):
    from click.testing import CliRunner

    from sketchsim.cli import main

    calls = []
    real = api.verify
    monkeypatch.setattr(api, "verify", lambda *a, **k: calls.append(a) or real(*a, **k))
    res = CliRunner().invoke(main, ["verify", "--m", "2", "--n", "2", "--quiet"])
    assert res.exit_code == 0, res.output
    assert calls and calls[0][:3] == (2, 2, "softmax")  # the default construction
