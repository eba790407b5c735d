"""The engine's unowned views never outlive their buffers (issue 9: exit 139 at q = 342)."""

import subprocess
import sys


def test_large_raw_sketch_runs_in_a_fresh_process(tmp_path):
    # F(260, 7) with raw: 4-bit fields, a 119,277-entry sketch per input.  Before the
    # fix numba freed the engine's buffers before the loop and this run segfaulted.
    out = tmp_path / "t.json"
    cmd = [sys.executable, "-m", "sketchsim", "transcript", "--q", "260", "--s", "7"]
    cmd += ["--samples", "10", "--protocol", "raw", "--quiet", "--json", str(out)]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert '"correct_fraction": 1.0' in out.read_text()
