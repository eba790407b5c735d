"""Re-verify a proof file from the definitions alone (plain Python, interval arithmetic).

A proof file (``sketchsim-proof``, JSON) claims that a causal weights file answers
every input of F(q, s) right (docs/theory.md 5.5).  This module shares no code
with the prover that writes it: it imports only the standard library, rebuilds
the model from the arrays the file carries, and re-runs every leaf's enclosure
with its own interval forward (docs/theory.md 5.2, 5.3; ``tests/naive.py``,
``causal_outputs``, is the float forward it encloses).  It checks, in order:

1. the file is a JSON object with exactly the format's fields: ``format``,
   ``version`` and ``claim`` as the format says, ``weights_sha256`` 64 lowercase
   hex digits, ``bits`` in 1..32, ``rounding`` ``every`` or ``cut``, the family
   ``hard`` with ``q, s >= 1``, ``perm`` ``q`` rows of ``s`` distinct bits each
   inside its block (``i s .. i s + s - 1``), ``trees`` ``q`` lists of integers,
   ``leaves`` a count (integers are never booleans);
2. ``digest`` is the sha256 of the canonical JSON of every other field
   (``json.dumps(..., sort_keys=True, separators=(",", ":"))``);
3. the architecture is one this checker runs (kind, feature map, sizes; its ``m``
   is ``q s + s + 1``), and ``arrays`` holds exactly the architecture's arrays,
   each of its shape, decoding (base64 of little-endian float64) to finite numbers;
4. ``trees`` holds one tree per query, each read to its end (a leaf ``-1``; a split
   ``j, v`` with ``0 <= j < q`` and ``lo_j <= v < hi_j`` in its box, then the
   subtrees of ``t_j <= v`` and ``t_j > v``; the root box ``[0, s]^q``); then the
   total of leaves is ``leaves``; then, tree by tree in preorder, every leaf of
   query ``i``'s tree pins ``t_i`` (``lo_i = hi_i``) and its enclosure of query
   ``i``'s answer over the box is exactly ``{lo_i}`` (:func:`leaf_answer`).

The enclosure is docs/theory.md 5.5's: every operation's interval result is
widened by ``2^-46 max(|lo|, |hi|) + 2^-1000`` (a dot product of ``n`` terms with
constant weights is moved out once by ``2^-46 max(1, n / 64) (|b| + sum |w_i|
max(|a_i|, |b_i|)) + 2^-1000``; the data token's layer-0 pre-activations over a box
come from exact per-block tables, moved out by ``2^-46 max(1, (m + 1) / 64) (|b| +
sum |w|)``), a NaN bound or an
operation undefined on its interval gives ``(-inf, inf)``, a register maps an
interval to the range of codes its floats can round to, and the answer is the
range of ``clip(floor(y + 1/2), -1, s + 1)``.  Where 5.5 leaves the rule open, the
choice here is sound and never looser than a chain of widened operations:

- a dot product of two interval vectors (``phi(q)^T S``, ``<a, o>``, ...) and a sum of
  intervals (``R_j`` of ``elu1sum``, the softmax's denominator) are summed like the
  constant-weight dot product: each term's range (four products, or the exact square),
  added, moved out once by ``2^-46 max(1, n / 64)`` of the terms' magnitudes plus
  ``2^-1000`` for ``n`` terms (at least ``n 2^-52``: the engine's rounding of such a sum
  and this checker's own);
- operations exact in floats are not widened: ``max(x, c)``, ``-x``, and a constant
  the engine computes exactly (``sqrt(r)``, ``r^(1/4)``, ``sqrt(2) sqrt(r)``);
  ``exp(alog)`` is a libm result, so ``exp`` of the point, widened;
- ``sqrt`` of a sum of squares (DeltaNet's norms) takes its lower end at 0 or above
  (the engine's sum is never negative);
- an unbounded operand gives an unbounded result (it may hold NaN), for every
  operation but the register (the whole code range) and the answer (``-1..s+1``);
- a window holding one token reads it with weight exactly 1 (``exp(0) / exp(0)``).

:func:`check_proof` returns what the proof shows (:class:`ProofChecked`), or raises
:class:`ProofInvalid` naming the first invalid step.  The family's ``seed`` is
recorded, not re-derived: the family checked is the one ``perm`` spells out.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import re
import sys
from array import array
from dataclasses import dataclass
from math import fsum
from operator import mul
from pathlib import Path, PurePath

__all__ = [
    "FORMAT",
    "VERSION",
    "CLAIM",
    "ProofChecked",
    "ProofInvalid",
    "check_proof",
    "leaf_answer",
    "load_model",
]

FORMAT = "sketchsim-proof"
VERSION = 1
CLAIM = "every input of the family is answered right"
FIELDS = frozenset(
    (
        "format",
        "version",
        "claim",
        "weights_sha256",
        "bits",
        "rounding",
        "family",
        "perm",
        "architecture",
        "arrays",
        "trees",
        "leaves",
        "digest",
    )
)
FAMILY_FIELDS = frozenset(("name", "q", "s", "seed"))

KINDS = ("linear", "based", "gla", "deltanet", "gated-deltanet", "mamba", "window", "retention")
LINEAR_MAPS = ("elu1", "relu", "signed", "softplus", "elu1sum")
FIXED_MAPS = {
    "based": "taylor",
    "gla": "identity",
    "deltanet": "l2",
    "gated-deltanet": "l2",
    "mamba": "identity",
    "window": "softmax",
    "retention": "identity",
}
COMMON_ARRAYS = {
    "wq": ("r", "m"),
    "bq": ("r",),
    "wk": ("r", "m"),
    "bk": ("r",),
    "wv": ("d", "m"),
    "bv": ("d",),
    "wa": ("d", "m"),
    "ba": ("d",),
    "wu": ("m", "d"),
}
GATE_ARRAYS = {
    "linear": {},
    "based": {},
    "gla": {"wg": ("r", "m"), "bg": ("r",)},
    "deltanet": {"wbeta": (1, "m"), "bbeta": (1,)},
    "gated-deltanet": {"wbeta": (1, "m"), "bbeta": (1,), "wg": (1, "m"), "bg": (1,), "alog": (1,)},
    "mamba": {"wg": ("d", "m"), "bg": ("d",), "alog": ("r", "d"), "dskip": ("d",)},
    "window": {},
    "retention": {},
}
#: Pre-activation name -> (weights, bias) arrays of a head; the gates per kind.
PROJECTIONS = {"q": ("wq", "bq"), "k": ("wk", "bk"), "v": ("wv", "bv"), "a": ("wa", "ba")}
GATES = {
    "linear": {},
    "based": {},
    "gla": {"g": ("wg", "bg")},
    "deltanet": {"beta": ("wbeta", "bbeta")},
    "gated-deltanet": {"beta": ("wbeta", "bbeta"), "g": ("wg", "bg")},
    "mamba": {"g": ("wg", "bg")},
    "window": {},
    "retention": {},
}
#: Sizes a file may declare (the weights file's limits).
LIMITS = {"layers": 8, "heads": 64, "rank": 4096, "value_width": 4096, "m": 4096}
MAX_WINDOW = 4096
MAX_BASED_RANK = 64
#: Kinds whose state update is entrywise (each entry's new value from its old one and
#: the token alone): the queries' layer-0 updates can be memoized per entry.
ENTRYWISE = ("linear", "based", "gla", "mamba", "retention")

_REL = 2.0**-46  # an operation's widening, relative
_TINY = 2.0**-1000  # ... and absolute
_BIG = 1.7e308  # an interval reaching past this is unbounded (its widening could overflow)
INF = math.inf
WHOLE = (-INF, INF)
ZERO = (0.0, 0.0)
_HEX64 = re.compile(r"[0-9a-f]{64}\Z")
_MEMO_LIMIT = 1_000_000  # intervals kept by the per-entry memo before it is dropped
_CACHE_LIMIT = 1_000_000  # intervals of states kept by the cut-state cache


class ProofInvalid(Exception):
    """The proof file does not prove its claim; the message names the first invalid step."""


@dataclass(frozen=True)
class ProofChecked:
    """What a valid proof shows: the weights file ``weights_sha256`` (of kind ``kind``) at
    ``bits``-bit registers and ``rounding`` answers every input of F(q, s) right."""

    q: int
    s: int
    bits: int
    rounding: str
    kind: str
    weights_sha256: str
    leaves: int


def _fail(step: int, why: str):
    raise ProofInvalid(f"step {step}: {why}")


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


# ---------------------------------------------------------------------------------------
# Intervals: (lo, hi) pairs of floats, always finite or WHOLE (every producer keeps this).


def _wid(lo: float, hi: float) -> tuple[float, float]:
    """``[lo, hi]`` widened by ``2^-46 max(|lo|, |hi|) + 2^-1000``; NaN or infinite: WHOLE."""
    a = -lo if lo < 0.0 else lo
    b = -hi if hi < 0.0 else hi
    if a < _BIG and b < _BIG:  # False for NaN and inf
        e = (a if a > b else b) * _REL + _TINY
        return (lo - e, hi + e)
    return WHOLE


def _add(x, y):
    return _wid(x[0] + y[0], x[1] + y[1])


def _sub(x, y):
    return _wid(x[0] - y[1], x[1] - y[0])


def _prod(a: float, b: float, c: float, d: float) -> tuple[float, float]:
    """The least and greatest of the four products ``[a, b] * [c, d]`` (finite ends)."""
    if a >= 0.0:
        if c >= 0.0:
            return a * c, b * d
        if d <= 0.0:
            return b * c, a * d
        return b * c, b * d
    if b <= 0.0:
        if c >= 0.0:
            return a * d, b * c
        if d <= 0.0:
            return b * d, a * c
        return a * d, a * c
    if c >= 0.0:
        return a * d, b * d
    if d <= 0.0:
        return b * c, a * c
    return min(a * d, b * c), max(a * c, b * d)


def _mul(x, y):
    a, b = x
    c, d = y
    if a == -INF or c == -INF:
        return WHOLE
    return _wid(*_prod(a, b, c, d))


def _div(x, y):
    a, b = x
    c, d = y
    if a == -INF or c == -INF or c <= 0.0 <= d:
        return WHOLE
    p1, p2, p3, p4 = a / c, a / d, b / c, b / d
    return _wid(min(p1, p2, p3, p4), max(p1, p2, p3, p4))


def _divc(x, c: float):
    """``x / [c, c]`` for a constant ``c > 0``."""
    if x[0] == -INF or not c > 0.0:
        return WHOLE
    return _wid(x[0] / c, x[1] / c)


def _sq(x):
    """``x^2``: the exact range of the square, widened."""
    a, b = x
    if a == -INF:
        return WHOLE
    if a >= 0.0:
        return _wid(a * a, b * b)
    if b <= 0.0:
        return _wid(b * b, a * a)
    return _wid(0.0, max(a * a, b * b))


def _maxc(x, c: float):
    """``max(x, c)`` for a constant ``c``: exact in floats, not widened."""
    if x[0] == -INF:
        return WHOLE
    return (max(x[0], c), max(x[1], c))


def _neg(x):
    return (-x[1], -x[0])  # exact: not an operation that rounds


def _exp(z: float) -> float:
    try:
        return math.exp(z)
    except OverflowError:
        return INF


def _elu1(z: float) -> float:
    return z + 1.0 if z > 0.0 else _exp(z)


def _relu(z: float) -> float:
    return max(z, 0.0) + 1e-3


def _softplus(z: float) -> float:
    return z + math.log1p(_exp(-z)) if z > 0.0 else math.log1p(_exp(z))


def _sigmoid(z: float) -> float:
    if z >= 0.0:
        return 1.0 / (1.0 + _exp(-z))
    e = _exp(z)
    return e / (1.0 + e)


def _logsigmoid(z: float) -> float:
    return -_softplus(-z)


def _mono(f, x):
    """An increasing function applied to the ends, widened (an unbounded input: WHOLE)."""
    if x[0] == -INF:
        return WHOLE
    return _wid(f(x[0]), f(x[1]))


def _sqrt0(x):
    """``sqrt`` of a quantity the engine computes as a sum of squares (never below 0: the
    lower end is taken at 0 or above)."""
    if x[0] == -INF or x[1] < 0.0:
        return WHOLE
    return _wid(math.sqrt(max(x[0], 0.0)), math.sqrt(x[1]))


def _rel(n: int) -> float:
    """The relative move-out of a sum of ``n`` terms: ``2^-46 max(1, n / 64)``."""
    return _REL if n <= 64 else _REL * (n / 64.0)


def _fsum2(los, his, mag, start_mag: float):
    """``[fsum(los), fsum(his)]`` moved out by ``2^-46 max(1, n / 64) (start_mag + mag) +
    2^-1000`` for ``n`` summands (at least ``n 2^-52``: the engine's rounding of a sum of
    ``n`` terms, and this checker's)."""
    try:
        lo, hi = fsum(los), fsum(his)
    except (OverflowError, ValueError):
        return WHOLE
    n = len(los)
    m = (start_mag + mag) * _rel(n) + _TINY
    lo, hi = lo - m, hi + m
    if -_BIG < lo and hi < _BIG:
        return (lo, hi)
    return WHOLE


def _idot(start: float, xs, ys):
    """``start + sum_i x_i y_i`` for interval vectors (constant ``start``): each term's
    four-product range, added, moved out once by ``2^-46`` of the magnitudes + ``2^-1000``."""
    los = [start]
    his = [start]
    mag = 0.0
    for (a, b), (c, d) in zip(xs, ys, strict=True):
        if a == -INF or c == -INF:
            return WHOLE
        lo, hi = _prod(a, b, c, d)
        los.append(lo)
        his.append(hi)
        mag += -lo if -lo > hi else hi
    return _fsum2(los, his, mag, abs(start))


def _isum(start: float, xs):
    """``start + sum_i x_i`` for intervals, moved out once like :func:`_idot`."""
    los = [start]
    his = [start]
    mag = 0.0
    for a, b in xs:
        if a == -INF:
            return WHOLE
        los.append(a)
        his.append(b)
        mag += max(-a, b)
    return _fsum2(los, his, mag, abs(start))


def _dot_rows(rows, xs):
    """The dot rule for constant rows ``(w, b)`` and one interval vector ``xs``: per row
    ``[b + sum min(w_i a_i, w_i b_i), b + sum max(...)]`` moved out by ``M``."""
    if min(xs)[0] == -INF:
        return [WHOLE] * len(rows)
    mid = [0.5 * a + 0.5 * b for a, b in xs]
    rad = [0.5 * b - 0.5 * a for a, b in xs]
    mx = [-a if -a > b else b for a, b in xs]
    spread = any(rad)
    out = []
    for w, b, aw in rows:
        try:
            c = fsum((b, *map(mul, w, mid)))
            r = fsum(map(mul, aw, rad)) if spread else 0.0
            mag = abs(b) + sum(map(mul, aw, mx))
        except (OverflowError, ValueError):
            out.append(WHOLE)
            continue
        m = mag * _rel(len(w) + 1) + _TINY
        lo, hi = c - r - m, c + r + m
        out.append((lo, hi) if -_BIG < lo and hi < _BIG else WHOLE)
    return out


# ---------------------------------------------------------------------------------------
# Steps 1-3: the fields, the digest, the model.


def _check_fields(obj, full: bool) -> None:
    """Step 1 (``full``: every field of the format; else only those a forward reads)."""
    if not isinstance(obj, dict):
        _fail(1, "the proof is not a JSON object")
    if full:
        keys = set(obj)
        if keys != FIELDS:
            extra, missing = sorted(keys - FIELDS, key=str), sorted(FIELDS - keys)
            if missing:
                _fail(1, f"field {missing[0]!r} is missing ({len(missing)} of the format's)")
            _fail(1, f"field {extra[0]!r:.40} is not one of the format's ({len(extra)} such)")
        if obj["format"] != FORMAT:
            _fail(1, f"format is {obj['format']!r:.40}, not {FORMAT!r}")
        if not _is_int(obj["version"]) or obj["version"] != VERSION:
            _fail(1, f"version is {obj['version']!r:.40}; this checker reads {VERSION}")
        if obj["claim"] != CLAIM:
            _fail(1, f"claim is {obj['claim']!r:.60}, not {CLAIM!r}")
        for key in ("weights_sha256", "digest"):
            if not isinstance(obj[key], str) or not _HEX64.match(obj[key]):
                _fail(1, f"{key} is not 64 lowercase hex digits")
    else:
        for key in ("bits", "rounding", "family", "perm", "architecture", "arrays"):
            if key not in obj:
                _fail(1, f"field {key!r} is missing")
    bits = obj["bits"]
    if not _is_int(bits) or not 1 <= bits <= 32:
        _fail(1, f"bits must be an integer in 1..32, got {bits!r:.40}")
    if obj["rounding"] not in ("every", "cut"):
        _fail(1, f"rounding must be 'every' or 'cut', got {obj['rounding']!r:.40}")
    fam = obj["family"]
    if not isinstance(fam, dict) or set(fam) != FAMILY_FIELDS:
        _fail(1, "family must be an object of exactly name, q, s, seed")
    if fam["name"] != "hard":
        _fail(1, f"family name must be 'hard' (F(q, s)), got {fam['name']!r:.40}")
    for key in ("q", "s"):
        if not _is_int(fam[key]) or fam[key] < 1:
            _fail(1, f"family {key} must be an integer >= 1, got {fam[key]!r:.40}")
    if not _is_int(fam["seed"]) or fam["seed"] < 0:
        _fail(1, f"family seed must be an integer >= 0, got {fam['seed']!r:.40}")
    q, s = fam["q"], fam["s"]
    if q * s + s + 1 > LIMITS["m"]:
        _fail(1, f"F({q}, {s}) has m = {q * s + s + 1} bits, more than {LIMITS['m']}")
    perm = obj["perm"]
    if not isinstance(perm, list) or len(perm) != q:
        _fail(1, f"perm must be a list of q = {q} rows")
    for i, row in enumerate(perm):
        if not isinstance(row, list) or len(row) != s:
            _fail(1, f"perm row {i} is not a list of s = {s} bits")
        if not all(_is_int(b) and i * s <= b < i * s + s for b in row):
            _fail(1, f"perm row {i} has an entry not a bit of block {i} ({i * s}..{i * s + s - 1})")
        if len(set(row)) != s:
            _fail(1, f"perm row {i} repeats a bit")
    if not isinstance(obj["architecture"], dict):
        _fail(1, "architecture is not an object")
    if not isinstance(obj["arrays"], dict):
        _fail(1, "arrays is not an object")
    if full:
        trees = obj["trees"]
        if not isinstance(trees, list) or len(trees) != q:
            _fail(1, f"trees must be a list of q = {q} trees")
        for i, tree in enumerate(trees):
            if not isinstance(tree, list) or not all(_is_int(v) for v in tree):
                _fail(1, f"tree {i} is not a list of integers")
        if not _is_int(obj["leaves"]) or obj["leaves"] < 0:
            _fail(1, f"leaves must be an integer >= 0, got {obj['leaves']!r:.40}")


def _canonical_digest(obj: dict) -> str:
    rest = {k: v for k, v in obj.items() if k != "digest"}
    text = json.dumps(rest, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def _entries(kind: str, fmap: str, r: int, d: int, w: int) -> int:
    if kind == "linear":
        return r * d if fmap in ("signed", "elu1sum") else r * (d + 1)
    if kind == "based":
        return (1 + r + r * r) * (d + 1)
    if kind == "window":
        return w * (r + d)
    return r * d


def _check_arch(arch: dict, q: int, s: int) -> dict:
    """Step 3, the architecture: the fields a forward needs, of a kind this checker runs."""
    kind = arch.get("kind")
    if kind not in KINDS:
        _fail(3, f"architecture kind must be one of {', '.join(KINDS)}, got {kind!r:.40}")
    for key, top in LIMITS.items():
        v = arch.get(key)
        if not _is_int(v) or not 1 <= v <= top:
            _fail(3, f"architecture {key} must be an integer in 1..{top}, got {v!r:.40}")
    fmap = arch.get("feature_map")
    want = LINEAR_MAPS if kind == "linear" else (FIXED_MAPS[kind],)
    if fmap not in want:
        _fail(3, f"a {kind} model's feature_map is {' or '.join(want)}, got {fmap!r:.40}")
    eps = arch.get("eps")
    if not isinstance(eps, int | float) or isinstance(eps, bool) or not 0 <= eps <= 1:
        _fail(3, f"architecture eps must be a number in [0, 1], got {eps!r:.40}")
    w = arch.get("window", 0)
    if not _is_int(w):
        _fail(3, f"architecture window must be an integer, got {w!r:.40}")
    if kind == "window" and not 1 <= w <= MAX_WINDOW:
        _fail(3, f"a window model's window must be in 1..{MAX_WINDOW}, got {w}")
    if kind != "window" and w != 0:
        _fail(3, f"only a window model has a window (0 here), got {w}")
    if kind == "based" and arch["rank"] > MAX_BASED_RANK:
        _fail(3, f"a based model's rank is at most {MAX_BASED_RANK}")
    if arch["m"] != q * s + s + 1:
        _fail(3, f"architecture m = {arch['m']}, but F({q}, {s}) has m = {q * s + s + 1}")
    r, d = arch["rank"], arch["value_width"]
    return {
        "kind": kind,
        "fmap": fmap,
        "L": arch["layers"],
        "H": arch["heads"],
        "r": r,
        "d": d,
        "m": arch["m"],
        "eps": float(eps),
        "w": w,
        "E": _entries(kind, fmap, r, d, w),
    }


def _array_shapes(a: dict) -> dict:
    dims = {"r": a["r"], "d": a["d"], "m": a["m"], "E": a["E"]}
    names = {**COMMON_ARRAYS, **GATE_ARRAYS[a["kind"]], "lo": ("E",), "span": ("E",)}
    want = {
        f"L{l}.H{h}.{name}": [dims.get(x, x) for x in shape]
        for l in range(a["L"])
        for h in range(a["H"])
        for name, shape in names.items()
    }
    want.update({"wb": [a["m"]], "bb": [1]})
    return want


def _decode_arrays(arrays: dict, a: dict) -> dict:
    """Step 3, the arrays: exactly the architecture's, of its shapes, finite float64."""
    want = _array_shapes(a)
    extra = sorted(set(arrays) - set(want))
    if extra:
        _fail(3, f"array {extra[0]!r:.60} is not one of the architecture's")
    out = {}
    for name, shape in want.items():
        entry = arrays.get(name)
        if entry is None:
            _fail(3, f"array {name} is missing")
        if not isinstance(entry, dict) or set(entry) != {"shape", "f8"}:
            _fail(3, f"array {name} is not an object of exactly shape and f8")
        got = entry["shape"]
        if not isinstance(got, list) or not all(_is_int(v) for v in got) or got != shape:
            _fail(3, f"array {name} has shape {got!r:.40}; the architecture's is {shape}")
        n = math.prod(shape)
        text = entry["f8"]
        if not isinstance(text, str):
            _fail(3, f"array {name}: f8 is not a base64 string")
        try:
            raw = base64.b64decode(text, validate=True)
        except ValueError:
            _fail(3, f"array {name}: f8 is not base64")
        if len(raw) != 8 * n:
            _fail(3, f"array {name}: {len(raw)} bytes decoded, its shape needs {8 * n}")
        vals = array("d")
        vals.frombytes(raw)
        if sys.byteorder == "big":
            vals.byteswap()
        flat = vals.tolist()
        if not all(-INF < v < INF for v in flat):
            _fail(3, f"array {name} has a non-finite value")
        if len(shape) == 2:
            cols = shape[1]
            out[name] = [flat[k * cols : (k + 1) * cols] for k in range(shape[0])]
        else:
            out[name] = flat
    return out


class _Model:
    """A proof's model, ready for leaf enclosures (steps 1 and 3 checked on building)."""

    def __init__(self, obj: dict):
        fam = obj["family"]
        self.q, self.s = q, s = fam["q"], fam["s"]
        self.bits = obj["bits"]
        self.top = 2**self.bits - 1
        self.rounding = obj["rounding"]
        self.every = self.rounding == "every"
        self.perm = [list(row) for row in obj["perm"]]
        a = _check_arch(obj["architecture"], q, s)
        self.kind, self.fmap = a["kind"], a["fmap"]
        self.L, self.H, self.r, self.d, self.m = a["L"], a["H"], a["r"], a["d"], a["m"]
        self.eps, self.w, self.E = a["eps"], a["w"], a["E"]
        g = _decode_arrays(obj["arrays"], a)
        self.g = g
        self.sqrt_r = math.sqrt(self.r)
        self.r4 = math.sqrt(math.sqrt(self.r))
        self.r2 = math.sqrt(2.0) * math.sqrt(self.r)
        self.norm = self.kind == "based" or (
            self.kind == "linear" and self.fmap not in ("signed", "elu1sum")
        )
        # registers: lo_e and step_e per head
        self.reg = {}
        for l in range(self.L):
            for h in range(self.H):
                lo, span = g[f"L{l}.H{h}.lo"], g[f"L{l}.H{h}.span"]
                step = [sp / self.top if sp > 0 else 1.0 for sp in span]
                self.reg[(l, h)] = (lo, step)
        # per head: pre-activation rows (name -> list of (w, b, |w|)), wu rows, constants
        self.rows = {}
        self.wu_rows = {}
        self.const = {}
        names = {**PROJECTIONS, **GATES[self.kind]}
        for l in range(self.L):
            for h in range(self.H):
                p = f"L{l}.H{h}."
                self.rows[(l, h)] = {
                    n: [
                        (w, b, [abs(x) for x in w])
                        for w, b in zip(g[p + wn], g[p + bn], strict=True)
                    ]
                    for n, (wn, bn) in names.items()
                }
                self.wu_rows[(l, h)] = [(w, 0.0, [abs(x) for x in w]) for w in g[p + "wu"]]
                c = {}
                if self.kind == "gated-deltanet":
                    c["ea"] = _mono(_exp, (g[p + "alog"][0], g[p + "alog"][0]))
                if self.kind == "mamba":
                    c["ea"] = [[_mono(_exp, (x, x)) for x in row] for row in g[p + "alog"]]
                    c["dskip"] = [(x, x) for x in g[p + "dskip"]]
                self.const[(l, h)] = c
        self._data_tables()
        self._query_layer0()
        self.memo: dict = {}
        self.memo_size = 0
        self.cache: dict = {}

    # -- the data token's layer 0 over a box -------------------------------------------

    def _data_names(self, l: int) -> list[str]:
        """The pre-activations the data token needs at layer ``l`` (its ``q`` only where
        its output feeds a later layer; never its readout ``a``)."""
        names = ["k", "v", *GATES[self.kind]]
        return ["q", *names] if l < self.L - 1 else names

    def _data_tables(self) -> None:
        q, s, perm = self.q, self.s, self.perm
        rows, where = [], []
        for h in range(self.H):
            for n in self._data_names(0):
                group = self.rows[(0, h)][n]
                where.append((h, n, len(rows), len(group)))
                rows.extend(group)
        self.d_where = where
        pad = range(q * s, q * s + s + 1)
        # C[i][t][row] = sum_k -w[i s + k] + 2 sum_{k < t} w[perm[i][k]] (exact, rounded once)
        C = [[[0.0] * len(rows) for _ in range(s + 1)] for _ in range(q)]
        full_lo, full_hi, move = [], [], []
        self.fmin = [[0.0] * len(rows) for _ in range(q)]
        self.fmax = [[0.0] * len(rows) for _ in range(q)]
        for ri, (w, b, aw) in enumerate(rows):
            lows, highs = [b], [b]
            for k in pad:
                lows.append(-w[k])
                highs.append(-w[k])
            for i in range(q):
                neg = [-w[i * s + k] for k in range(s)]
                twice = [2.0 * w[perm[i][k]] for k in range(s)]
                vals = [fsum(neg + twice[:t]) for t in range(s + 1)]
                for t in range(s + 1):
                    C[i][t][ri] = vals[t]
                self.fmin[i][ri], self.fmax[i][ri] = min(vals), max(vals)
                lows.append(self.fmin[i][ri])
                highs.append(self.fmax[i][ri])
            full_lo.append(fsum(lows))
            full_hi.append(fsum(highs))
            move.append(_rel(len(w) + 1) * (abs(b) + fsum(aw)))
        self.C, self.full_lo, self.full_hi, self.move = C, full_lo, full_hi, move
        self.deltas: dict = {}

    def _delta(self, i: int, lo: int, hi: int):
        key = (i, lo, hi)
        got = self.deltas.get(key)
        if got is None:
            Ci = self.C[i][lo : hi + 1]
            dlo = [min(col) - f for col, f in zip(zip(*Ci, strict=True), self.fmin[i], strict=True)]
            dhi = [max(col) - f for col, f in zip(zip(*Ci, strict=True), self.fmax[i], strict=True)]
            got = self.deltas[key] = (dlo, dhi)
        return got

    def _data_pre0(self, box: dict) -> list[dict]:
        """The data token's layer-0 pre-activations over ``box`` (``{i: (lo_i, hi_i)}`` for
        the coordinates not ``0..s``), per head."""
        parts = [self._delta(i, lo, hi) for i, (lo, hi) in sorted(box.items())]
        if parts:
            los = [fsum(col) for col in zip(self.full_lo, *(p[0] for p in parts), strict=True)]
            his = [fsum(col) for col in zip(self.full_hi, *(p[1] for p in parts), strict=True)]
        else:
            los, his = self.full_lo, self.full_hi
        vals = []
        for lo, hi, mv in zip(los, his, self.move, strict=True):
            lo, hi = lo - mv, hi + mv
            vals.append((lo, hi) if -_BIG < lo and hi < _BIG else WHOLE)
        pre = [{} for _ in range(self.H)]
        for h, n, start, count in self.d_where:
            pre[h][n] = vals[start : start + count]
        return pre

    def _data_u0(self, box: dict) -> list:
        """The data token's layer-0 stream over ``box``: bit ``perm[i][k]`` is ``+1`` for
        ``k < lo_i``, ``-1`` for ``k >= hi_i``, else ``[-1, 1]``; the pad ``-1``."""
        u = [(-1.0, -1.0)] * self.m
        for i in range(self.q):
            lo, hi = box.get(i, (0, self.s))
            for k, bit in enumerate(self.perm[i]):
                u[bit] = (1.0, 1.0) if k < lo else (-1.0, -1.0) if k >= hi else (-1.0, 1.0)
        return u

    # -- the query tokens' layer 0 (the same in every input) --------------------------

    def _query_layer0(self) -> None:
        q, s = self.q, self.s
        pad = range(q * s, q * s + s + 1)

        def point_rows(rows):
            """Per query token, each row's ``b + <w, u>`` as a dot-rule interval."""
            out = [[] for _ in range(q)]
            for w, b, aw in rows:
                total = fsum(w)
                padsum = fsum(w[k] for k in pad)
                m = (abs(b) + fsum(aw)) * _rel(len(w) + 1) + _TINY
                for t in range(q):
                    block = fsum(w[t * s : t * s + s])
                    c = fsum((b, -total, 2.0 * block, 2.0 * padsum))
                    lo, hi = c - m, c + m
                    out[t].append((lo, hi) if -_BIG < lo and hi < _BIG else WHOLE)
            return out

        g = self.g
        base = point_rows([(g["wb"], g["bb"][0], [abs(x) for x in g["wb"]])])
        self.q_base = [b[0] for b in base]
        self.q_u0 = []
        for t in range(q):
            u = [(-1.0, -1.0)] * self.m
            for k in list(range(t * s, t * s + s)) + list(pad):
                u[k] = (1.0, 1.0)
            self.q_u0.append(u)
        self.q_pre0 = [[{} for _ in range(self.H)] for _ in range(q)]
        for h in range(self.H):
            for n, rows in self.rows[(0, h)].items():
                vals = point_rows(rows)
                for t in range(q):
                    self.q_pre0[t][h][n] = vals[t]
        # each query token's layer-0 head inputs (features, gates, products) once
        self.q_prep0 = [
            [self._prep(0, h, self.q_pre0[t][h], True) for h in range(self.H)] for t in range(q)
        ]

    # -- one head ------------------------------------------------------------------------

    def _quant(self, x, lo: float, step: float):
        """The register: the codes ``x``'s floats can round to, as ``lo + step [c1, c2]``."""
        top = self.top
        if x[0] == -INF:
            c1, c2 = 0, top
        else:
            z = _wid(x[0] - lo, x[1] - lo)
            z = _divc(z, step)
            if z[0] != -INF:
                z = _wid(z[0] + 0.5, z[1] + 0.5)
            if z[0] == -INF:
                c1, c2 = 0, top
            else:
                c1, c2 = math.floor(z[0]), math.floor(z[1])
                c1 = 0 if c1 < 0 else top if c1 > top else c1
                c2 = 0 if c2 < 0 else top if c2 > top else c2
        return _wid(lo + step * c1, lo + step * c2)

    def _quant_all(self, state, l: int, h: int, offset: int = 0):
        lo, step = self.reg[(l, h)]
        quant = self._quant
        return tuple(quant(x, lo[offset + e], step[offset + e]) for e, x in enumerate(state))

    def _act(self, z: list) -> list:
        """A linear model's feature map on pre-activations ``z``."""
        fm = self.fmap
        if fm == "signed":
            return list(z)
        if fm == "relu":
            return [_mono(_relu, x) for x in z]
        if fm == "softplus":
            return [_mono(_softplus, x) for x in z]
        f = [_mono(_elu1, x) for x in z]
        if fm == "elu1":
            return f
        # elu1sum: phi_j = f_j / (1e-4 + f_j + R_j), increasing in f_j, decreasing in R_j
        if any(x[0] == -INF for x in f):
            return [WHOLE] * len(f)
        lows = [x[0] for x in f]
        highs = [x[1] for x in f]
        out = []
        for j, (a, b) in enumerate(f):
            r_lo = fsum(lows[:j] + lows[j + 1 :])
            r_hi = fsum(highs[:j] + highs[j + 1 :])
            den_lo, den_hi = 1e-4 + a + r_hi, 1e-4 + b + r_lo
            if not (den_lo > 0.0 and den_hi > 0.0):
                out.append(WHOLE)
                continue
            lo, hi = a / den_lo, b / den_hi
            out.append(_wid(min(lo, hi), max(lo, hi)))
        return out

    def _feat(self, x: list) -> list:
        """Based's Taylor features ``[1, x / r^(1/4), x_i x_j / (sqrt 2 sqrt r)]``."""
        out = [(1.0, 1.0)]
        out.extend(_divc(v, self.r4) for v in x)
        for i, xi in enumerate(x):
            for j, xj in enumerate(x):
                out.append(_divc(_sq(xi) if i == j else _mul(xi, xj), self.r2))
        return out

    def _l2(self, x: list) -> list:
        """``x / max(sqrt(sum x^2), 1e-12)``."""
        ss = _sqsum(x)
        nrm = _maxc(_sqrt0(ss), 1e-12)
        return [_div(v, nrm) for v in x]

    def _prep(self, l: int, h: int, pre: dict, need_o: bool) -> dict:
        """What a head computes from the token alone (no state): features, gates, the
        update's coefficients; ``need_o``: also what its output reads."""
        kind, r, d = self.kind, self.r, self.d
        v = pre["v"]
        p = {"v": v}
        if kind in ("linear", "based"):
            fk = self._feat(pre["k"]) if kind == "based" else self._act(pre["k"])
            beta = []
            for f in fk:
                beta.extend(_mul(f, vc) for vc in v)
                if self.norm:
                    beta.append(f)
            p["alpha"], p["beta"] = None, beta
            if need_o:
                p["fq"] = self._feat(pre["q"]) if kind == "based" else self._act(pre["q"])
        elif kind == "gla":
            gate = [_mono(_exp, _divc(_mono(_logsigmoid, z), 16.0)) for z in pre["g"]]
            p["alpha"] = [gj for gj in gate for _ in range(d)]
            p["beta"] = [_mul(kj, vc) for kj in pre["k"] for vc in v]
            if need_o:
                p["fq"] = [_divc(x, self.sqrt_r) for x in pre["q"]]
        elif kind == "retention":  # RetNet: head h's fixed decay 1 - 2^(-5-h), exact
            g = 1.0 - 2.0 ** (-5 - h)
            p["alpha"] = [(g, g)] * (r * d)
            p["beta"] = [_mul(kj, vc) for kj in pre["k"] for vc in v]
            if need_o:
                p["fq"] = [_divc(x, self.sqrt_r) for x in pre["q"]]
        elif kind == "mamba":
            c = self.const[(l, h)]
            dt = [_mono(_softplus, z) for z in pre["g"]]
            ndt = [_neg(x) for x in dt]
            p["alpha"] = [
                _mono(_exp, _mul(ndt[col], c["ea"][j][col])) for j in range(r) for col in range(d)
            ]
            p["beta"] = [_mul(_mul(kj, dt[col]), v[col]) for kj in pre["k"] for col in range(d)]
            if need_o:
                p["fq"] = list(pre["q"])
                p["dv"] = [_mul(c["dskip"][col], v[col]) for col in range(d)]
        elif kind in ("deltanet", "gated-deltanet"):
            p["kn"] = self._l2(pre["k"])
            p["b"] = _mono(_sigmoid, pre["beta"][0])
            if kind == "gated-deltanet":
                sp = _mono(_softplus, pre["g"][0])
                p["decay"] = _mono(_exp, _mul(_neg(self.const[(l, h)]["ea"]), sp))
            if need_o:
                p["fq"] = [_divc(x, self.sqrt_r) for x in self._l2(pre["q"])]
        else:  # window: the new slot, rounded as it is written at rounding=every
            new = tuple(pre["k"]) + tuple(v)
            if self.every:
                new = self._quant_all(new, l, h, (self.w - 1) * (r + d))
            p["new"] = new
            if need_o:
                p["fq"] = list(pre["q"])
        return p

    def _init_state(self):
        if self.kind == "window":
            return (None,) * self.w
        return (ZERO,) * self.E

    def _update(self, l: int, h: int, st, p):
        """The head's state after the token (rounded at rounding=every)."""
        kind = self.kind
        if kind == "window":
            return st[1:] + (p["new"],)
        if kind in ENTRYWISE:
            alpha, beta = p["alpha"], p["beta"]
            if alpha is None:
                new = [_add(x, b) for x, b in zip(st, beta, strict=True)]
            else:
                new = [_add(_mul(a, x), b) for x, a, b in zip(st, alpha, beta, strict=True)]
        else:  # deltanet, gated-deltanet
            r, d = self.r, self.d
            S = list(st)
            if kind == "gated-deltanet":
                S = [_mul(p["decay"], x) for x in S]
            kn, b, v = p["kn"], p["b"], p["v"]
            new_v = [_mul(b, _sub(v[c], _idot(0.0, S[c::d], kn))) for c in range(d)]
            new = [_add(S[j * d + c], _mul(kn[j], new_v[c])) for j in range(r) for c in range(d)]
        if self.every:
            return self._quant_all(new, l, h)
        return tuple(new)

    def _out(self, st, p) -> list:
        """The head's output ``o`` (``d``) from its state after the token."""
        kind, d = self.kind, self.d
        fq = p["fq"]
        if kind == "window":
            r = self.r
            slots = [sl for sl in st if sl is not None]
            logits = [_divc(_idot(0.0, sl[:r], fq), self.sqrt_r) for sl in slots]
            if len(slots) == 1 and logits[0][0] != -INF:  # exp(0) / exp(0): exactly 1
                return [_idot(0.0, [(1.0, 1.0)], [slots[0][r + c]]) for c in range(d)]
            probs = []
            for j, lj in enumerate(logits):
                terms = [_mono(_exp, _sub(lk, lj)) for k, lk in enumerate(logits) if k != j]
                probs.append(_div((1.0, 1.0), _isum(1.0, terms)))
            return [_idot(0.0, probs, [sl[r + c] for sl in slots]) for c in range(d)]
        if kind in ("linear", "based"):
            width = d + 1 if self.norm else d
            num = [_idot(0.0, st[c::width], fq) for c in range(d)]
            if not self.norm:
                return num
            den = _idot(self.eps, st[d::width], fq)
            return [_div(x, den) for x in num]
        o = [_idot(0.0, st[c::d], fq) for c in range(d)]
        if kind == "mamba":
            o = [_add(x, dv) for x, dv in zip(o, p["dv"], strict=True)]
        return o

    # -- tokens ----------------------------------------------------------------------------

    def _stream_pre(self, l: int, h: int, u: list, names) -> dict:
        rows = self.rows[(l, h)]
        pre = {}
        for n in names:
            pre[n] = _dot_rows(rows[n], u)
        return pre

    def _advance_stream(self, u: list, deltas: list) -> list:
        delta = deltas[0]
        for dh in deltas[1:]:
            delta = [_add(x, y) for x, y in zip(delta, dh, strict=True)]
        return [_add(x, y) for x, y in zip(u, delta, strict=True)]

    def _data_forward(self, box: dict) -> tuple:
        """The cut state over ``box``: every head's state after the data token, rounded."""
        L, H = self.L, self.H
        states = []
        pre0 = self._data_pre0(box)
        u = self._data_u0(box) if L > 1 else None
        for l in range(L):
            need_o = l < L - 1
            deltas = []
            for h in range(H):
                pre = pre0[h] if l == 0 else self._stream_pre(l, h, u, self._data_names(l))
                p = self._prep(l, h, pre, need_o)
                st = self._update(l, h, self._init_state(), p)
                states.append(st)
                if need_o:
                    deltas.append(_dot_rows(self.wu_rows[(l, h)], self._out(st, p)))
            if need_o:
                u = self._advance_stream(u, deltas)
        if not self.every:  # rounding=cut: every entry rounded once, here
            cut = []
            for idx, st in enumerate(states):
                l, h = divmod(idx, H)
                if self.kind == "window":
                    width = self.r + self.d
                    st = tuple(
                        None if sl is None else self._quant_all(sl, l, h, j * width)
                        for j, sl in enumerate(st)
                    )
                else:
                    st = self._quant_all(st, l, h)
                cut.append(st)
            states = cut
        return tuple(states)

    def _query_step(self, t: int, states: tuple, need_y: bool):
        """Query ``t`` after ``states``: the states after it, and its ``y`` (``need_y``)."""
        L, H = self.L, self.H
        y = self.q_base[t] if need_y else None
        u = self.q_u0[t]
        new_states = list(states)
        for l in range(L):
            need_o = need_y or l < L - 1
            deltas = []
            for h in range(H):
                if l == 0:
                    p = self.q_prep0[t][h]
                    a = self.q_pre0[t][h]["a"]
                else:
                    names = [n for n in self.rows[(l, h)] if n != "a" or need_y]
                    pre = self._stream_pre(l, h, u, names)
                    p = self._prep(l, h, pre, need_o)
                    a = pre.get("a")
                idx = l * H + h
                st = self._update(l, h, states[idx], p)
                new_states[idx] = st
                if need_o:
                    o = self._out(st, p)
                    if need_y:
                        y = _add(y, _idot(0.0, a, o))
                    if l < L - 1:
                        deltas.append(_dot_rows(self.wu_rows[(l, h)], o))
            if l < L - 1:
                u = self._advance_stream(u, deltas)
        return tuple(new_states), y

    def _memo_states(self, cut: tuple, i: int) -> tuple:
        """Single-layer entrywise kinds: each entry's value before query ``i`` depends on its
        own cut value alone; memoized per (head, entry, cut value)."""
        out = []
        memo = self.memo
        for h, st in enumerate(cut):
            lo, step = self.reg[(0, h)]
            entry = []
            for e, x in enumerate(st):
                key = (h, e, x)
                seq = memo.get(key)
                if seq is None:
                    seq = memo[key] = [x]
                    self.memo_size += 1
                while len(seq) <= i:
                    t = len(seq) - 1
                    p = self.q_prep0[t][h]
                    v = seq[-1]
                    alpha = p["alpha"]
                    v = (
                        _add(v, p["beta"][e])
                        if alpha is None
                        else _add(_mul(alpha[e], v), p["beta"][e])
                    )
                    if self.every:
                        v = self._quant(v, lo[e], step[e])
                    seq.append(v)
                    self.memo_size += 1
                entry.append(seq[i])
            out.append(tuple(entry))
        if self.memo_size > _MEMO_LIMIT:
            self.memo.clear()
            self.memo_size = 0
        return tuple(out)

    def _y(self, i: int, box: dict):
        """The enclosure of query ``i``'s output ``y`` over ``box``."""
        cut = self._data_forward(box)
        if self.L == 1 and self.kind in ENTRYWISE:
            states = self._memo_states(cut, i)
        else:
            done, states = self.cache.get(cut, (0, cut))
            if done > i:
                done, states = 0, cut
            for t in range(done, i):
                states, _ = self._query_step(t, states, False)
            if len(self.cache) * self.L * self.H * self.E >= _CACHE_LIMIT:
                self.cache.clear()
        after, y = self._query_step(i, states, True)
        if not (self.L == 1 and self.kind in ENTRYWISE):
            self.cache[cut] = (i + 1, after)
        return y

    def answer(self, i: int, box: dict) -> tuple[int, int]:
        """The range of query ``i``'s answers over ``box``."""
        y = self._y(i, box)
        s = self.s
        if y[0] != -INF:
            y = _wid(y[0] + 0.5, y[1] + 0.5)
        if y[0] == -INF:
            return (-1, s + 1)
        lo, hi = math.floor(y[0]), math.floor(y[1])
        return (min(max(lo, -1), s + 1), min(max(hi, -1), s + 1))


def _sqsum(x: list):
    """``sum_i x_i^2``: each square's exact range, added, moved out once."""
    return _isum(0.0, [_sq(v) for v in x])


# ---------------------------------------------------------------------------------------
# Step 4 and the entry points.


def _read_tree(tree: list, i: int, q: int, s: int) -> list[dict]:
    """The leaf boxes of query ``i``'s tree, in preorder (a box: ``{j: (lo_j, hi_j)}`` for
    the coordinates narrower than ``0..s``)."""
    n, pos = len(tree), 0
    stack: list[dict] = [{}]
    leaves = []
    while stack:
        box = stack.pop()
        if pos >= n:
            _fail(4, f"query {i}'s tree ends inside a split (after {n} integers)")
        j = tree[pos]
        pos += 1
        if j == -1:
            leaves.append(box)
            continue
        if not 0 <= j < q:
            _fail(4, f"query {i}'s tree, integer {pos - 1}: {j} is neither -1 nor a query")
        if pos >= n:
            _fail(4, f"query {i}'s tree ends inside a split (after {n} integers)")
        v = tree[pos]
        pos += 1
        lo, hi = box.get(j, (0, s))
        if not lo <= v < hi:
            _fail(4, f"query {i}'s tree splits t_{j} at {v}, outside its box {lo}..{hi}")
        left, right = dict(box), dict(box)
        left[j], right[j] = (lo, v), (v + 1, hi)
        stack.append(right)
        stack.append(left)
    if pos != n:
        _fail(4, f"query {i}'s tree goes on for {n - pos} more integers after its last leaf")
    return leaves


def _describe(box: dict) -> str:
    parts = [
        f"t_{j} = {lo}" if lo == hi else f"t_{j} in {lo}..{hi}"
        for j, (lo, hi) in sorted(box.items())
    ]
    if not parts:
        return "the whole family"
    return ", ".join(parts[:8]) + (f", ... ({len(parts)} bounds)" if len(parts) > 8 else "")


def _load(path_or_obj):
    if not isinstance(path_or_obj, str | PurePath):
        return path_or_obj  # already parsed: step 1 checks it is an object

    def refuse(constant):
        raise ValueError(f"{constant} is not JSON")

    try:
        with open(path_or_obj, encoding="utf-8") as fh:
            return json.load(fh, parse_constant=refuse)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        _fail(1, f"cannot read {path_or_obj} as JSON: {str(exc).splitlines()[0][:200]}")
    except RecursionError:
        _fail(1, f"{path_or_obj}: JSON nested too deeply")


def load_model(obj) -> _Model:
    """A proof's model (a parsed proof object, or a proof-like dict with ``bits``,
    ``rounding``, ``family``, ``perm``, ``architecture`` and ``arrays``), ready for
    :func:`leaf_answer`; :class:`ProofInvalid` where those fields are not valid."""
    if isinstance(obj, _Model):
        return obj
    _check_fields(obj, full=False)
    return _Model(obj)


def leaf_answer(obj_or_model, query: int, box_lo: list[int], box_hi: list[int]) -> tuple[int, int]:
    """The enclosure of query ``query``'s answer over the box ``t_i in [box_lo[i],
    box_hi[i]]``: its (lowest, highest) answer.  ``obj_or_model``: a proof(-like) dict or
    what :func:`load_model` returned (reusing its tables and memos)."""
    model = load_model(obj_or_model)
    q, s = model.q, model.s
    if not _is_int(query) or not 0 <= query < q:
        raise ValueError(f"query must be in 0..{q - 1}, got {query!r}")
    if len(box_lo) != q or len(box_hi) != q:
        raise ValueError(f"the box needs q = {q} bounds on each side")
    box = {}
    for i, (lo, hi) in enumerate(zip(box_lo, box_hi, strict=True)):
        lo, hi = int(lo), int(hi)
        if not 0 <= lo <= hi <= s:
            raise ValueError(f"box bound {i}: need 0 <= lo <= hi <= {s}, got {lo}, {hi}")
        if (lo, hi) != (0, s):
            box[i] = (lo, hi)
    return model.answer(query, box)


def check_proof(path_or_obj) -> ProofChecked:
    """Verify every step of a proof (a JSON file's path, or its parsed object).

    Raises
    ------
    ProofInvalid
        At the first step that does not hold (its message names the step and what).
    """
    obj = _load(path_or_obj)
    _check_fields(obj, full=True)
    if _canonical_digest(obj) != obj["digest"]:
        _fail(2, "digest is not the sha256 of the other fields' canonical JSON")
    model = _Model(obj)
    q, s = model.q, model.s
    trees = [_read_tree(tree, i, q, s) for i, tree in enumerate(obj["trees"])]
    total = sum(len(t) for t in trees)
    if total != obj["leaves"]:
        _fail(4, f"the trees have {total} leaves, the file says {obj['leaves']}")
    for i, leaves in enumerate(trees):
        for k, box in enumerate(leaves):
            lo, hi = box.get(i, (0, s))
            if lo != hi:
                _fail(4, f"query {i}, leaf {k} ({_describe(box)}): t_{i} is not pinned")
            got = model.answer(i, box)
            if got != (lo, lo):
                _fail(
                    4,
                    f"query {i}, leaf {k} ({_describe(box)}): the answer's enclosure is "
                    f"{got[0]}..{got[1]}, not {{{lo}}}",
                )
    return ProofChecked(
        q=q,
        s=s,
        bits=model.bits,
        rounding=model.rounding,
        kind=model.kind,
        weights_sha256=obj["weights_sha256"],
        leaves=total,
    )


def main(argv=None) -> int:
    """``python check_proof.py PROOF.json``: the checker alone, for a referee without
    sketchsim."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python check_proof.py PROOF.json", file=sys.stderr)
        return 2
    try:
        c = check_proof(Path(args[0]))
    except ProofInvalid as exc:
        print(f"REJECTED: {exc}", file=sys.stderr)
        return 1
    print(
        f"valid: weights {c.weights_sha256[:16]}... ({c.kind}, {c.bits} bits, rounding "
        f"{c.rounding}) answers every input of F({c.q}, {c.s}) right ({c.leaves} leaves)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
