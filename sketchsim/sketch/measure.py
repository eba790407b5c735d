"""The main job: run sketch protocols on a family and measure their transcripts.

For each protocol (THEORY section 5): declared bits; in exhaustive mode the
distinct transcripts, their log2 and the transcript entropy; in every mode the
*used bits* (sum over entries of log2 of the values each entry took) and the
*entry entropy* (sum over entries of each entry's entropy, an upper bound on
the transcript entropy, estimable from a sample; see
:func:`sketchsim.sketch.estimators.entry_bits`), per layer and in total; the
fraction of inputs answered correctly at every query, whether the declared
size meets the bound, whether the entry entropy is below it ("cannot be
correct on this distribution"), and a failure certificate (two inputs, same
transcript, different answers) where one exists.

The pieces live in one module per reason to change: which inputs
(:mod:`~sketchsim.sketch.input_plan`), the measuring loop
(:mod:`~sketchsim.sketch.threaded_run`), the report
(:mod:`~sketchsim.sketch.report`) and its verdicts
(:mod:`~sketchsim.sketch.verdicts`); their public names are re-exported here.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from sketchsim.errors import PluginError
from sketchsim.sketch.engine import Engine
from sketchsim.sketch.family import HARD, Family
from sketchsim.sketch.grouping import (
    entropy_bits,
    find_collision_candidates,
    group_transcripts,
    verified_collision,
)
from sketchsim.sketch.input_plan import (
    EXHAUSTIVE_AUTO,
    EXHAUSTIVE_MAX,
    InputLimitError,
    choose_answers,
    covers_family,
    exhaustive_mode,
    max_bytes,
    plan_inputs,
)
from sketchsim.sketch.protocol import Protocol
from sketchsim.sketch.report import ProtocolReport, protocol_report
from sketchsim.sketch.threaded_run import run_all
from sketchsim.sketch.verdicts import (
    collision_power,
    decodability,
    decodable_verdict,
    decoded_text,
    entropy_below_bound,
    error_rate_upper,
)

__all__ = [
    "DEFAULT_SPECS",
    "EXHAUSTIVE_AUTO",
    "EXHAUSTIVE_MAX",
    "exhaustive_mode",
    "decodability",
    "decodable_verdict",
    "decoded_text",
    "entropy_below_bound",
    "protocol_report",
    "InputLimitError",
    "ProtocolReport",
    "check_family",
    "error_rate_upper",
    "collision_power",
    "choose_answers",
    "max_bytes",
    "measure",
    "plan_inputs",
    "run_all",
]

#: Protocols run on F(q, s) when no ``--protocol`` is given (the hard family's own list).
DEFAULT_SPECS = HARD.default_protocols


def check_family(protocol: Protocol, family: Family) -> None:
    """Raise PluginError unless ``protocol`` declares that it runs on ``family``."""
    fams = tuple(getattr(protocol, "families", ("hard",)))
    if family.name not in fams:
        raise PluginError(
            f"protocol {protocol.name} does not support family {family.name} "
            f"(it supports: {', '.join(fams) or 'none'})"
        )


def measure(
    family: Family,
    T: np.ndarray,
    protocol: Protocol,
    params: dict,
    source: str = "",
    progress: Callable[[int, int], None] | None = None,
    python: bool = False,
    exact: bool | None = None,
) -> ProtocolReport:
    """Run one protocol on the inputs with answer vectors ``T`` and measure it.

    Parameters
    ----------
    family : Family
        :class:`~sketchsim.sketch.family.HardFamily` or any family plug-in.
    T : numpy.ndarray, shape (B, q)
        True answer vectors (one input each).
    protocol : Protocol
    params : dict
        Resolved parameters.
    source : str
        Where the protocol came from (for the report).
    progress : callable, optional
        ``progress(done, total)`` after each chunk.
    python : bool
        Force the plain-Python engine.
    exact : bool, optional
        ``T`` is the whole family, each input once (exhaustive mode): entropies
        are exact, not estimates.  Default: ``B == family.size``.
    """
    check_family(protocol, family)
    protocol.check_run(params, family)
    ctx = family.context()
    plan = protocol.plan(ctx, params)
    engine = Engine(plan, ctx, protocol.name, python=python)
    start = time.perf_counter()
    B = T.shape[0]
    if exact is None:
        exact = covers_family(family, B)
    fingerprints, correct, counts, first_failure = run_all(family, engine, T, progress)
    inverse, group_counts = group_transcripts(fingerprints)
    collision, unresolved = _certify_collision(family, engine, T, inverse)
    return protocol_report(
        protocol.name, params, source, family, plan, engine.layers, engine.jitted,
        counts=counts, exact=exact, distinct=int(group_counts.size),
        entropy=entropy_bits(group_counts), n_correct=int(correct.sum()), inputs=B,
        collision=collision, first_failure=first_failure, start=start,
        collision_unresolved=unresolved,
    )  # fmt: skip


def _certify_collision(family, engine, T, inverse) -> tuple[dict | None, bool]:
    """``(collision, unresolved)``: two inputs with equal exact transcripts and different
    true answers, or None; ``unresolved`` when candidates were found but none held.

    No candidate at all proves that no two inputs run with different answers share
    an exact transcript (equal transcripts have equal fingerprints).
    """
    candidates = find_collision_candidates(inverse, T)
    found = verified_collision(family, lambda: engine, candidates, T.__getitem__)
    return found, found is None and bool(candidates)
