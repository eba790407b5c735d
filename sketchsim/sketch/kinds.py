"""The causal kinds, one record each: every table of the package that depends on the kind
is derived from here (issue #62's registry, the first step toward one module per kind).

A :class:`Kind` says what a kind *is*, as data: its name, its feature map (fixed, or
``linear``'s choice), the gate arrays it adds to the common ones and their shapes, how
many state entries a head has, whether its update is affine in the state (the training
shortcut of docs/theory.md 5.3), whether a change of the value basis commutes with it
(the readout basis), its flash-linear-attention reference, and the words of the
``--arch`` help.  :data:`KINDS` (whose order is the kernel's kind codes),
:data:`~sketchsim.sketch.causal.FIXED_MAPS`, :data:`~sketchsim.sketch.causal.GATE_ARRAYS`,
the kernel's codes (:mod:`sketchsim.sketch.causal_kernel`), the torch models'
``AFFINE_KINDS``, the readout basis's ``REBASE_KINDS`` and the ``--arch`` help are read
from :data:`RECORDS`; the recurrences themselves are still written per kind in the
kernel, the torch model, the prover and the reference (docs/architecture.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["Kind", "RECORDS", "KINDS", "kind", "arch_help", "retention_decay"]


def _taylor(r: int) -> int:
    return 1 + r + r * r


@dataclass(frozen=True)
class Kind:
    """One causal kind (docs/theory.md 5.3's table row, as data)."""

    name: str
    #: Its feature map, or None: ``linear`` chooses one of ``LINEAR_MAPS``.
    feature_map: str | None
    #: Arrays beyond the common ones, and their shapes in terms of ``r``, ``d``, ``m``.
    gates: dict = field(default_factory=dict)
    #: State entries of one head: ``entries(r, d, normalized, window)``.
    entries: Callable[[int, int, bool, int], int] = lambda r, d, norm, w: r * d
    #: Its update is ``S -> A_t(S) + B_t`` with ``A_t`` linear, set by the token, and its
    #: output affine in ``S`` (one-layer training runs queries on unit states).
    affine: bool = False
    #: A change of the value basis commutes with its update (the readout basis).
    rebase: bool = True
    #: flash-linear-attention's reference recurrence (tests/sketch/test_causal_fla.py).
    fla: str = ""
    #: Its words in the ``--arch`` help.
    help: str = ""


RECORDS = (
    Kind("linear", None, {},
         lambda r, d, norm, w: r * (d + 1) if norm else r * d,
         fla="fla.ops.linear_attn.naive.naive_recurrent_linear_attn"),
    Kind("based", "taylor", {},
         lambda r, d, norm, w: _taylor(r) * (d + 1),
         fla="fla.ops.based.naive.naive_parallel_based"),
    Kind("gla", "identity", {"wg": ("r", "m"), "bg": ("r",)}, affine=True,
         fla="fla.ops.gla.naive.naive_recurrent_gla"),
    Kind("deltanet", "l2", {"wbeta": (1, "m"), "bbeta": (1,)}, affine=True,
         fla="fla.ops.delta_rule.naive.delta_rule_recurrence"),
    Kind("gated-deltanet", "l2",
         {"wbeta": (1, "m"), "bbeta": (1,), "wg": (1, "m"), "bg": (1,), "alog": (1,)},
         affine=True, fla="fla.ops.gated_delta_rule.naive.naive_recurrent_gated_delta_rule"),
    Kind("mamba", "identity",
         {"wg": ("d", "m"), "bg": ("d",), "alog": ("r", "d"), "dskip": ("d",)},
         affine=True, rebase=False, fla=""),
    Kind("window", "softmax", {},
         lambda r, d, norm, w: w * (r + d),
         fla="fla.ops.attn.naive.naive_parallel_attn",
         help="window[:W] (W tokens; plain window: the whole input)"),
    Kind("retention", "identity", {}, affine=True,
         fla="fla.ops.retention.naive.naive_retention"),
)  # fmt: skip

#: Every kind's name, in the order of the kernel's kind codes.
KINDS = tuple(k.name for k in RECORDS)


def kind(name: str) -> Kind:
    """The record of kind ``name`` (KeyError for another)."""
    for k in RECORDS:
        if k.name == name:
            return k
    raise KeyError(name)


def arch_help() -> str:
    """The kinds as the ``--arch`` help lists them: ``linear, based, ..., window[:W] (...)``
    (the CLI writes the words out, so ``--help`` imports nothing; a test keeps them equal)."""
    return ", ".join(k.help or k.name for k in RECORDS)


def retention_decay(head: int) -> float:
    """RetNet's fixed decay of head ``head`` (fla's ``naive_retention``): ``1 - 2^(-5-h)``,
    exact in floating point."""
    return 1.0 - 2.0 ** (-5 - head)
