import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from cliutil import assert_error_line

from sketchsim.cli import main

EXAMPLES = Path(__file__).with_name("protocol_examples.py")


def run(*args):
    return CliRunner().invoke(main, list(args))


def test_transcript_exhaustive_json(tmp_path):
    path = tmp_path / "t.json"
    res = run(
        "transcript",
        "--q",
        "3",
        "--s",
        "3",
        "--quiet",
        "--json",
        str(path),
        "--protocol",
        "block-counts",
        "--protocol",
        "clipped-counts",
    )
    assert res.exit_code == 0, res.output
    data = json.loads(path.read_text())
    for key in ("q", "s", "m", "n_tokens", "bound_bits", "mode", "inputs", "seed", "protocols"):
        assert key in data
    assert data["mode"] == "exhaustive" and data["inputs"] == 64 and data["bound_bits"] == 6
    assert data["complete"] and data["versions"]["numba"]
    keys = (
        "name",
        "params",
        "layers",
        "declared_bits",
        "distinct_transcripts",
        "log2_distinct",
        "entropy_bits",
        "correct_fraction",
        "meets_bound",
        "collision",
    )
    bc, cc = data["protocols"]
    assert all(k in bc for k in keys)
    assert bc["meets_bound"] and bc["correct_fraction"] == 1 and bc["collision"] is None
    assert not cc["meets_bound"] and cc["collision"]["verified"]
    assert "t = " in res.output and "same transcript" in res.output


def test_transcript_sampled_is_seeded(tmp_path):
    outs = []
    for name in ("a.json", "b.json"):
        path = tmp_path / name
        res = run(
            "transcript",
            "--q",
            "12",
            "--s",
            "3",
            "--samples",
            "300",
            "--seed",
            "5",
            "--quiet",
            "--protocol",
            "kernel:bits=3",
            "--json",
            str(path),
        )
        assert res.exit_code == 0, res.output
        data = json.loads(path.read_text())
        for p in data["protocols"]:
            p.pop("seconds")
        outs.append(data["protocols"])
    assert outs[0] == outs[1]
    assert data["mode"] == "sampled" and data["inputs"] == 300


def test_resume_skips_finished_protocols(tmp_path):
    path = tmp_path / "r.json"
    args = [
        "transcript",
        "--q",
        "2",
        "--s",
        "2",
        "--quiet",
        "--json",
        str(path),
        "--protocol",
        "block-counts",
    ]
    assert run(*args).exit_code == 0
    data = json.loads(path.read_text())
    data["protocols"][0]["entropy_bits"] = -1.0  # a marker that survives only if skipped
    path.write_text(json.dumps(data))
    res = run(*args, "--protocol", "raw", "--resume")
    assert res.exit_code == 0, res.output
    data = json.loads(path.read_text())
    assert [p["name"] for p in data["protocols"]] == ["block-counts", "raw"]
    assert data["protocols"][0]["entropy_bits"] == -1.0
    bad = run("transcript", "--q", "3", "--s", "2", "--quiet", "--json", str(path), "--resume")
    assert bad.exit_code == 2 and "other q/s/seed/mode" in bad.output


def test_protocols_command_lists_builtins():
    res = run("protocols")
    assert res.exit_code == 0
    for name in ("raw", "block-counts", "clipped-counts", "kernel", "multihead"):
        assert name in res.output


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--q", "0"], "--q must be >= 1"),
        (["--s", "0"], "--s must be >= 1"),
        (["--samples", "0", "--sampled"], "--samples must be >= 1"),
        (["--q", "40", "--s", "7", "--exhaustive"], "use --samples"),
        (["--q", "200000", "--s", "400"], "MiB per input"),
        (["--protocol", "nope"], "unknown protocol 'nope'"),
        (["--protocol", "kernel:bits=x"], "bits expects int"),
        (["--protocol", "kernel:zz=1"], "accepted: r"),
        (["--protocol", "/no/such/file.py:X"], "does not exist"),
        (
            ["--protocol", f"{EXAMPLES}:BAD", "--q", "2", "--s", "2"],
            "bad-symbol: layer 1, token 2, slot 1 emitted symbol 7",
        ),
        (["--resume"], "--resume needs --json"),
    ],
)
def test_transcript_bad_input(args, needle, tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text("raise RuntimeError('boom')\n")
    res = run("transcript", "--quiet", *args)
    # the header panel may precede an error found while running
    assert_error_line(res, needle, only_line=False)


def test_plugin_that_fails_to_import(tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text("raise RuntimeError('boom')\n")
    res = run("transcript", "--quiet", "--protocol", f"{broken}:X")
    assert res.exit_code == 2
    assert res.output.strip() == (
        f"error: protocol file {broken} failed to import: RuntimeError: boom"
    )


def test_main_job_console_script():
    """The README's main job, at a small size through the installed script."""
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-m", "sketchsim", "transcript", "--q", "3", "--s", "2"],
        capture_output=True,
        text=True,
        env=dict(os.environ, COLUMNS="200"),
    )
    assert out.returncode == 0, out.stderr
    assert "bound q*log2(s+1)" in out.stdout and "block-counts" in out.stdout
