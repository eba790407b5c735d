"""Re-verify a certificate file from the definitions alone (plain Python, exact rationals).

This module shares no code with the producer (:mod:`sketchsim.certify.proof`):
it imports only the standard library, reads the tokens as 0/1 strings, and
checks THEORY section 4 step by step:

1. every pair ``(x_c, c)`` has its self input ``(x_c; c, c)`` in the family,
   and the candidates ``c`` are distinct;
2. every ordered pair ``c != c'`` has a chain ``c = u_0, ..., u_K = c'`` for
   the query ``x_c``: each step raises the overlap with ``x_c`` by a gap
   ``g > 2 eps``, and the family holds ``(x; u, u)``, ``(x; u', u')`` and the
   mixed input ``(x; u, u')`` (and ``(x; u', u)`` when positional) (Lemma 2);
3. the chain's product ``P = prod 2 eps / (g - 2 eps)`` is at most 1 (Lemma 3);
4. the bound ``n^2 / (n + sum P^2)`` (Lemma 4), computed as a fraction, and
   the rank it certifies: ``floor + 1`` when strict (eps = 1/2), else ``ceil``;
   the ``claimed`` bound must be this bound (to a relative 1e-9: the producer
   writes a float) and the claimed rank no more than this rank;
5. ``family_sha256`` is the family the tokens and inputs spell out: the sha256
   of every input's three tokens in file order, one byte (0 or 1) per bit,
   followed by the scored position in decimal (:func:`family_sha256`; the same
   bytes as ``WitnessFamily.sha256`` of the producer), so a certificate cannot be
   passed off as one for another family file.

:func:`check_certificate` returns the verified bound, or raises
:class:`CertificateInvalid` naming the first invalid step.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from fractions import Fraction

__all__ = [
    "FORMAT",
    "Checked",
    "CertificateInvalid",
    "check_certificate",
    "family_sha256",
    "load_certificate",
]

FORMAT = "sketchsim-certificate/1"


class CertificateInvalid(Exception):
    """The certificate is well formed but one of its steps does not hold."""


class CertificateMalformed(Exception):
    """The file is not a certificate this checker can read."""


@dataclass
class Checked:
    """What a valid certificate proves: ``r >= rank`` for every head with error <= eps."""

    pairs: int
    chains: int
    bound: Fraction
    rank: int
    eps: Fraction
    strict: bool


def load_certificate(path) -> dict:
    """The certificate's JSON object; :class:`CertificateMalformed` when it is not one."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise CertificateMalformed(f"cannot read {path}: {exc}") from None
    except RecursionError:
        raise CertificateMalformed(f"{path}: JSON nested too deeply") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise CertificateMalformed(f"{path} is not a {FORMAT} file")
    return data


def _field(data: dict, key: str, kind):
    value = data.get(key)
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise CertificateMalformed(f"field {key!r} is missing or not a {kind.__name__}")
    return value


