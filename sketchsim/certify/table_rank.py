"""The smallest feature rank of a single table head on the whole length-3 task (THEORY section 4).

``r*(m)`` is the smallest ``r`` for which one normalized nonnegative kernel head
with arbitrary maps on ``{0,1}^m`` (a ``table`` head: ``phi_Q, phi_K`` any
``2^m x r`` tables, any value dimension, query-dependent affine readout) has
error < 1/2 at every position of every input of ``({0,1}^m)^3``;
``r_signed(m)`` the same with signed features and nonzero denominators
(docs/theory.md).  With any value dimension the readout's votes
``g(x, u) = <a(x), v(u)> + b(x)`` are an arbitrary ``2^m x 2^m`` table, so a
head is ``(alpha, votes)`` with ``alpha = phi_Q phi_K^T`` of rank ``r``.

This module brackets ``r*(m)``:

- :func:`certified_lower`: the best certificate of :mod:`sketchsim.certify`
  over constant-weight codes of every weight and distance (complement queries
  are optimal for every pair at once), realized as a family and re-certified;
- :func:`subset_construction`: explicit nonnegative features indexed by subsets
  of size <= p (``alpha(x, u) = sum_j c_j C(|x \\ u|, j)``, coefficients from
  a linear program), the smallest p that is exact;
- :func:`check_table_head`: the exhaustive check of any table head on all
  ``2^(3m)`` inputs, independent of how the head was found (training, and
  :func:`~sketchsim.experiments.table_heads.minrank_row`, which puts the lower and
  upper ends side by side, live in :mod:`sketchsim.experiments.table_heads`).

For a position-independent head every position of every input asks the same
thing, "query ``x`` among the keys ``{x, u, w}``", so the causal final-query
variant imposes exactly the same conditions and has the same ``r*``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from sketchsim.errors import SketchsimError

__all__ = [
    "MINRANK_MAX_M",
    "cube",
    "check_table_head",
    "CheckResult",
    "certified_lower",
    "LowerBound",
    "subset_construction",
    "subset_features",
    "TableConstruction",
    "onehot_construction",
    "load_table_head",
    "nonneg_lower",
]

#: Largest m minrank enumerates (2^(3m) inputs per exhaustive check).
MINRANK_MAX_M = 8


def nonneg_lower(row) -> int:
    """The sign-order lower bound of a minrank row (nonnegative heads): its
    ``lower_nonneg.lower``, or 1 where it was not computed (or is malformed)."""
    entry = row.get("lower_nonneg")
    lower = entry.get("lower") if isinstance(entry, dict) else None
    return lower if isinstance(lower, int) and not isinstance(lower, bool) else 1


#: Inputs per chunk of the exhaustive check.
CHECK_CHUNK = 1 << 20


def cube(m: int) -> np.ndarray:
    """All ``2^m`` tokens, token ``z`` has element ``k`` = bit ``k`` of ``z``; (2^m, m) uint8."""
    z = np.arange(2**m)
    return ((z[:, None] >> np.arange(m)) & 1).astype(np.uint8)


@dataclass
class CheckResult:
    """Outcome of the exhaustive check of one table head."""

    inputs: int
    max_abs_error: float
    exact: bool
    zero_denominators: int

    def to_dict(self) -> dict:
        return asdict(self)


def check_table_head(alpha: np.ndarray, votes: np.ndarray, causal: bool = False) -> CheckResult:
    """Evaluate a table head on every input of ``({0,1}^m)^3``, every scored position.

    ``y_i = sum_j alpha[x_i, x_j] votes[x_i, x_j] / sum_j alpha[x_i, x_j]`` against
    ``t_i = min_j <x_i, x_j>``, in float64, enumerating the ``2^(3m)`` inputs in
    chunks (the definition itself, no symmetry reduction).  A zero denominator
    counts as an infinite error.

    Parameters
    ----------
    alpha, votes : numpy.ndarray, shape (2^m, 2^m)
        Kernel and vote tables indexed by token number (see :func:`cube`).
    causal : bool
        Score only the final position.
    """
    alpha = np.asarray(alpha, dtype=np.float64)
    votes = np.asarray(votes, dtype=np.float64)
    K = alpha.shape[0]
    m = K.bit_length() - 1
    if alpha.shape != (K, K) or votes.shape != (K, K) or K != 2**m:
        raise SketchsimError(f"alpha and votes must be 2^m x 2^m tables, got {alpha.shape}")
    if not (np.all(np.isfinite(alpha)) and np.all(np.isfinite(votes))):
        raise SketchsimError("alpha and votes must be finite")
    pop = cube(m).sum(1)
    total = K**3
    worst, zeros = 0.0, 0
    positions = (2,) if causal else (0, 1, 2)
    for start in range(0, total, CHECK_CHUNK):
        idx = np.arange(start, min(total, start + CHECK_CHUNK), dtype=np.int64)
        toks = np.stack([(idx >> (j * m)) & (K - 1) for j in range(3)], axis=1)
        for i in positions:
            q = toks[:, i]
            w = alpha[q[:, None], toks]
            g = votes[q[:, None], toks]
            den = w.sum(1)
            t = pop[q[:, None] & toks].min(1)
            bad = den == 0
            zeros += int(bad.sum())
            with np.errstate(divide="ignore", invalid="ignore"):
                err = np.abs((w * g).sum(1) / den - t)
            err[bad] = np.inf
            worst = max(worst, float(err.max()))
    return CheckResult(total, worst, bool(worst < 0.5), zeros)


@dataclass
class LowerBound:
    """The best certificate found at one m."""

    m: int
    code: str
    codewords: int
    pairs: int
    bound: float
    certified_rank: int
    family_inputs: int
    family_sha256: str
    recertified_rank: int


def _codes(m: int):
    from sketchsim.certify.codes import greedy_code

    yield "single word", np.ones((1, m), dtype=np.uint8)
    for w in range(1, m):
        for d in range(2, 2 * min(w, m - w) + 1, 2):
            code = greedy_code(m, d, w, limit=4096)
            if len(code) >= 2:
                yield f"greedy(w={w}, d={d})", code


def certified_lower(m: int, causal: bool = False):
    """Best certified lower bound on ``r*(m)`` and the family that achieves it.

    Tries the greedy constant-weight lexicode of every weight and even distance
    (every subset of its words through the pair choice of the certificate),
    builds the chain witness of the best one restricted to the chosen words, and
    certifies that family independently.

    Returns
    -------
    (LowerBound, WitnessFamily)
        With ``causal`` the family scores position 3 (tokens rotated).
    """
    from sketchsim.certify import build_witness, certify
    from sketchsim.certify.bounds import code_bound
    from sketchsim.certify.certificate import choose_pairs
    from sketchsim.certify.chains import best_chain_product

    best = None
    for name, code in _codes(m):
        value, pairs, rank = code_bound(code)
        if best is None or (rank, value) > (best[2], best[1]):
            best = (name, value, rank, pairs, code)
    name, value, rank, pairs, code = best
    if len(code) > 1:  # keep only the words the certificate uses
        gaps = code.astype(np.int64) @ (1 - code.astype(np.int64)).T
        table = np.array([best_chain_product(g) for g in range(m + 1)])
        P = table[gaps.T]
        np.fill_diagonal(P, 0.0)
        code = code[choose_pairs(P)]
    family = build_witness(code, name, chains=True)
    if causal:
        from sketchsim.certify.witness import WitnessFamily
        from sketchsim.minip.kernel import minip_targets

        tokens = np.ascontiguousarray(family.tokens[:, [1, 2, 0]])
        meta = {**family.meta, "causal": True}
        family = WitnessFamily(tokens, 3, minip_targets(tokens)[:, 2], meta)
    cert = certify(family, eps_list=())
    lower = LowerBound(
        m,
        name,
        int(len(code)),
        pairs,
        value,
        rank,
        int(len(family.tokens)),
        cert.family_sha256,
        cert.certified_rank["0.5"],
    )
    return lower, family


@dataclass
class TableConstruction:
    """An explicit head, its rank and its exhaustive check."""

    name: str
    rank: int
    check: CheckResult
    params: dict


def subset_features(m: int, coeffs) -> tuple[np.ndarray, np.ndarray]:
    """Nonnegative features indexed by subsets ``S`` with ``|S| <= p = len(coeffs) - 1``.

    ``phi_Q(x)_S = c_|S| [S subset of x]``, ``phi_K(u)_S = [S disjoint from u]``, so
    ``alpha(x, u) = sum_j c_j C(|x \\ u|, j)``.  Returns ``(phi_q, phi_k)``, each
    ``(2^m, sum_{j<=p} C(m, j))``.
    """
    coeffs = np.asarray(coeffs, dtype=np.float64)
    p = len(coeffs) - 1
    subsets = [s for s in range(2**m) if s.bit_count() <= p]
    S = np.array(subsets, dtype=np.int64)
    z = np.arange(2**m, dtype=np.int64)[:, None]
    size = np.array([s.bit_count() for s in subsets])
    phi_q = np.where((S & z) == S, coeffs[size], 0.0)
    phi_k = ((S & z) == 0).astype(np.float64)
    return phi_q, phi_k


def _subset_lp(m: int, p: int):
    """Coefficients ``c_0..c_p >= 0`` with ``f(k) = sum_j c_j C(k, j)`` exact, or None.

    With votes ``<x, u> = |x| - k_u`` the error on keys ``{x, u, w}`` (``k = |x \\ .|``,
    ``a = k_u <= b = k_w``) is ``(f(0) b + f(a)(b - a)) / (f(0) + f(a) + f(b))``; asking it
    below ``1/2 - margin`` is linear in ``c`` (THEORY 3c, truncated).
    """
    from scipy.optimize import linprog

    margin = 0.01
    basis = np.array([[math.comb(k, j) for j in range(p + 1)] for k in range(m + 1)], float)
    rows = []
    for b in range(1, m + 1):
        for a in range(0, b + 1):
            # (f0 b + fa (b - a)) - (1/2 - margin)(f0 + fa + fb) <= 0, with c_0 = f(0) = 1
            h = 0.5 - margin
            rows.append((b - h) * basis[0] + ((b - a) - h) * basis[a] - h * basis[b])
    A = np.array(rows)
    res = linprog(
        c=np.ones(p + 1),
        A_ub=A,
        b_ub=np.zeros(len(rows)),
        bounds=[(1, 1)] + [(0, None)] * p,
        method="highs",
    )
    return res.x if res.status == 0 else None


def subset_construction(m: int, causal: bool = False) -> TableConstruction | None:
    """Smallest-p exact subset-feature head (checked on all inputs), or None below 2^m."""
    pop = cube(m).sum(1)
    z = np.arange(2**m)
    overlap = pop[z[:, None] & z[None, :]].astype(np.float64)
    for p in range(0, m + 1):
        coeffs = _subset_lp(m, p)
        if coeffs is None:
            continue
        phi_q, phi_k = subset_features(m, coeffs)
        check = check_table_head(phi_q @ phi_k.T, overlap, causal)
        if check.exact:
            return TableConstruction(
                f"subsets |S| <= {p}",
                int(phi_q.shape[1]),
                check,
                {"p": p, "coeffs": coeffs.tolist()},
            )
    return None


def onehot_construction(m: int, beta: float = 1.0, causal: bool = False) -> TableConstruction:
    """THEORY 3c, ``r = 2^m``, checked on all inputs here (beta above ``ln(6)/2``)."""
    T = cube(m).astype(np.float64)
    overlap = T @ T.T
    alpha = np.exp(-beta * overlap)  # phi_Q(x)_z = exp(-beta <x,z>), phi_K(u) = e_u
    check = check_table_head(alpha, overlap, causal)
    return TableConstruction("onehot", 2**m, check, {"beta": beta})


def load_table_head(path) -> tuple[np.ndarray, np.ndarray]:
    """``(alpha, votes)`` of saved trained weights, to re-check with :func:`check_table_head`."""
    with np.load(path, allow_pickle=False) as data:
        return data["phi_q"] @ data["phi_k"].T, data["votes"]
