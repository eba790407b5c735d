"""What training fixed by hand: a run's *recipe*, recorded beside what it measured.

A capacity row that reaches near the floor may owe it to the recipe rather than to
training: a state width tied to the number of queries, a constant feature, the
readout basis (query ``i`` on register ``i``, the construction's own layout),
noise on the registers, training at ``K`` bits, keeping the best step.  Every
sweep row, weights header and ``capacity`` row names these (#63), so tables and
plots can keep "found by training" apart from "given by the recipe".

No torch here: ``sketchsim capacity`` derives a file's recipe from its validated
architecture and the training fields its header records (type-checked, never
taken as a list of words from the header).
"""

from __future__ import annotations

__all__ = ["recipe"]


def _num(value, default=0):
    """A header field as a number (a claim: anything else counts as absent)."""
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    return value if ok else default


def recipe(arch: dict, q: int, training: dict | None = None,
           state_basis: str = "trained") -> list[str]:  # fmt: skip
    """The hand-fixed choices of a run, in words (an empty list: none).

    Parameters
    ----------
    arch : dict
        The model's architecture (``rank``, ``value_width``, ``feature_map``).
    q : int
        Queries of the family it was trained on.
    training : dict, optional
        The run's training settings (:class:`~sketchsim.experiments.capacity_suite.
        CapacitySpec` as a dict: ``train_bits``, ``train_noise``, ``rebase_at``, ``keep``,
        ``weight_l1``, ``qat_from``, ``train_rounding``); absent fields are defaults.
    state_basis : {"trained", "readout"}
        ``readout``: the model was changed to its readout basis.

    Returns
    -------
    list of str
        ``"d = q"``, ``"r = q"`` / ``"r = 2q"`` (a width tied to the queries),
        ``"constant feature"`` (``elu1sum`` at rank 1: one feature, about 1),
        ``"readout basis"``, ``"register noise K=.."``, ``"trained at K=.. bits"``,
        ``"keep-best"``, ``"weight L1 .."``.
    """
    t = training or {}
    out = []
    r, d = _num(arch.get("rank")), _num(arch.get("value_width"))
    if q > 1 and d == q:
        out.append("d = q")
    if q > 1 and r and r % q == 0:
        out.append("r = q" if r == q else f"r = {r // q}q")
    if arch.get("feature_map") == "elu1sum" and r == 1:
        out.append("constant feature")
    if state_basis == "readout" or _num(t.get("rebase_at")):
        out.append("readout basis")
    noise = _num(t.get("train_noise"))
    if noise:
        out.append(f"register noise K={noise:g}")
    bits = _num(t.get("train_bits"))
    if bits:
        how = "" if t.get("qat_from", "start") == "start" else " after the float fit"
        where = " at the cut" if t.get("train_rounding") == "cut" else ""
        out.append(f"trained at K={bits:g} bits{where}{how}")
    if t.get("keep") == "best":
        out.append("keep-best")
    l1 = _num(t.get("weight_l1"))
    if l1:
        out.append(f"weight L1 {l1:g}")
    return out
