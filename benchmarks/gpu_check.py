"""GPU check of the torch path: the same training runs on the device and on the CPU, compared.

Run: python benchmarks/gpu_check.py [--device cuda|cpu] [--json PATH] [--tiny]

Steps, each reported with ``name`` and ``ok`` (the JSON's ``steps``):

1. ``torch-tests``: ``pytest tests/experiments`` with ``SKETCHSIM_TEST_DEVICE``
   set to the device.  The step records whether any test reads that variable;
   when none does (the case at the time of writing) the tests exercise the CPU
   path only, and the step says so in its ``note``.
2. ``witness-sweep``: a shrunk witness plan (two ranks and the softmax head,
   one seed) trained on the device, on the CPU in float32, and on the CPU in
   float64.
3. ``ood-scale``: one OOD scale of the default plan, the same three ways.
4. ``capacity-cell``: one cell of the ``capacity`` suite, if
   ``sketchsim/experiments/plan.py`` defines it (otherwise the step is
   reported as skipped, with ``ok`` null).

Every float metric of every run is compared with the tolerance rule of
``tests/numerics.py``: the device's float32 value must lie within
``MARGIN * (|cpu32 - cpu64| + eps32 |cpu64|)`` of the CPU's float32 value,
the float64 run measuring how far float32 rounding moves this computation.
Training steps are timed on both (seconds per optimizer step, from the runs'
own ``seconds`` and ``steps``).  ``--device cpu`` runs the same steps with the
CPU as the device (CI runs it that way, with ``--tiny``).  ``--tiny`` shrinks
every run to a few steps and the test step to one file.

Sized to finish in under 5 minutes on one GPU plus the host's CPUs (the CPU
reference runs dominate); exit status 0 when every step that ran is ok, 1 when
one is not, 2 on bad input (no CUDA for ``--device cuda``).
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import time
from dataclasses import fields, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import numerics  # noqa: E402  (tests/numerics.py: the tolerance rule)

#: Float metrics a run records, compared device against CPU.
METRICS = (
    "sequence_error",
    "position_error",
    "max_abs_error",
    "train_sequence_error",
    "train_max_abs_error",
    "test_sequence_error",
    "test_accuracy",
    "accuracy",
    "train_accuracy",
)
DEVICE_ENV = "SKETCHSIM_TEST_DEVICE"


def _key(run: dict) -> tuple:
    """A run's spec without its dtype and device: the same training on each backend."""
    return tuple(
        sorted((k, str(v)) for k, v in run["spec"].items() if k not in ("dtype", "device"))
    )


def compare_runs(device_runs: list, cpu32: list, cpu64: list) -> list[dict]:
    """Per run and metric: the device value, the CPU float32 value, the allowed difference."""
    by32 = {_key(r): r for r in cpu32}
    by64 = {_key(r): r for r in cpu64}
    rows = []
    for run in device_runs:
        k = _key(run)
        ref32, ref64 = by32[k], by64[k]
        for metric in METRICS:
            got, want, exact = run.get(metric), ref32.get(metric), ref64.get(metric)
            if got is None or want is None or exact is None:
                continue
            tol = numerics.MARGIN * numerics.rounding_scale(want, exact)
            diff = abs(float(got) - float(want))
            rows.append(
                {
                    "spec": dict(k),
                    "model": run["spec"]["model"],
                    "rank": run["spec"]["rank"],
                    "scale": run["spec"].get("scale", ""),
                    "metric": metric,
                    "device": float(got),
                    "cpu_float32": float(want),
                    "cpu_float64": float(exact),
                    "difference": diff,
                    "allowed": tol,
                    "ok": bool(diff <= tol),
                }
            )
    return rows


def step_timing(runs: list) -> float | None:
    """Seconds per optimizer step over the runs (their recorded seconds over their steps)."""
    steps = sum(r["steps"] for r in runs)
    return sum(r["seconds"] for r in runs) / steps if steps else None


def sweep_step(name: str, plan, device: str) -> dict:
    """Train ``plan`` on ``device``, on the CPU in float32 and in float64; compare and time."""
    from sketchsim import api

    t0 = time.perf_counter()
    dev = api.sweep(plan, device=device).runs
    cpu32 = api.sweep(plan, device="cpu").runs
    cpu64 = api.sweep(replace(plan, dtype="float64"), device="cpu").runs
    rows = compare_runs(dev, cpu32, cpu64)
    ran_on = sorted({str(r.get("device", "unrecorded")) for r in dev})
    # a run that records its device must have run on the one asked for; runs that record
    # none (the capacity suite at the time of writing) are flagged in the note
    wrong = [d for d in ran_on if d != "unrecorded" and not d.startswith(device)]
    notes = []
    if "unrecorded" in ran_on:
        notes.append("these runs do not record their device: the check cannot confirm it was used")
    if any(r["spec"].get("dtype") != "float64" for r in cpu64):
        notes.append(
            "the float64 reference runs do not record dtype float64, so the rounding scale "
            "may be that of float32 alone (a strict tolerance)"
        )
    return {
        "name": name,
        "ok": bool(rows) and all(r["ok"] for r in rows) and not wrong,
        "note": "; ".join(notes) or None,
        "runs": len(dev),
        "ran_on": {
            "device": ran_on,
            "cpu": sorted({str(r.get("device", "unrecorded")) for r in cpu32 + cpu64}),
        },
        "comparisons": rows,
        "seconds_per_step": {"device": step_timing(dev), "cpu": step_timing(cpu32)},
        "seconds": time.perf_counter() - t0,
    }


