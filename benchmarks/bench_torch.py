"""Torch table head: one training step with softplus and the kernel computed on
the vocabulary, then gathered (what ``KernelHead`` does for the table map),
against the naive per-token softplus and kernel (``softplus(table(ids))`` on
``[B, N, r]``, then ``einsum``), measured in the same run.

    python benchmarks/bench_torch.py [--threads T]

Prints ms per step (minimum of the repeats) and the ratio naive / ours for the
witness family's shapes (408 inputs, 36 distinct tokens) at several ranks.
"""

from __future__ import annotations

import argparse
import time

import torch
from torch.nn import functional as F

from sketchsim.certify import build_witness
from sketchsim.codes import hadamard_code
from sketchsim.experiments.models import make_head
from sketchsim.experiments.train import token_ids


def naive_forward(self, x, ids=None):
    """The first round's forward: per-token softplus, per-input kernel."""
    pq, pk = F.softplus(self.phi_q.table(ids)), F.softplus(self.phi_k.table(ids))
    k = torch.einsum("bir,bjr->bij", pq, pk)
    o = torch.einsum("bij,bjd->bid", k, self.value(x)) / (k.sum(-1, keepdim=True) + self.eps)
    return (self.a(x) * o).sum(-1) + self.b(x).squeeze(-1)


def step_ms(head, x, ids, t, repeats: int, steps: int) -> float:
    opt = torch.optim.Adam(head.parameters(), lr=0.01)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(steps):
            opt.zero_grad()
            y = head(x, ids)[:, :1]
            ((y - t) ** 2).mean().backward()
            opt.step()
        best = min(best, (time.perf_counter() - start) / steps)
    return best * 1e3


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--steps", type=int, default=20)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    fam = build_witness(hadamard_code(24), "hadamard", 12)
    ids_np, vocab = token_ids(fam.tokens)
    x = torch.tensor(fam.tokens, dtype=torch.float32)
    ids = torch.tensor(ids_np)
    t = torch.tensor(fam.targets, dtype=torch.float32)[:, None]
    print(f"torch {torch.__version__}, {args.threads} thread(s), {len(x)} inputs, vocab {vocab}")
    print(f"{'r':>6} {'vocab+gather ms':>16} {'per-token ms':>13} {'naive/ours':>11}")
    for r in (8, 64, 256, 1024):
        ours = make_head("kernel", 24, r, "table", vocab=vocab, seed=0)
        naive = make_head("kernel", 24, r, "table", vocab=vocab, seed=0)
        naive.forward = naive_forward.__get__(naive)
        with torch.no_grad():
            same = torch.allclose(ours(x, ids), naive(x, ids), rtol=1e-6, atol=1e-6)
        a = step_ms(ours, x, ids, t, args.repeats, args.steps)
        b = step_ms(naive, x, ids, t, args.repeats, args.steps)
        print(f"{r:>6} {a:>16.3f} {b:>13.3f} {b / a:>10.2f}x  outputs agree: {same}")


if __name__ == "__main__":
    main()
