"""Constant-weight binary codes for witness families (THEORY section 4).

Each constructor returns a 0/1 ``uint8`` array of shape (K, m), rows in a fixed,
documented order, so that ``codewords=K`` means the first K rows.

- :func:`hadamard_code`: rows 2..n of a normalized Paley (type I) Hadamard
  matrix of order ``n`` (``q = n - 1`` a prime power, ``q = 3 mod 4``), ``+1 -> 1``:
  ``n - 1`` words of weight ``n/2`` meeting pairwise in ``n/4`` ones; with
  ``complements=True`` their complements follow.
- :func:`golay_octads`, :func:`golay_dodecads`: the weight-8 and weight-12
  words of the extended binary Golay code (759 and 2576 words, m = 24).
- :func:`greedy_code`: the lexicographic greedy constant-weight code.
- :func:`random_code`: the greedy code over a seeded stream of random
  weight-w words (distance about a fixed fraction of m at any m <= 64, where
  lexicodes scan too many words).
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
from numba import njit

from sketchsim.errors import SketchsimError
from sketchsim.minip.bits import popcount64

__all__ = [
    "hadamard_code",
    "golay_code",
    "golay_octads",
    "golay_dodecads",
    "greedy_code",
    "random_code",
    "greedy_filter",
    "make_code",
    "check_code_options",
    "code_stats",
    "save_code",
    "CODE_KINDS",
    "hadamard_orders",
]

CODE_KINDS = ("hadamard", "golay-octads", "golay-dodecads", "greedy", "random")

#: Largest Hadamard order (the Paley construction builds q x q field tables).
HADAMARD_MAX_ORDER = 4096
#: Largest extension field GF(p^k), k > 1, built (its tables are filled in Python).
FIELD_MAX_EXTENSION = 400
#: Most weight-w words a greedy lexicode may scan (C(m, w); about 10^8 per second).
GREEDY_MAX_SCAN = 2 * 10**9
#: Largest code whose minimum distance ``code_stats`` computes (all pairs).
STATS_MAX_WORDS = 16384


def _prime_power(q: int) -> tuple[int, int] | None:
    """``(p, k)`` with ``q = p^k`` for a prime ``p``, or None."""
    if q < 2:
        return None
    p = next(d for d in range(2, q + 1) if q % d == 0)
    k, r = 0, q
    while r % p == 0:
        r //= p
        k += 1
    return (p, k) if r == 1 else None


def hadamard_orders(limit: int = 200) -> list[int]:
    """Orders ``n <= limit`` for which the Paley type I construction applies."""
    return [n for n in range(4, limit + 1, 4) if _prime_power(n - 1) and (n - 1) % 4 == 3]


def _field(p: int, k: int):
    """GF(p^k) as integers ``0..q-1`` (base-p digits = polynomial coefficients).

    Returns ``(sub, mul)`` tables of shape (q, q).
    """
    q = p**k
    digits = np.array([[(x // p**i) % p for i in range(k)] for x in range(q)], dtype=np.int64)
    weights = p ** np.arange(k)
    sub = ((digits[:, None, :] - digits[None, :, :]) % p) @ weights
    if k == 1:
        mul = np.outer(np.arange(q), np.arange(q)) % p
        return sub, mul
    if k > 3:
        raise SketchsimError(f"GF({p}^{k}) is not supported (prime powers up to cubes only)")
    # a monic polynomial of degree 2 or 3 without roots is irreducible
    for tail in itertools.product(range(p), repeat=k):
        poly = list(tail) + [1]
        if not any(sum(c * x**i for i, c in enumerate(poly)) % p == 0 for x in range(p)):
            break
    mul = np.zeros((q, q), dtype=np.int64)
    for a in range(q):
        for b in range(q):
            prod = np.convolve(digits[a], digits[b]) % p
            for deg in range(len(prod) - 1, k - 1, -1):  # reduce mod poly
                c = prod[deg]
                if c:
                    prod[deg - k : deg + 1] = (prod[deg - k : deg + 1] - c * np.array(poly)) % p
            mul[a, b] = int(prod[:k] @ weights)
    return sub, mul


def hadamard_code(order: int, complements: bool = False) -> np.ndarray:
    """Weight-``order/2`` words from a normalized Paley Hadamard matrix.

    Parameters
    ----------
    order : int
        ``n`` with ``n - 1`` a prime power congruent to 3 mod 4 (12, 20, 24, 28, 32, ...).
    complements : bool
        Append the complements of the ``n - 1`` rows.
    """
    if order > HADAMARD_MAX_ORDER:
        raise SketchsimError(
            f"Hadamard order {order} exceeds the limit {HADAMARD_MAX_ORDER:,} (its GF tables take "
            f"about {3 * 8 * order**2 / 2**30:.2g} GiB); larger orders are not supported"
        )
    pk = _prime_power(order - 1)
    if pk is None or (order - 1) % 4 != 3:
        raise SketchsimError(
            f"no Paley Hadamard matrix of order {order}: order - 1 must be a prime power = 3 "
            f"mod 4 (orders up to 100: {', '.join(map(str, hadamard_orders(100)))})"
        )
    q = order - 1
    if pk[1] > 1 and q > FIELD_MAX_EXTENSION:
        raise SketchsimError(
            f"GF({pk[0]}^{pk[1]}) with {q:,} elements: extension fields are built in Python, "
            f"limit {FIELD_MAX_EXTENSION} elements"
        )
    sub, mul = _field(*pk)
    squares = {int(mul[x, x]) for x in range(1, q)}
    chi = np.array([0] + [1 if a in squares else -1 for a in range(1, q)])
    Q = chi[sub]  # Jacobsthal matrix Q[a, b] = chi(a - b)
    S = np.zeros((order, order), dtype=np.int64)
    S[0, 1:] = 1
    S[1:, 0] = -1
    S[1:, 1:] = Q
    H = np.eye(order, dtype=np.int64) + S
    H = H * H[:, :1]  # normalize: first column all +1
    # H H^T = n I, checked in float64 (BLAS; exact: every entry is a sum of n terms
    # of +-1, far below 2^53) -- the int64 product took 157 s at order 4092
    Hf = H.astype(np.float64)
    assert np.array_equal(Hf @ Hf.T, order * np.eye(order))
    rows = (H[1:] > 0).astype(np.uint8)
    return np.vstack([rows, 1 - rows]) if complements else rows


def golay_code() -> np.ndarray:
    """All 4096 words of the extended binary Golay code [24, 12, 8]."""
    g = [1, 0, 1, 0, 1, 1, 1, 0, 0, 0, 1, 1]  # x^11+x^10+x^6+x^5+x^4+x^2+1, low degree first
    basis = np.zeros((12, 23), dtype=np.uint8)
    for i in range(12):
        basis[i, i : i + 12] = g
    msgs = ((np.arange(4096)[:, None] >> np.arange(12)) & 1).astype(np.uint8)
    words = (msgs @ basis) % 2
    parity = words.sum(axis=1) % 2
    return np.hstack([words, parity[:, None]]).astype(np.uint8)


def golay_octads() -> np.ndarray:
    """The 759 weight-8 words of the extended Golay code, in lexicographic order."""
    return _sorted_rows(golay_code(), 8)


def golay_dodecads() -> np.ndarray:
    """The 2576 weight-12 words of the extended Golay code, in lexicographic order."""
    return _sorted_rows(golay_code(), 12)


def _sorted_rows(code: np.ndarray, weight: int) -> np.ndarray:
    rows = code[code.sum(axis=1) == weight]
    return rows[np.lexsort(rows.T[::-1])][::-1]


@njit(cache=True)
def _greedy(m, d, w, limit):
    """Greedy lexicode over weight-w masks in increasing integer order."""
    chosen = np.empty(limit, dtype=np.uint64)
    n = 0
    # Gosper's hack enumerates weight-w masks in increasing order; bit m-1-k of
    # a mask is element k, so this is lexicographic order of the rows
    v = (np.uint64(1) << np.uint64(w)) - np.uint64(1)
    top = np.uint64(1) << np.uint64(m)
    while v < top and n < limit:
        ok = True
        for i in range(n):
            if popcount64(v ^ chosen[i]) < d:
                ok = False
                break
        if ok:
            chosen[n] = v
            n += 1
        t = v | (v - np.uint64(1))
        v = (t + np.uint64(1)) | (
            ((~t & (t + np.uint64(1))) - np.uint64(1)) >> np.uint64(_ctz(v) + 1)
        )
    return chosen[:n]


@njit(inline="always")
def _ctz(v):
    return popcount64((v & (~v + np.uint64(1))) - np.uint64(1))


def greedy_code(m: int, d: int, w: int, limit: int = 1 << 16) -> np.ndarray:
    """Lexicographic greedy code of length ``m``, weight ``w``, minimum distance ``d``.

    Candidates are the weight-``w`` words in lexicographic order (element 0 is
    the most significant); each is kept when it is at distance ``>= d`` from
    all kept words. ``m <= 63``.
    """
    if not 1 <= m <= 63:
        raise SketchsimError(f"greedy codes need 1 <= m <= 63, got m = {m}")
    if not 0 <= w <= m:
        raise SketchsimError(f"weight w must be in 0..{m}, got {w}")
    if d < 1:
        raise SketchsimError(f"minimum distance d must be >= 1, got {d}")
    if limit < 1 or limit > 1 << 24:
        raise SketchsimError(f"limit must be in 1..{1 << 24:,}, got {limit:,}")
    scan = math.comb(m, w)
    if scan > GREEDY_MAX_SCAN and d > 2:
        raise SketchsimError(
            f"the greedy lexicode would scan C({m}, {w}) = {scan:.3g} weight-{w} words, over "
            f"the limit {GREEDY_MAX_SCAN:.0e} (about {scan / 1e8 / 3600:.3g} hours or more); "
            "use the random code kind (a seeded greedy code over random words) instead"
        )
    masks = _greedy(m, d, w, limit)
    return ((masks[:, None] >> np.arange(m - 1, -1, -1).astype(np.uint64)) & np.uint64(1)).astype(
        np.uint8
    )


@njit(cache=True)
def _greedy_filter(cands, d, limit):
    """Keep each candidate mask at distance >= d from every kept one, in order."""
    chosen = np.empty(min(limit, cands.shape[0]), dtype=np.uint64)
    n = 0
    for k in range(cands.shape[0]):
        if n >= limit:
            break
        v = cands[k]
        ok = True
        for i in range(n):
            if popcount64(v ^ chosen[i]) < d:
                ok = False
                break
        if ok:
            chosen[n] = v
            n += 1
    return chosen[:n]


def greedy_filter(masks: np.ndarray, d: int, limit: int) -> np.ndarray:
    """The greedy code of a stream of 64-bit masks: each kept when at distance >= d from all kept.

    Returns the kept masks (at most ``limit``), in stream order.
    """
    masks = np.ascontiguousarray(masks, dtype=np.uint64)
    return _greedy_filter(masks, int(d), int(limit))


def _masks_to_rows(masks: np.ndarray, m: int) -> np.ndarray:
    """Rows with element ``k`` = bit ``k`` of each mask."""
    return ((masks[:, None] >> np.arange(m, dtype=np.uint64)) & np.uint64(1)).astype(np.uint8)


#: Candidate words ``random_code`` draws by default.
RANDOM_DRAWS = 1 << 17


def random_code(
    m: int, w: int, d: int, limit: int = 1024, draws: int = RANDOM_DRAWS, seed: int = 0
) -> np.ndarray:
    """Greedy constant-weight code over ``draws`` random weight-``w`` words (seeded).

    Parameters
    ----------
    m : int
        Length, ``1 <= m <= 64``.
    w, d : int
        Weight and minimum distance.
    limit : int
        Largest code size.
    draws : int
        Candidate words drawn (in chunks, so memory stays small).
    seed : int
        Seed of the candidate stream.
    """
    if not 1 <= m <= 64:
        raise SketchsimError(f"random codes need 1 <= m <= 64, got m = {m}")
    if not 0 <= w <= m:
        raise SketchsimError(f"weight w must be in 0..{m}, got {w}")
    if d < 1 or limit < 1 or draws < 1:
        raise SketchsimError(f"need d, limit and draws >= 1, got {d}, {limit}, {draws}")
    rng = np.random.default_rng(seed)
    weights = np.uint64(1) << np.arange(m, dtype=np.uint64)
    kept = np.zeros(0, dtype=np.uint64)
    chunk = 1 << 14
    for start in range(0, draws, chunk):
        size = min(chunk, draws - start)
        pick = np.argsort(rng.random((size, m)), axis=1)[:, :w]
        masks = np.bitwise_or.reduce(weights[pick], axis=1) if w else np.zeros(size, np.uint64)
        kept = greedy_filter(np.concatenate([kept, masks]), d, limit)
        if len(kept) >= limit:
            break
    return _masks_to_rows(kept, m)


#: Words ``make_code`` keeps of a random code unless told otherwise.
RANDOM_WORDS = 1024
#: Words ``make_code`` keeps of a greedy lexicode unless told otherwise.
GREEDY_WORDS = 1 << 16


#: Code kinds whose minimum distance and weight are chosen (``d``, ``w``).
TUNABLE_KINDS = ("greedy", "random")


def check_code_options(kind: str, d: int | None = None, w: int | None = None) -> None:
    """Refuse a distance or weight that ``kind`` would ignore (only greedy and random
    codes take them; the others have their own).

    Raises
    ------
    SketchsimError
        Naming the parameter (``param="d"`` or ``"w"``).
    """
    for name, value in (("d", d), ("w", w)):
        if value is not None and kind not in TUNABLE_KINDS:
            what = "minimum distance" if name == "d" else "weight"
            raise SketchsimError(
                f"{name}: a {kind} code has its own {what}; {name} applies only to "
                f"{' and '.join(TUNABLE_KINDS)} codes",
                param=name,
            )


def make_code(
    kind: str,
    m: int,
    d: int | None = None,
    w: int | None = None,
    seed: int = 0,
    limit: int | None = None,
) -> np.ndarray:
    """Build a code by kind (see :data:`CODE_KINDS`).

    Parameters
    ----------
    kind : str
        One of :data:`CODE_KINDS`.
    m : int
        Length.
    d, w : int, optional
        Minimum distance and weight (greedy, random; defaults ``2 * (m // 4)``, ``m // 2``).
    seed : int
        Seed (random).
    limit : int, optional
        Largest code (greedy, random; defaults :data:`GREEDY_WORDS`, :data:`RANDOM_WORDS`).

    Returns
    -------
    numpy.ndarray of uint8, shape (K, m)

    Raises
    ------
    SketchsimError
        ``d`` or ``w`` given for a kind that does not take them.
    """
    check_code_options(kind, d, w)
    if kind == "hadamard":
        return hadamard_code(m, complements=True)
    if kind in ("golay-octads", "golay-dodecads"):
        if m != 24:
            raise SketchsimError(f"{kind} exists only at m = 24, got m = {m}")
        return golay_octads() if kind == "golay-octads" else golay_dodecads()
    if kind in ("greedy", "random"):
        w = m // 2 if w is None else w
        d = max(2, m // 4 * 2) if d is None else d
        if 0 <= w <= m and d > 2 * min(w, m - w):  # impossible: at most one word
            raise SketchsimError(
                f"d: words of weight {w} in {m} bits are at most {2 * min(w, m - w)} apart, "
                f"so a minimum distance of {d} allows only one word",
                param="d",
            )
        if kind == "greedy":
            return greedy_code(m, d, w, limit=limit or GREEDY_WORDS)
        return random_code(m, w, d, limit=limit or RANDOM_WORDS, seed=seed)
    raise SketchsimError(f"unknown code kind {kind!r}; choose one of {', '.join(CODE_KINDS)}")


def code_stats(code: np.ndarray) -> dict:
    """Size, weights and minimum distance of a code."""
    code = np.asarray(code, dtype=np.uint8)
    weights = sorted(set(code.sum(axis=1, dtype=np.int64).tolist()))
    if len(code) < 2 or len(code) > STATS_MAX_WORDS:
        dmin = None  # too many pairs: not computed
    else:
        packed = np.packbits(code, axis=1)  # distances by popcount of XORed bytes, in chunks
        dmin = code.shape[1] + 1
        for i in range(0, len(code), 256):
            block = packed[i : i + 256, None, :] ^ packed[None, :, :]
            dist = np.bitwise_count(block).sum(-1, dtype=np.int64)
            rows = np.arange(i, min(i + 256, len(code)))
            dist[rows - i, rows] = code.shape[1] + 1
            dmin = min(dmin, int(dist.min()))
    return {
        "size": int(len(code)),
        "m": int(code.shape[1]),
        "weights": weights,
        "min_distance": dmin,
    }


def save_code(code: np.ndarray, path) -> Path:
    """Write ``code`` to ``path``: ``.txt`` one word a line as 0/1 digits, else ``.npy``.

    The parent folder is created.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".txt":
        np.savetxt(path, code, fmt="%d", delimiter="")
    else:
        np.save(path, code)
    return path