def tests_step(device: str, tiny: bool) -> dict:
    """``pytest tests/experiments`` with the device in the environment."""
    target = ["tests/experiments/test_stats.py"] if tiny else ["tests/experiments"]
    reads = any(DEVICE_ENV in p.read_text() for p in (ROOT / "tests").rglob("*.py"))
    env = {**os.environ, DEVICE_ENV: device}
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *target],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    tail = (proc.stdout + proc.stderr).strip().splitlines()[-1:] or [""]
    return {
        "name": "torch-tests",
        "ok": proc.returncode == 0,
        "target": target,
        "summary": tail[0],
        "device_variable_read": reads,
        "note": None
        if reads
        else (f"no test reads {DEVICE_ENV}: these tests ran on the CPU whatever the device"),
        "seconds": time.perf_counter() - t0,
    }


def plans(tiny: bool) -> dict:
    """The shrunk plans of the sweep steps (``None`` for a suite that does not exist)."""
    from sketchsim.experiments.plan import SUITES, default_plan

    steps = {"steps": 5, "softmax_steps": 5} if tiny else {}
    witness = replace(
        default_plan("witness"), ranks=(2,) if tiny else (8, 16), seeds=1, softmax_seeds=1, **steps
    )
    ood = default_plan("ood")
    ood = replace(
        ood,
        scales="6:8:20" if tiny else ood.scales.split(",")[0],
        ranks=(2,) if tiny else (16, 64),
        seeds=1,
        softmax_seeds=1,
        **steps,
    )
    capacity = None
    if "capacity" in SUITES:
        cap = default_plan("capacity")
        # one cell: the first of every axis the plan sweeps
        axes = {
            f.name: getattr(cap, f.name)[:1]
            for f in fields(cap)
            if f.name
            in ("ranks", "models", "qs", "ss", "layer_counts", "head_counts", "value_widths")
        }
        capacity = replace(
            cap, seeds=1, softmax_seeds=1, scales=cap.scales.split(",")[0], **axes, **steps
        )
    return {"witness-sweep": witness, "ood-scale": ood, "capacity-cell": capacity}


def run_check(device: str, tiny: bool) -> dict:
    from sketchsim.experiments import require_torch

    require_torch()
    import torch

    from sketchsim.errors import SketchsimError

    if device == "cuda" and not torch.cuda.is_available():
        raise SketchsimError("CUDA is not available (device cuda was requested)", param="device")
    steps = [tests_step(device, tiny)]
    for name, plan in plans(tiny).items():
        if plan is None:
            steps.append(
                {
                    "name": name,
                    "ok": None,
                    "skipped": "no capacity suite in sketchsim/experiments/plan.py (SUITES) yet",
                }
            )
            continue
        steps.append(sweep_step(name, plan, device))
    return {
        "device": device,
        "device_name": torch.cuda.get_device_name(0) if device == "cuda" else "cpu",
        "tiny": tiny,
        "steps": steps,
        "ok": all(s["ok"] is not False for s in steps),
    }


def _fmt(x: float | None) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{x * 1e3:.2f} ms"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--tiny", action="store_true", help="a few steps per run (CI)")
    args = parser.parse_args(argv)

    from sketchsim.errors import SketchsimError
    from sketchsim.results import result_payload, write_json_atomic

    try:
        out = run_check(args.device, args.tiny)
    except SketchsimError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for s in out["steps"]:
        word = {True: "ok", False: "FAILED", None: "skipped"}[s["ok"]]
        extra = s.get("skipped") or s.get("note") or s.get("summary") or ""
        if "seconds_per_step" in s:
            t = s["seconds_per_step"]
            bad = [r for r in s["comparisons"] if not r["ok"]]
            extra = (
                f"runs on {','.join(s['ran_on']['device'])}; "
                f"{len(s['comparisons'])} metrics compared, {len(bad)} outside the rounding "
                f"tolerance; per training step: {args.device} {_fmt(t['device'])}, "
                f"cpu {_fmt(t['cpu'])}"
            )
        print(f"{s['name']:15s} {word:8s} {extra}")
        if s.get("note") and "seconds_per_step" in s:
            print(f"{'':24s} note: {s['note']}")
    if args.json:
        params = {"device": args.device, "tiny": args.tiny, "json": str(args.json)}
        write_json_atomic(args.json, result_payload("gpu_check", params, out))
    return 0 if out["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
