"""Trained upper bounds on ``r*(m)`` and ``r_signed(m)`` (torch, optional extra), and the bracket.

A table head of rank ``r`` (``phi_Q, phi_K``: ``2^m x r`` tables, softplus for
nonnegative features, raw for signed) and a free vote table are trained on
every condition of the length-3 task at once: query ``x`` among the keys
``{x, u, w}`` for all ``x`` and all ``u <= w`` (for a position-independent head
these are all positions of all ``2^(3m)`` inputs).  The loss is minimax-style:
a smooth maximum (``tau * logsumexp(err / tau)``) of the per-condition errors
plus a hinge on those above 0.4, which finds exact heads where mean-squared
error stalls.  The kernel found is then given its best votes by a linear program
per query (:func:`best_votes`), and the head is reported only after
:func:`sketchsim.certify.table_rank.check_table_head` passes on all inputs.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from sketchsim.certify import save_family
from sketchsim.certify.orders import ORDERS_MAX_M, order_lower_bound
from sketchsim.certify.softmax import closed_form_threshold, exact_softmax_threshold
from sketchsim.certify.table_rank import (
    MINRANK_MAX_M,
    certified_lower,
    check_table_head,
    cube,
    nonneg_lower,
    onehot_construction,
    subset_construction,
)
from sketchsim.errors import SketchsimError
from sketchsim.heads.exhaustive import verify

__all__ = [
    "TrainedHead",
    "train_table_head",
    "best_votes",
    "conditions",
    "search_trained",
    "minrank_row",
]


def conditions(m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """All conditions ``(x, u, w)`` with ``u <= w`` and their targets ``min(<x,u>, <x,w>)``."""
    K = 2**m
    u, w = np.triu_indices(K)
    x = np.repeat(np.arange(K), len(u))
    u = np.tile(u, K)
    w = np.tile(w, K)
    pop = cube(m).sum(1)
    t = np.minimum(pop[x & u], pop[x & w])
    return x, u, w, t


def best_votes(alpha: np.ndarray) -> tuple[np.ndarray, float]:
    """Votes maximizing the worst margin ``1/2 - |y - t|`` of a kernel table, per query by LP.

    Returns ``(votes, margin)``; the head is exact iff ``margin > 0``.  A query with
    a zero denominator on some keys gets margin ``-inf``.
    """
    from scipy.optimize import linprog

    alpha = np.asarray(alpha, dtype=np.float64)
    K = alpha.shape[0]
    m = K.bit_length() - 1
    pop = cube(m).sum(1)
    u, w = np.triu_indices(K)
    votes = np.zeros((K, K))
    worst = np.inf
    for x in range(K):
        a = alpha[x]
        den = a[x] + a[u] + a[w]
        if np.any(np.abs(den) < 1e-300):
            return votes, -np.inf
        t = np.minimum(pop[x & u], pop[x & w])
        # y = (a_x g_x + a_u g_u + a_w g_w) / den; rows are linear in g
        coef = np.zeros((len(u), K))
        rows = np.arange(len(u))
        coef[rows, x] += a[x] / den
        np.add.at(coef, (rows, u), a[u] / den)
        np.add.at(coef, (rows, w), a[w] / den)
        # maximize s: coef g - t <= 1/2 - s and t - coef g <= 1/2 - s; variables (g, s)
        ones = np.ones((len(u), 1))
        A = np.vstack([np.hstack([coef, ones]), np.hstack([-coef, ones])])
        b = np.concatenate([0.5 + t, 0.5 - t])
        c = np.zeros(K + 1)
        c[-1] = -1.0
        bounds = [(None, None)] * K + [(None, 0.5)]
        res = linprog(c, A_ub=A, b_ub=b, bounds=bounds, method="highs")
        if res.status != 0:
            return votes, -np.inf
        votes[x] = res.x[:K]
        worst = min(worst, float(res.x[-1]))
    return votes, worst


@dataclass
class TrainedHead:
    """A trained table head, its exhaustive check and how it was found."""

    m: int
    rank: int
    signed: bool
    seed: int
    steps: int
    train_max_error: float
    margin: float
    exact: bool
    max_abs_error: float
    phi_q: np.ndarray
    phi_k: np.ndarray
    votes: np.ndarray

    def summary(self) -> dict:
        keys = ("m", "rank", "signed", "seed", "steps", "train_max_error", "margin", "exact")
        return {k: getattr(self, k) for k in keys} | {"max_abs_error": self.max_abs_error}

    def save(self, path) -> None:
        """Write the weights (``phi_q``, ``phi_k``, ``votes``) as ``.npz``, atomically."""
        from sketchsim.results import atomic_path

        with atomic_path(path, suffix=".npz") as tmp:
            np.savez_compressed(tmp, phi_q=self.phi_q, phi_k=self.phi_k, votes=self.votes, m=self.m)


def train_table_head(
    m: int,
    rank: int,
    signed: bool = False,
    seed: int = 0,
    steps: int = 2000,
    lr: float = 0.05,
    tau: float = 0.05,
    check_every: int = 100,
) -> TrainedHead:
    """Train one rank-``rank`` table head on all conditions at width ``m`` (one torch thread).

    Stops early once the training error is below 0.45; then the kernel gets LP votes
    (:func:`best_votes`) and the head is checked on all ``2^(3m)`` inputs in float64.
    """
    from sketchsim.experiments import require_torch

    torch = require_torch()
    torch.set_num_threads(1)
    K = 2**m
    gen = torch.Generator().manual_seed(seed)
    softplus = torch.nn.functional.softplus
    x, u, w, t = (torch.as_tensor(a) for a in conditions(m))
    t = t.to(torch.float64)
    T = torch.as_tensor(cube(m), dtype=torch.float64)
    overlap = T @ T.T
    theta_q = torch.randn(K, rank, generator=gen, dtype=torch.float64) * 0.5
    theta_k = torch.randn(K, rank, generator=gen, dtype=torch.float64) * 0.5
    if signed:  # start from a nonnegative point (softplus of the same draw), then move freely
        theta_q, theta_k = softplus(theta_q), softplus(theta_k)
    theta_q.requires_grad_()
    theta_k.requires_grad_()
    votes = overlap.clone().requires_grad_()
    opt = torch.optim.Adam([theta_q, theta_k, votes], lr=lr)

    def features():
        if signed:
            return theta_q, theta_k
        return softplus(theta_q), softplus(theta_k)

    train_err = float("inf")
    done = steps
    for step in range(steps):
        pq, pk = features()
        A = pq @ pk.T
        if signed:  # a positive row scale leaves the head unchanged and fixes the scale
            A = A / (A.abs().mean(1, keepdim=True) + 1e-9)
        AG = A * votes
        num = AG[x, x] + AG[x, u] + AG[x, w]
        den = A[x, x] + A[x, u] + A[x, w]
        loss = 0.0
        if signed:  # keep denominators away from zero, where the head is undefined
            loss = 10.0 * torch.relu(0.05 - den.abs()).mean()
            den = torch.where(den >= 0, den.clamp(min=1e-3), den.clamp(max=-1e-3))
        err = torch.clamp((num / den - t).abs(), max=10.0)
        loss = loss + tau * torch.logsumexp(err / tau, 0) + torch.relu(err - 0.4).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % check_every == check_every - 1 or step == steps - 1:
            train_err = float(err.detach().max())
            if train_err < 0.45:
                done = step + 1
                break
    with torch.no_grad():
        pq, pk = (a.detach().numpy().astype(np.float64) for a in features())
        trained_votes = votes.detach().numpy().astype(np.float64)
    alpha = pq @ pk.T
    lp_votes, margin = best_votes(alpha)
    final = lp_votes if margin > 0 else trained_votes
    check = check_table_head(alpha, final)
    return TrainedHead(
        m=m,
        rank=rank,
        signed=signed,
        seed=seed,
        steps=done,
        train_max_error=train_err,
        margin=float(margin),
        exact=check.exact,
        max_abs_error=check.max_abs_error,
        phi_q=pq,
        phi_k=pk,
        votes=final,
    )


def search_trained(
    m: int, start: int, stop: int, signed: bool, seeds: int, steps: int, on_try=None
):
    """Smallest ``r`` in ``start..stop-1`` at which a trained head is exact on all inputs.

    Tries ``r = start, start + 1, ...`` with seeds ``0..seeds-1`` each and stops at the
    first exact head.  Returns ``(head or None, tries)``, ``tries`` a list of summaries.
    """
    tries = []
    for r in range(max(1, start), stop):
        for seed in range(seeds):
            head = train_table_head(m, r, signed=signed, seed=seed, steps=steps)
            tries.append(head.summary())
            if on_try is not None:
                on_try(head)
            if head.exact:
                return head, tries
    return None, tries


#: Widest m whose largest shattered query set is searched exhaustively.
ORDER_SEARCH_MAX_M = 6


def minrank_row(
    m: int,
    seeds: int = 1,
    steps: int = 2000,
    causal: bool = False,
    train: bool = True,
    out_dir=None,
    on_try=None,
) -> dict:
    """Every bracket of ``r*(m)`` and ``r_signed(m)`` at one width, as a JSON-ready dict.

    Saves the certificate's family (``minrank-m{m}-family.npz``) and the trained
    weights (``minrank-m{m}-{nonneg,signed}-r{r}.npz``) under ``out_dir`` when given.
    """

    if not 1 <= m <= MINRANK_MAX_M:
        raise SketchsimError(f"m must be in 1..{MINRANK_MAX_M}, got {m}")
    row: dict = {"m": m, "inputs": 8**m, "exact_rank": 2**m, "causal": causal}
    lower, family = certified_lower(m, causal)
    row["lower"] = asdict(lower)
    if out_dir is not None:
        path = Path(out_dir) / f"minrank-m{m}-family.npz"
        save_family(family, path)
        row["lower"]["family_file"] = str(path)
    if m <= ORDERS_MAX_M:
        # nonnegative heads only: sign orders (certify/orders.py); the shattered-set
        # search is exhaustive up to m = 6 (20 s at m = 7), the blocks count beyond
        row["lower_nonneg"] = order_lower_bound(m, search=m <= ORDER_SEARCH_MAX_M)
    constructions = [onehot_construction(m, causal=causal)]
    sub = subset_construction(m, causal)
    if sub is not None:
        constructions.append(sub)
    onehot_verify = verify(m, 3, "onehot", beta=1.0, causal=causal) if 3 * m <= 24 else None
    best = min((c for c in constructions if c.check.exact), key=lambda c: c.rank)
    row["construction"] = {
        "name": best.name,
        "rank": best.rank,
        "max_abs_error": best.check.max_abs_error,
        "params": best.params,
        "all": [{"name": c.name, "rank": c.rank, "exact": c.check.exact} for c in constructions],
        "onehot_verify_exact_fraction": None
        if onehot_verify is None
        else onehot_verify.exact_fraction,
    }
    soft = exact_softmax_threshold(m, causal=causal)
    row["softmax"] = {
        "sufficient": soft.sufficient,
        "exact_fails": soft.fails,
        "exact": soft.exact,
        "closed_form": closed_form_threshold(m),
    }
    if train:
        for kind, signed, start in (
            ("nonneg", False, max(lower.certified_rank, nonneg_lower(row))),
            ("signed", True, 1),
        ):
            stop = best.rank
            if kind == "signed" and row["trained_nonneg"]["rank"] is not None:
                stop = row["trained_nonneg"]["rank"]  # a nonnegative head is a signed head
            head, tries = search_trained(m, start, stop, signed, seeds, steps, on_try)
            entry = {"rank": None, "tries": tries, "weights_file": None, "via": None}
            if head is not None:
                entry.update(rank=head.rank, seed=head.seed, max_abs_error=head.max_abs_error)
                if out_dir is not None:
                    path = Path(out_dir) / f"minrank-m{m}-{kind}-r{head.rank}.npz"
                    head.save(path)
                    entry["weights_file"] = str(path)
            elif kind == "signed" and stop < best.rank:
                entry.update(rank=stop, via="nonneg head")
            row[f"trained_{kind}"] = entry
    return row
