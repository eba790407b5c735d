"""Seeds trained as one batched model (``torch.func.vmap``) against one at a time (issue #45).

Run: python benchmarks/bench_batched_training.py [--members M] [--repeat R] [--quick] [--json PATH]

Issue #45 asks the capacity plan to train seeds (and learning rates) as one batched
model, at least 5x faster than one model at a time.  Before building that into the
sweep, this measures what batching can give: for each architecture of the capacity
suite (the default plan's kernel heads, ``elu1`` and ``signed``, r = 1, d = 16; and
the causal kinds of the #44 sweep, r = 2, d = 16), ``M`` seeded models on F(8,3)'s
512 training inputs (the default plan's largest training set), one torch thread:

- batched: the models' weights stacked (``torch.func.stack_module_state``) and one
  ``vmap`` of the model's forward, one backward of the summed losses (each model's
  gradient is its own loss's), one Adam step on the stacked weights;
- one at a time: the ``M`` models' forward, backward and ``torch.optim.Adam`` step,
  one after the other (what the sweep does today, per step).

Before timing, the batched outputs are compared with the models' own (largest
difference printed).

``--sweep`` times whole sweeps instead: a causal capacity plan of 3 seeds x 4 learning
rates (GLA, DeltaNet, Mamba; F(8,3); r = 2, d = 16; ``--steps`` steps, 200 by default)
trained by ``sketchsim.api.sweep`` with and without ``batch``, one after the other in
this process, and the largest difference of their rows' accuracies.  Times are warm,
min of repeats; a time is this machine's at
that moment, not a claim.
"""

from __future__ import annotations

import argparse
import copy
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from ratios import best_of, report  # noqa: E402

#: (label, model, arch, feature map, rank)
CASES = (
    ("elu1 (kernel)", "kernel", "", "elu1", 1),
    ("signed (kernel)", "signed", "", "signed", 1),
    ("linear-elu1", "causal", "linear", "elu1", 2),
    ("based", "causal", "based", "elu1", 2),
    ("gla", "causal", "gla", "elu1", 2),
    ("deltanet", "causal", "deltanet", "elu1", 2),
    ("gated-deltanet", "causal", "gated-deltanet", "elu1", 2),
    ("mamba", "causal", "mamba", "elu1", 2),
)


def setup(model: str, arch: str, fmap: str, rank: int, members: int):
    """``M`` seeded models of one case, their stacked weights and the training batch."""
    from sketchsim.experiments.capacity_suite import (
        CapacitySpec,
        build_model,
        family_answers,
        input_tensor,
    )
    from sketchsim.sketch.family_plugins import make_family

    fam = make_family("hard", 8, 3)
    T = family_answers(fam, 512, 0, 11)
    X = input_tensor(fam, T)
    t = torch.as_tensor(T.astype("float32"))
    specs = [CapacitySpec("hard", 8, 3, model, 1, 1, rank, 16, fmap, seed, arch=arch)
             for seed in range(members)]  # fmt: skip
    models = [build_model(s, fam.m, fam.q) for s in specs]
    return models, X, t, fam.q


def batched_step(models, X, t, q):
    """The stacked models' training step: ``step()`` runs one."""
    from torch.func import functional_call, stack_module_state, vmap

    params, buffers = stack_module_state(models)
    base = copy.deepcopy(models[0]).to("meta")

    def forward(p, b):
        return vmap(lambda p_, b_: functional_call(base, (p_, b_), (X,)))(p, b)[..., :q]

    opt = torch.optim.Adam(list(params.values()), 1e-3)

    def step():
        y = forward(params, buffers)
        loss = ((y - t) ** 2).mean((1, 2)).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()

    return forward, params, buffers, step


