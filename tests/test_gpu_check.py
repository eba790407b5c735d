"""benchmarks/gpu_check.py runs its steps with the CPU as the device (what CI can run)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_gpu_check_on_cpu_tiny(tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "gpu_check.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "gpu_check.py"),
            "--device",
            "cpu",
            "--tiny",
            "--json",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads(out.read_text())
    names = [s["name"] for s in data["steps"]]
    assert names == ["torch-tests", "witness-sweep", "ood-scale", "capacity-cell"]
    for step in data["steps"]:
        assert step["ok"] in (True, None), step
        if step["ok"] is None:  # only a suite that does not exist may be skipped
            assert step["name"] == "capacity-cell" and "capacity" in step["skipped"]
    sweeps = [s for s in data["steps"] if "comparisons" in s]
    assert sweeps and all(s["comparisons"] for s in sweeps)
    for s in sweeps:
        # the CPU as the device: the same deterministic runs, so no difference at all
        assert all(c["difference"] == 0.0 for c in s["comparisons"]), s["name"]
        assert s["seconds_per_step"]["device"] > 0 and s["seconds_per_step"]["cpu"] > 0
        if s["name"] in ("witness-sweep", "ood-scale"):
            assert s["ran_on"] == {"device": ["cpu"], "cpu": ["cpu"]}
        else:  # a suite whose runs do not record their device says so
            assert set(s["ran_on"]["device"]) <= {"cpu", "unrecorded"}
            assert "unrecorded" not in s["ran_on"]["device"] or "device" in s["note"]
    assert data["command"] == "gpu_check" and "versions" in data


def test_gpu_check_refuses_cuda_without_cuda(tmp_path):
    pytest.importorskip("torch")
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}  # no GPU visible, on any machine
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "gpu_check.py"), "--device", "cuda", "--tiny"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].startswith("error:") and "CUDA" in proc.stderr
    assert "Traceback" not in proc.stderr
