"""One protocol's report: what a run measured (one process or a cluster) in bits and verdicts."""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass

import numpy as np

from sketchsim import config
from sketchsim.sketch.channels import declared_bits, log2_range
from sketchsim.sketch.estimators import entry_bits
from sketchsim.sketch.family import Family
from sketchsim.sketch.fano import fano_floor
from sketchsim.sketch.verdicts import (
    collision_power,
    decodability,
    decoded_text,
    entropy_below_bound,
    error_rate_upper,
)

__all__ = ["ProtocolReport", "protocol_report"]


@dataclass
class ProtocolReport:
    """One protocol's measurements (the entries of the JSON ``protocols`` list).

    ``distinct_transcripts``, ``log2_distinct`` and ``entropy_bits`` are exact in
    exhaustive mode and capped by the sample in sampled mode (``capped``).

    Two three-valued verdicts (THEORY section 5), each ``True`` only when the
    run proves it, ``False`` only when it refutes it, else ``None``:

    ``decodable``, the true answers are a function of the transcript on the
    family.  ``True``: exhaustive run, no two inputs with different answers
    share a transcript.  ``False``: a verified collision (two inputs, same exact
    transcript, different answers), or the upper end of the entry entropy's
    interval below the bound (the entropy argument; a 95% interval in sampled
    mode).  ``None``: sampled and neither, "not refuted" (the check's reach is
    ``collision_check_power``).  ``decodable_reason`` says which, in words.

    ``decoded``, the protocol's own readout is right on every input of the
    family.  ``True``: exhaustive and right on all; ``False``: wrong on some
    input run; ``None``: sampled and right on every sampled input
    (``error_rate_upper95`` is then the one-sided 95% Clopper-Pearson upper
    bound on its error rate).  ``decoded_reason`` says it in words
    (:meth:`verdict_text`: "correct on every input", "correct on n sampled
    inputs (error rate < u at 95%)", "wrong on k of n sampled inputs").

    A protocol can be decodable and not decoded (its readout is wrong, the
    transcript is not); never decoded and not decodable.
    """

    name: str
    params: dict
    source: str
    engine: str
    layers: list
    declared_bits: float
    distinct_transcripts: int
    log2_distinct: float
    entropy_bits: float
    correct_fraction: float
    meets_bound: bool
    wrong_inputs: int
    collision: dict | None
    first_failure: dict | None
    seconds: float
    used_bits: float = 0.0
    entry_entropy_bits: float = 0.0
    entry_entropy_plugin_bits: float = 0.0
    entry_entropy_ci: list | None = None
    undersampled_entries: int = 0
    entry_entropy_below_bound: bool = False
    capped: bool = False
    family: str = "hard"
    spec: str = ""
    inputs: int = 0
    decodable: bool | None = None
    decodable_reason: str = ""
    decoded: bool | None = None
    decoded_reason: str = ""
    error_rate_upper95: float | None = None
    #: Sampled: Fano's floor on the transcript entropy at ``error_rate_upper95``
    #: (:func:`sketchsim.sketch.fano.fano_floor`, docs/theory.md 5.4), a 95% statement
    #: where "right on every input" cannot be one; None when every input was run.
    floor_at_error: float | None = None
    collision_check_power: float | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    def verdict_text(self) -> str:
        """The readout's verdict in words: "correct on every input" only when every
        input of the family was run, else what the sample shows."""
        return decoded_text(self.to_dict())


def _layer_info(plan, n_tokens: int) -> list[dict]:
    out = []
    for L in plan.layers:
        n = len(L.speaker_positions(n_tokens))
        out.append(
            {
                "channel": L.channel,
                "symbols": L.symbols,
                "alphabet": L.alphabet,
                "speakers": n,
                "levels": L.levels,
                "bits": log2_range(L.channel, L.symbols, L.alphabet, n, L.levels),
            }
        )
    return out


def protocol_report(
    name: str, params: dict, source: str, family: Family, plan, layer_table: np.ndarray,
    jitted: bool, *, counts, exact: bool, distinct: int, entropy: float, n_correct: int,
    inputs: int, collision: dict | None, first_failure: dict | None, start: float,
    collision_unresolved: bool = False,
) -> ProtocolReport:  # fmt: skip
    """The report of one protocol from what a run measured (one process or a cluster).

    ``layer_table`` is the engine's per-layer table (entry ranges in columns 4-5),
    ``counts`` the transcript entries' value counts; entry entropies per layer and
    in total are computed here, so both paths report them the same way.
    ``collision_unresolved``: collision candidates were found whose exact
    transcripts differ, and no verified one (decodability is then not proved).
    """
    ctx = family.context()
    layers = _layer_info(plan, ctx.n_tokens)
    conf = config.ENTROPY_CONFIDENCE
    for info, (lo_e, hi_e) in zip(layers, layer_table[:, 4:6], strict=True):
        info.update(entry_bits(counts, int(lo_e), int(hi_e), exact, conf).to_dict())
    total = entry_bits(counts, exact=exact, confidence=conf)
    declared = declared_bits(plan.layers, ctx.n_tokens)
    tol = config.BITS_TOLERANCE
    B = inputs
    decodable, reason = decodability(
        exact, collision, total.ci_high, family.bound_bits, B, collision_unresolved, conf,
        total.undersampled_entries,
    )  # fmt: skip
    report = ProtocolReport(
        name=name,
        params=dict(params),
        source=source,
        engine="jit" if jitted else "python (slow)",
        layers=layers,
        declared_bits=declared,
        distinct_transcripts=distinct,
        log2_distinct=math.log2(distinct) if distinct else 0.0,
        entropy_bits=entropy,
        correct_fraction=n_correct / B if B else 1.0,
        meets_bound=declared >= family.bound_bits - tol,
        wrong_inputs=int(B - n_correct),
        collision=collision,
        first_failure=first_failure,
        seconds=time.perf_counter() - start,
        used_bits=total.used_bits,
        entry_entropy_bits=total.entry_entropy,
        entry_entropy_plugin_bits=total.plugin_entropy,
        entry_entropy_ci=[total.ci_low, total.ci_high],
        undersampled_entries=total.undersampled_entries,
        entry_entropy_below_bound=entropy_below_bound(
            total.ci_high, family.bound_bits, exact, total.undersampled_entries
        ),
        capped=not exact,
        family=family.name,
        inputs=B,
        decodable=decodable,
        decodable_reason=reason,
        decoded=False if n_correct < B else (True if exact else None),
        error_rate_upper95=None if exact else error_rate_upper(B - n_correct, B),
        floor_at_error=None
        if exact
        else fano_floor(
            family.bound_bits,
            family.q * math.log2(family.s + 1),
            error_rate_upper(B - n_correct, B),
        ),  # fmt: skip
        collision_check_power=None if exact else collision_power(B),
    )
    report.decoded_reason = report.verdict_text()
    return report
