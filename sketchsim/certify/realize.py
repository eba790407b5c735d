"""Realize the rows of ``sketchsim bound``: build each claimed family, export it, certify it.

A row of :func:`~sketchsim.certify.bounds.best_bound` is a closed-form value:
Lemma 4 over the chain bounds ``P(|c' \\ c|)`` of the words a code keeps
(THEORY section 4).  :func:`realize_row` builds the witness family of exactly
those words with chains and both orders, writes it to ``bound-m{m}.npz``,
reads the file back and runs the certificate on it, so the claimed rank and
the rank the family certifies sit side by side.  Families within
:data:`~sketchsim.certify.witness.WITNESS_MAX_INPUTS` inputs (counted exactly
before building) are built with ``build_witness`` and certified with
``certify``; larger ones (m >= 24 in the table) are packed
(:mod:`sketchsim.certify.packed`) and certified block by block.
Optionally the proof object is written and re-checked with the independent
checker (:mod:`sketchsim.certify.check`) for families small enough for it.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from sketchsim.certify.bounds import BoundRow, row_words
from sketchsim.certify.certificate import certify
from sketchsim.certify.packed import PackedFamily, load_any_family, save_packed_family
from sketchsim.certify.packed_certify import certify_packed
from sketchsim.certify.packed_witness import build_packed_witness, witness_input_count
from sketchsim.certify.witness import WITNESS_MAX_INPUTS, build_witness, save_family
from sketchsim.errors import SketchsimError

__all__ = [
    "EXPORT_MAX_M",
    "PROOF_MAX_INPUTS",
    "Realized",
    "realize_row",
    "realize_witness",
    "check_export_width",
]

#: Widest m whose families ``bound --export`` builds (4,096 words at most: up to 10^8 inputs).
EXPORT_MAX_M = 32
#: Largest family whose proof object is written and re-checked (the checker is plain Python).
PROOF_MAX_INPUTS = 400_000


@dataclass
class Realized:
    """The family behind one ``bound`` row, and what it certifies at the limit eps -> 1/2.

    ``status`` is ``"equal"`` (certified rank = claimed), ``"above"`` or ``"below"``.
    """

    m: int
    code: str
    file: str
    format: str
    codewords: int
    inputs: int
    file_bytes: int
    file_sha256: str
    family_sha256: str
    claimed_rank: int
    claimed_bound: float
    certified_rank: int
    bound: float
    pairs: int
    status: str
    build_seconds: float
    certify_seconds: float
    certificate: dict | None = None

    def to_dict(self) -> dict:
        """The fields as a JSON-ready dict."""
        return asdict(self)


def check_export_width(m: int, m2: int) -> None:
    """Refuse widths whose families ``bound --export`` does not build."""
    if m2 > EXPORT_MAX_M:
        param = "m" if m > EXPORT_MAX_M else "to"
        value = m if param == "m" else m2
        raise SketchsimError(
            f"{param} must be <= {EXPORT_MAX_M} with export (families of up to 4,096 words "
            f"are built; past m = {EXPORT_MAX_M} the rows are closed-form only), got {value}",
            param=param,
        )


def _file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _build(words, row: BoundRow, path: Path, seed: int) -> str:
    """Build and write the family of ``words``; returns its format.

    Token arrays (``build_witness``) when the family's exact size is within the
    in-memory limit, else packed keys.
    """
    if witness_input_count(words, chains=True) <= WITNESS_MAX_INPUTS:
        family = build_witness(words, row.code, chains=True, both_orders=True, seed=seed)
        save_family(family, path)
        return "tokens"
    packed = build_packed_witness(words, row.code, chains=True, both_orders=True, seed=seed)
    save_packed_family(packed, path)
    return "packed"


def _proof(family, path: Path) -> dict:
    """Write the proof object beside the family and re-check it with the independent checker."""
    from sketchsim.certify.check import check_certificate
    from sketchsim.certify.proof import certificate_proof
    from sketchsim.results import write_json_atomic

    if isinstance(family, PackedFamily):
        if family.inputs > PROOF_MAX_INPUTS:
            return {"skipped": f"{family.inputs:,} inputs, over {PROOF_MAX_INPUTS:,}"}
        family = family.unpack()
    if len(family.tokens) > PROOF_MAX_INPUTS:
        return {"skipped": f"{len(family.tokens):,} inputs, over {PROOF_MAX_INPUTS:,}"}
    start = time.perf_counter()
    proof = certificate_proof(family)
    write_json_atomic(path, proof)
    checked = check_certificate(proof)
    return {
        "file": path.name,
        "file_sha256": _file_sha256(path),
        "chains": len(proof["chains"]),
        "checked_rank": checked.rank,
        "checked_bound": str(checked.bound),
        "seconds": round(time.perf_counter() - start, 3),
    }


def realize_row(row: BoundRow, out_dir: str | Path, seed: int = 0, proof: bool = False) -> Realized:
    """Build, export and certify the witness family a ``bound`` row claims.

    Parameters
    ----------
    row : BoundRow
        A row of ``best_bound(row.m, seed)`` with ``row.m <= EXPORT_MAX_M``.
    out_dir : path-like
        Folder of ``bound-m{m}.npz`` (and ``bound-m{m}.cert.json`` with ``proof``).
    seed : int
        The seed of the row's codes; also orders the chain tokens.
    proof : bool
        Also write the proof object and re-check it (families up to
        :data:`PROOF_MAX_INPUTS` inputs).

    Returns
    -------
    Realized
    """
    check_export_width(row.m, row.m)
    out_dir = Path(out_dir)
    path = out_dir / f"bound-m{row.m}.npz"
    start = time.perf_counter()
    words, _ = row_words(row, seed)
    fmt = _build(words, row, path, seed)
    built = time.perf_counter()
    family = load_any_family(path)  # certify the file as written
    if isinstance(family, PackedFamily):
        cert, inputs = certify_packed(family, eps_list=()), family.inputs
    else:
        cert, inputs = certify(family, eps_list=()), len(family.tokens)
    certified = time.perf_counter()
    rank = cert.certified_rank["0.5"]
    claimed = row.certified_rank
    status = "equal" if rank == claimed else "above" if rank > claimed else "below"
    result = Realized(
        m=row.m,
        code=row.code,
        file=path.name,
        format=fmt,
        codewords=len(words),
        inputs=int(inputs),
        file_bytes=path.stat().st_size,
        file_sha256=_file_sha256(path),
        family_sha256=cert.family_sha256,
        claimed_rank=row.certified_rank,
        claimed_bound=row.bound,
        certified_rank=rank,
        bound=cert.bound["0.5"],
        pairs=cert.pairs["0.5"],
        status=status,
        build_seconds=round(built - start, 3),
        certify_seconds=round(certified - built, 3),
    )
    if proof:
        result.certificate = _proof(family, out_dir / f"bound-m{row.m}.cert.json")
    return result


def realize_witness(
    code, kind: str, codewords: int, chains: bool, both_orders: bool, seed: int,
    complements: bool, out, packed: bool = False,
):  # fmt: skip
    """Build the witness family of ``code``, write it to ``out`` and certify it.

    ``codewords`` words are used (0: all, chosen with ``seed``); ``packed``
    stores tokens as integer keys and certifies block by block (families past
    the in-memory limit).  Returns ``(family, inputs, certificate)``.
    """
    from sketchsim.certify.packed_witness import subset_words
    from sketchsim.certify.witness import check_witness_size

    if packed:
        words = subset_words(code, codewords or None, seed)
        family = build_packed_witness(words, kind, chains, both_orders, seed)
        family.meta["complements"] = complements
        save_packed_family(family, out)
        return family, family.inputs, certify_packed(family)
    m = code.shape[1]
    check_witness_size(len(code) if codewords == 0 else min(codewords, len(code)), m, chains)
    family = build_witness(code, kind, codewords or None, chains, both_orders, seed)
    family.meta["complements"] = complements
    save_family(family, out)
    return family, len(family.tokens), certify(family)
