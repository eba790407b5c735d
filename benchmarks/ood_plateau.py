"""Why OOD kernel heads plateau below exact accuracy: the plateau ablation, on validation only.

Run: python benchmarks/ood_plateau.py [--scales S] [--rank R] [--seeds N] [--steps K] --json PATH

Trains the ``elu1`` kernel head of the OOD plan under each variant of
:data:`sketchsim.experiments.ablation.PLATEAU_VARIANTS` (the plan's protocol;
4x the step budget; float64; 2x the triples; 4x the rank) on the validation
splits of the OOD train pools (:func:`sketchsim.experiments.suites.ood_validation`;
the test pool is never drawn), prints the mean validation accuracy per variant
and scale, and writes every run with provenance to ``--json``.  One torch
thread.  The file is rewritten after every run (``complete`` false until the
last), so a stopped run keeps what it measured.  docs/results.md ("Why the
kernel heads plateau") reads the file.
"""

from __future__ import annotations

import argparse
import sys


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scales", default="8:64:2000,10:128:2000,12:256:2000")
    parser.add_argument("--rank", type=int, default=64)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--json", required=True)
    args = parser.parse_args(argv)
    if args.rank < 1 or args.seeds < 1 or args.steps < 1:
        print("error: --rank, --seeds and --steps must be >= 1", file=sys.stderr)
        return 2

    import numpy as np
    import torch

    from sketchsim.errors import SketchsimError
    from sketchsim.experiments.ablation import screen_plateau
    from sketchsim.results import result_payload, write_json_atomic

    torch.set_num_threads(1)

    params = {k: getattr(args, k) for k in ("scales", "rank", "seeds", "steps")}
    rows: list[dict] = []

    def save(complete: bool) -> list[dict]:
        means: dict[tuple, list[float]] = {}
        for r in rows:
            means.setdefault((r["variant"], r["scale"]), []).append(r["validation_accuracy"])
        summary = [
            {"variant": v, "scale": s, "mean": float(np.mean(a)), "seeds": len(a)}
            for (v, s), a in means.items()
        ]
        result = {"rows": rows, "summary": summary, "complete": complete}
        write_json_atomic(args.json, result_payload("ood_plateau", params, result))
        return summary

    def show(row):
        rows.append(row)
        save(False)  # every finished run is on disk: a stopped run keeps what it measured
        print(
            f"{row['scale']} seed {row['seed']} {row['variant']}: validation "
            f"{row['validation_accuracy']:.4f}, steps {row['steps']}/{row['step_cap']}, "
            f"train max error {row['train_max_abs_error']:.3f}",
            flush=True,
        )

    try:
        screen_plateau(args.scales, args.rank, args.seeds, args.steps, progress=show)
    except SketchsimError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for c in save(True):
        print(f"| {c['variant']} | {c['scale']} | {c['mean']:.4f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