def _index(value, size: int, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < size:
        raise CertificateMalformed(f"{what} {value!r} is not a token index below {size}")
    return value


def family_sha256(tokens: list[str], inputs: list[list[int]], position: int) -> str:
    """The sha256 (hex) of the family that ``tokens`` and ``inputs`` spell out.

    The bytes hashed: for every input in order, its three tokens (indices into
    ``tokens``) in position order, each bit one byte ``0`` or ``1``; then the
    1-based scored ``position`` as decimal ASCII.  Equal to the producer's
    ``WitnessFamily.sha256()`` (the family's uint8 token array ``(F, 3, m)`` in C order,
    then ``str(position)``).
    """
    to_bytes = bytes.maketrans(b"01", b"\x00\x01")
    table = [t.encode("ascii").translate(to_bytes) for t in tokens]
    h = hashlib.sha256()
    block = 4096
    for start in range(0, len(inputs), block):
        h.update(b"".join(table[i] for triple in inputs[start : start + block] for i in triple))
    h.update(str(position).encode("ascii"))
    return h.hexdigest()


def check_certificate(data: dict) -> Checked:
    """Verify every step of a certificate object; return what it proves.

    Raises
    ------
    CertificateInvalid
        At the first step that does not hold (a missing input, a gap too small,
        a chain with the wrong ends, a product above 1, a claimed bound other
        than the bound proved, a claimed rank above the rank proved).
    CertificateMalformed
        When a field is missing or of the wrong type.
    """
    m = _field(data, "m", int)
    position = _field(data, "position", int)
    positional = _field(data, "positional", bool)
    strict = _field(data, "strict", bool)
    try:
        eps = Fraction(_field(data, "eps", str))
    except (ValueError, ZeroDivisionError):
        raise CertificateMalformed(f"eps {data.get('eps')!r} is not a fraction") from None
    if not 0 < eps <= Fraction(1, 2) or strict != (eps == Fraction(1, 2)):
        raise CertificateMalformed(f"eps must be in (0, 1/2], strict exactly at 1/2; got {eps}")
    if position not in (1, 2, 3):
        raise CertificateMalformed(f"position must be 1, 2 or 3, got {position}")
    tokens = _field(data, "tokens", list)
    for t in tokens:
        if not isinstance(t, str) or len(t) != m or set(t) - {"0", "1"}:
            raise CertificateMalformed(f"token {t!r:.40} is not a 0/1 string of length {m}")
    if len(set(tokens)) != len(tokens):
        raise CertificateMalformed("the token table repeats a token")
    n_tok = len(tokens)
    p = position - 1
    o1, o2 = (i for i in range(3) if i != p)
    family = set()
    inputs = _field(data, "inputs", list)
    for triple in inputs:
        if not isinstance(triple, list) or len(triple) != 3:
            raise CertificateMalformed(f"input {triple!r:.40} is not three token indices")
        idx = [_index(v, n_tok, "input token") for v in triple]
        family.add((idx[p], idx[o1], idx[o2]))  # (query; first other, second other)
    claimed_sha = _field(data, "family_sha256", str)

    def overlap(a: int, b: int) -> int:
        return sum(1 for u, v in zip(tokens[a], tokens[b], strict=True) if u == v == "1")

    def has(x: int, u: int, w: int) -> bool:
        return (x, u, w) in family

    pairs = _field(data, "pairs", list)
    for k, pair in enumerate(pairs):
        if not isinstance(pair, list) or len(pair) != 2:
            raise CertificateMalformed(f"pair {k} is not [query, candidate]")
        x, c = (_index(v, n_tok, f"pair {k}") for v in pair)
        if not has(x, c, c):
            raise CertificateInvalid(f"pair {k}: the self input (x; c, c) is not in the family")
    candidates = [pair[1] for pair in pairs]
    if len(set(candidates)) != len(candidates):
        raise CertificateInvalid("two pairs share a candidate token (that entry would be 1)")
    n = len(pairs)
    products: dict[tuple[int, int], Fraction] = {}
    for k, chain in enumerate(_field(data, "chains", list)):
        if not isinstance(chain, dict):
            raise CertificateMalformed(f"chain {k} is not an object")
        row, col = (
            _index(chain.get("row"), n, f"chain {k} row"),
            _index(chain.get("col"), n, f"chain {k} col"),
        )
        path = chain.get("path")
        if not isinstance(path, list) or len(path) < 2:
            raise CertificateMalformed(f"chain {k} has no path of at least two tokens")
        path = [_index(v, n_tok, f"chain {k} token") for v in path]
        if row == col or (row, col) in products:
            raise CertificateInvalid(f"chain {k}: row {row}, col {col} is a diagonal or repeated")
        x = pairs[row][0]
        if path[0] != candidates[row] or path[-1] != candidates[col]:
            raise CertificateInvalid(
                f"chain {k} (row {row}, col {col}): it runs from token {path[0]} to "
                f"{path[-1]}, not from pair {row}'s candidate {candidates[row]} to pair "
                f"{col}'s {candidates[col]}"
            )
        product = Fraction(1)
        for step, (u, w) in enumerate(zip(path, path[1:], strict=False)):
            gap = overlap(x, w) - overlap(x, u)
            where = f"chain {k} (row {row}, col {col}) step {step}"
            if gap <= 2 * eps:
                raise CertificateInvalid(f"{where}: overlap gap {gap} is not above 2 eps")
            for need, label in (((x, u, u), "(x; u, u)"), ((x, w, w), "(x; u', u')")):
                if not has(*need):
                    raise CertificateInvalid(f"{where}: input {label} is not in the family")
            forward, backward = has(x, u, w), has(x, w, u)
            if (positional and not (forward and backward)) or not (forward or backward):
                order = "both orders of" if positional else "the mixed input"
                raise CertificateInvalid(f"{where}: {order} (x; u, u') not in the family")
            product *= 2 * eps / (gap - 2 * eps)
        if product > 1:
            raise CertificateInvalid(f"chain {k} (row {row}, col {col}): product {product} > 1")
        products[(row, col)] = product
    missing = [(r, c) for r in range(n) for c in range(n) if r != c and (r, c) not in products]
    if missing:
        r, c = missing[0]
        raise CertificateInvalid(f"no chain for row {r}, col {c} ({len(missing)} missing)")
    bound = Fraction(n * n) / (n + sum(v * v for v in products.values())) if n else Fraction(0)
    if n == 0:
        rank = 0
    elif strict and n >= 2:
        rank = math.floor(bound) + 1
    else:
        rank = math.ceil(bound)
    claimed = data.get("claimed", {})
    if isinstance(claimed, dict) and "bound" in claimed:
        value = claimed["bound"]
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise CertificateMalformed(f"claimed bound {value!r:.40} is not a number")
        finite = isinstance(value, int) or math.isfinite(value)
        if not finite or abs(Fraction(value) - bound) > bound / 10**9:
            raise CertificateInvalid(
                f"the claimed bound {value!r:.40} differs from the proved bound {bound} "
                f"(= {float(bound):.12g})"
            )
    if isinstance(claimed, dict) and isinstance(claimed.get("certified_rank"), int):
        if claimed["certified_rank"] > rank:
            raise CertificateInvalid(
                f"claims r >= {claimed['certified_rank']} but its chains give r >= {rank}"
            )
    recomputed = family_sha256(tokens, inputs, position)
    if recomputed != claimed_sha:
        raise CertificateInvalid(
            f"family_sha256 {claimed_sha:.16}... is not the family its tokens and inputs "
            f"spell out ({recomputed:.16}...)"
        )
    return Checked(n, len(products), bound, rank, eps, strict)


def main(argv=None) -> int:
    """``python check.py CERT.json``: the checker alone, for a referee without sketchsim."""
    import sys

    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python check.py CERTIFICATE.json", file=sys.stderr)
        return 2
    try:
        checked = check_certificate(load_certificate(args[0]))
    except CertificateMalformed as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except CertificateInvalid as exc:
        print(f"REJECTED: {exc}", file=sys.stderr)
        return 1
    print(f"valid: r >= {checked.rank} (bound {checked.bound}, {checked.pairs} pairs)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
