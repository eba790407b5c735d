"""Training steps of the reproduce suites: sketchsim's ``fit`` against the torch a user would write.

The peer is the head as THEORY section 2 writes it, in plain torch: per-input
features and ``einsum`` pair products, ``torch.optim.Adam``, and the same
exactness check per step (the max error), on the same data, in the same run.
sketchsim's ``fit`` computes heads on the vocabulary of distinct tokens where
that pays (:mod:`sketchsim.experiments.vocabulary`), runs the readouts and the
per-input softmax as jitted kernels, and Adam on one flat buffer.

    python benchmarks/bench_torch.py [--threads T] [--steps S] [--repeats R] [--quick]

Prints ms per step (minimum over repeats) and the ratio peer / sketchsim.
"""

from __future__ import annotations

import argparse
import time

import torch
from ratios import report
from torch.nn import functional as F

from sketchsim.certify import build_witness
from sketchsim.certify.codes import hadamard_code
from sketchsim.experiments.models import KernelHead, make_head
from sketchsim.experiments.suites import ood_splits, random_triples, witness_split
from sketchsim.experiments.sweep import _tensors
from sketchsim.experiments.train import fit


def user_forward(head, x, ids):
    """THEORY section 2 in plain torch, per input (``head`` is an ``Encoded`` head)."""
    h, x = head.head, 2 * x - 1
    if isinstance(h, KernelHead):
        if h.phi_q.reads_ids:
            pq, pk = F.softplus(h.phi_q.table(ids)), F.softplus(h.phi_k.table(ids))
        else:
            pq, pk = h.phi_q(x), h.phi_k(x)
        k = torch.einsum("bir,bjr->bij", pq, pk)
        o = torch.einsum("bij,bjd->bid", k, h.value(x)) / (k.sum(-1, keepdim=True) + h.eps)
    else:
        s = torch.einsum("bie,bje->bij", h.q(x), h.k(x)) * h.log_beta.exp()
        o = torch.einsum("bij,bjd->bid", torch.softmax(s, -1), h.value(x))
    return (h.a(x) * o).sum(-1) + h.b(x).squeeze(-1)


def user_steps(head, x, ids, t, scored, steps: int) -> None:
    opt = torch.optim.Adam(head.parameters(), lr=0.01)
    for _ in range(steps):
        opt.zero_grad()
        y = user_forward(head, x, ids)
        y = y if scored is None else y[:, scored : scored + 1]
        if float((y.detach() - t).abs().max()) < 1e-9:  # the same per-step exactness check
            break
        ((y - t) ** 2).mean().backward()
        opt.step()


def best_ms(fn, repeats: int, steps: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, (time.perf_counter() - start) / steps)
    return best


def workloads(quick: bool):
    family = build_witness(hadamard_code(24), "hadamard", 12)
    witness = witness_split(family)
    train, _ = ood_splits(12, 256, 1000, 0)
    rand = random_triples(24, 1000 if quick else 4000, 0)
    yield "witness table r=32", witness, ("kernel", 24, 32, "table")
    yield f"softmax on {len(rand.tokens):,} random triples", rand, ("softmax", 24, 0, "-")
    yield "ood 12:256 elu1 r=64", train, ("kernel", 12, 64, "elu1")
    yield "ood 12:256 softmax", train, ("softmax", 12, 0, "-")


def measure(name, split, spec, steps: int, repeats: int) -> tuple:
    """One report row: ms per step of ``fit`` and of the plain-torch loop."""
    model, m, r, fmap = spec
    x, ids, t, vocab = _tensors(split, "cpu", torch.float32)

    def head():
        return make_head(model, m, r, fmap, vocab=vocab, seed=0, encoding="pm1")

    with torch.no_grad():  # the peer computes the same function
        h = head()
        assert torch.allclose(user_forward(h, x, ids), h(x, ids), rtol=1e-4, atol=1e-4), name

    def ours():
        fit(head(), x, ids, t, steps=steps, lr=0.01, scored=split.scored, stop_below=1e-9)

    def theirs():
        user_steps(head(), x, ids, t, split.scored, steps)

    ours()  # compile the jitted kernels, warm the caches
    return (
        f"train step: {name}",
        best_ms(ours, repeats, steps),
        "torch einsum + optim.Adam",
        best_ms(theirs, repeats, steps),
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--quick", action="store_true", help="fewer steps and random triples")
    args = ap.parse_args()
    steps = 30 if args.quick else args.steps
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {args.threads} thread(s), {steps} steps per repeat")
    rows = [measure(*w, steps, args.repeats) for w in workloads(args.quick)]
    report("bench_torch", rows)


if __name__ == "__main__":
    main()