def loop_step(models, X, t, q):
    """The models' training steps one after the other: ``step()`` runs one of each."""
    opts = [torch.optim.Adam(m.parameters(), 1e-3) for m in models]

    def step():
        for m, opt in zip(models, opts, strict=True):
            loss = ((m(X)[:, :q] - t) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()

    return step


def sweep_pair(steps: int) -> dict:
    """The causal grid plan's sweep with and without ``batch``: wall seconds and rows."""
    import time

    from sketchsim.api import sweep
    from sketchsim.experiments.plan import default_plan

    plan = default_plan("capacity").with_(
        models=(), archs=("gla", "deltanet", "mamba"), qs=(8,), ss=(3,), layer_counts=(1,),
        ranks=(2,), value_widths=(16,), seeds=3, lrs=(0.003, 0.01, 0.03, 0.1), steps=steps,
        softmax_seeds=1)  # fmt: skip
    out = {}
    for batch in (False, True):
        t = time.perf_counter()
        res = sweep(plan.with_(batch=batch), device="cpu")
        out[batch] = (time.perf_counter() - t, res.runs)
    (one_s, one), (many_s, many) = out[False], out[True]
    diff = max(abs(a["accuracy"] - b["accuracy"]) for a, b in zip(one, many, strict=True))
    same_steps = sum(a["steps"] == b["steps"] for a, b in zip(one, many, strict=True))
    return {"runs": len(one), "steps": steps, "one_at_a_time_s": one_s, "batched_s": many_s,
            "max_accuracy_difference": diff, "same_steps": same_steps}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--members", type=int, default=3, help="models per batch (the plan's seeds)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="two cases, one repeat")
    ap.add_argument("--json", metavar="PATH")
    ap.add_argument("--sweep", action="store_true", help="time whole sweeps (module docstring)")
    ap.add_argument("--steps", type=int, default=200, help="with --sweep: steps per run")
    args = ap.parse_args()
    torch.set_num_threads(1)
    if args.sweep:
        res = sweep_pair(args.steps)
        print(f"{res['runs']} runs: {res['same_steps']} stop at the same step; accuracies "
              f"differ by at most {res['max_accuracy_difference']:.4f}")  # fmt: skip
        report("bench_batched_training", [(f"sweep of {res['runs']} runs, {args.steps} steps",
               res["batched_s"], "one at a time", res["one_at_a_time_s"])])  # fmt: skip
        if args.json:
            from sketchsim.machine import machine_facts
            from sketchsim.results import write_json_atomic

            write_json_atomic(args.json, {"what": "--sweep", "machine": machine_facts(),
                                          "torch": torch.__version__, **res})  # fmt: skip
        return
    cases = CASES[::4] if args.quick else CASES
    repeat = 1 if args.quick else args.repeat
    rows, out = [], []
    for label, model, arch, fmap, rank in cases:
        models, X, t, q = setup(model, arch, fmap, rank, args.members)
        forward, params, buffers, bstep = batched_step(models, X, t, q)
        with torch.no_grad():
            diff = float((forward(params, buffers) - torch.stack([m(X)[:, :q] for m in models]))
                         .abs().max())  # fmt: skip
        lstep = loop_step(models, X, t, q)
        bstep(), lstep()  # warm
        batched = best_of(lambda b=bstep: [b() for _ in range(5)], repeat) / 5
        one_by_one = best_of(lambda s=lstep: [s() for _ in range(5)], repeat) / 5
        print(f"{label}: largest output difference {diff:.2e}")
        rows.append((f"{label}, {args.members} models, F(8,3)", batched, "one at a time",
                     one_by_one))  # fmt: skip
        out.append({"case": label, "members": args.members, "batched_s": batched,
                    "one_at_a_time_s": one_by_one, "max_output_difference": diff})  # fmt: skip
    report("bench_batched_training", rows)
    if args.json:
        from sketchsim.machine import machine_facts
        from sketchsim.results import write_json_atomic

        write_json_atomic(args.json, {"what": __doc__.splitlines()[0], "machine": machine_facts(),
                                      "torch": torch.__version__, "threads": 1,
                                      "rows": out})  # fmt: skip


if __name__ == "__main__":
    main()
