import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from cliutil import assert_error_line

from sketchsim.cli import main

EXAMPLES = Path(__file__).parents[1] / "protocol_examples.py"


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
    # the first cell of each table row: a name inside a description would not count
    rows = {
        line.split("│")[1].strip(): line.split("│")[2].strip()
        for line in res.output.splitlines()
        if line.startswith("│") and line.split("│")[1].strip()
    }
    for name in ("raw", "block-counts", "clipped-counts", "kernel", "multihead", "trained"):
        assert rows.get(name) == "built-in", (name, rows)


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


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--q", "400", "--s", "7", "--exhaustive"], "above the limit 2^24"),
        (["--q", "2000", "--s", "7", "--samples", "60000000"], "above the memory limit"),
        (["--seed", "-1"], "--seed must be in 0..2^63-1"),
        (["--samples", "-5"], "--samples must be >= 1"),
        (["--family", "nope"], "unknown family 'nope'"),
        (["--family", "mqar:keys=x"], "family mqar: parameter keys expects int"),
    ],
)
def test_transcript_sizes_refused_before_allocating(args, needle):
    res = run("transcript", "--quiet", *args)
    assert_error_line(res, needle)


def test_limit_messages_state_limit_estimate_and_way_past():
    res = run("transcript", "--q", "2000", "--s", "7", "--samples", "60000000", "--quiet")
    assert_error_line(res, "GiB")
    line = res.output.strip()
    assert "114 GiB" in line or "115 GiB" in line or "GiB (" in line
    assert "8 GiB" in line and "SKETCHSIM_MAX_MEMORY_GB" in line
    res = run("transcript", "--q", "400", "--s", "7", "--exhaustive", "--quiet")
    assert "2^1200.0" in res.output and "use --samples" in res.output


def test_memory_limit_from_environment(monkeypatch):
    monkeypatch.setenv("SKETCHSIM_MAX_MEMORY_GB", "0.0001")
    res = run("transcript", "--q", "8", "--s", "3", "--samples", "5000", "--sampled", "--quiet")
    assert_error_line(res, "above the memory limit 0.0001 GiB")


def test_large_q_sampled_renders_without_overflow():
    res = run(
        "transcript",
        "--q",
        "342",
        "--s",
        "7",
        "--samples",
        "10",
        "--quiet",
        "--protocol",
        "block-counts",
    )
    assert res.exit_code == 0, res.output
    assert "2^1026.0 inputs exist" in res.output


def test_sampled_mode_shows_entry_measures(tmp_path):
    path = tmp_path / "s.json"
    res = run(
        "transcript",
        "--q",
        "12",
        "--s",
        "7",
        "--samples",
        "3000",
        "--sampled",
        "--quiet",
        "--verbose",
        "--protocol",
        "block-counts",
        "--protocol",
        "clipped-counts",
        "--json",
        str(path),
    )
    assert res.exit_code == 0, res.output
    header = _table_header(res.output)
    assert "entry entropy" in header and "used bits" in header
    assert "log2 distinct" not in header  # capped by the sample: JSON only
    assert "per layer" in res.output
    assert "clipped-counts: entry entropy" in res.output
    assert "cannot be correct on this distribution" in res.output
    data = json.loads(path.read_text())
    bc, cc = data["protocols"]
    assert bc["capped"] and bc["distinct_transcripts"] == 3000
    assert bc["entry_entropy_ci"][0] <= 36 <= bc["entry_entropy_ci"][1]
    assert not bc["entry_entropy_below_bound"] and cc["entry_entropy_below_bound"]
    assert bc["layers"][0]["used_bits"] == pytest.approx(36.0)
    assert data["family"] == "hard"


def _table_header(output: str) -> str:
    """The results table's header line (the one that starts with "protocol")."""
    lines = [ln for ln in output.splitlines() if ln.strip().startswith("protocol ")]
    assert len(lines) == 1, output
    return lines[0]


def test_exhaustive_mode_keeps_distinct_and_adds_entry_measures():
    res = run("transcript", "--q", "3", "--s", "3", "--quiet", "--protocol", "kernel")
    assert res.exit_code == 0, res.output
    header = _table_header(res.output)
    for col in ("log2 distinct", "entropy", "used bits", "entry entropy"):
        assert col in header, header
    row = next(ln.split() for ln in res.output.splitlines() if ln.strip().startswith("kernel "))
    cols = header.split("  ")
    cols = [c.strip() for c in cols if c.strip()]
    # kernel at the default 8 bits, r = 1, on all 64 inputs of F(3, 3): a proof at 6 distinct bits
    assert dict(zip(cols, row, strict=True))["log2 distinct"] == "6.00"


def test_resume_refuses_another_family(tmp_path):
    path = tmp_path / "f.json"
    args = ["transcript", "--q", "2", "--s", "3", "--quiet", "--json", str(path)]
    res = run(*args, "--protocol", "block-counts")
    assert res.exit_code == 0, res.output
    assert json.loads(path.read_text())["family_params"] == {}
    res = run(*args, "--family", "mqar", "--protocol", "kv-sum", "--resume")
    assert_error_line(res, "cannot resume", only_line=False)
