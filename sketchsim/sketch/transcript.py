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
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass

import numpy as np

from sketchsim import config
from sketchsim.errors import FamilyError, PluginError, SketchsimError
from sketchsim.estimates import byte_size
from sketchsim.sketch.channels import declared_bits, log2_range
from sketchsim.sketch.engine import Engine
from sketchsim.sketch.entry_counts import entry_ranges
from sketchsim.sketch.entry_tally import EntryTally
from sketchsim.sketch.estimators import entry_bits, match_answers
from sketchsim.sketch.family import HARD, Family, check_variable_tokens
from sketchsim.sketch.grouping import (
    entropy_bits,
    find_collision_candidates,
    group_transcripts,
    verified_collision,
)
from sketchsim.sketch.protocol import Protocol

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
]

#: Protocols run on F(q, s) when no ``--protocol`` is given (the hard family's own list).
DEFAULT_SPECS = HARD.default_protocols

EXHAUSTIVE_AUTO = config.TRANSCRIPT_EXHAUSTIVE_AUTO
EXHAUSTIVE_MAX = config.TRANSCRIPT_EXHAUSTIVE_MAX

#: Bytes per input that measuring holds besides the answer vector: fingerprints
#: (16), correctness (1) and the grouping temporaries (order, sorted copy,
#: group ids, inverse: about 48).
_BYTES_PER_INPUT = 65


class InputLimitError(SketchsimError):
    """A run would exceed a size limit; carries the values (the CLI words the remedy).

    Attributes
    ----------
    kind : {"exhaustive", "memory"}
    estimate, limit : float
        Inputs (exhaustive) or bytes (memory).
    """

    def __init__(self, message: str, kind: str, estimate: float, limit: float):
        super().__init__(message)
        self.kind, self.estimate, self.limit = kind, estimate, limit


def max_bytes() -> int:
    """The memory limit: ``SKETCHSIM_MAX_MEMORY_GB`` (GiB) or the config default."""
    text = os.environ.get("SKETCHSIM_MAX_MEMORY_GB")
    if not text:
        return config.TRANSCRIPT_MAX_BYTES
    try:
        value = float(text)
    except ValueError:
        raise SketchsimError(f"SKETCHSIM_MAX_MEMORY_GB must be a number, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise SketchsimError(f"SKETCHSIM_MAX_MEMORY_GB must be positive, got {text!r}")
    return int(value * 2**30)


def exhaustive_mode(family: Family, exhaustive: bool | None, limit: int, name: str) -> bool:
    """Whether to enumerate every input of ``family`` (``None``: when ``(s+1)^q`` is at
    most :data:`EXHAUSTIVE_AUTO`).

    Raises
    ------
    InputLimitError
        Exhaustive mode above ``limit`` inputs (``name`` words the limit).
    """
    if exhaustive is None:
        exhaustive = family.log2_size <= math.log2(EXHAUSTIVE_AUTO)
    if exhaustive and family.log2_size > math.log2(limit) + 1e-9:
        raise InputLimitError(
            f"exhaustive {family.describe()} has (s+1)^q = {family.size_text()} inputs, "
            f"above {name} 2^{limit.bit_length() - 1}",
            "exhaustive",
            2.0 ** min(family.log2_size, 1023.0),
            limit,
        )
    return bool(exhaustive)


def plan_inputs(family: Family, exhaustive: bool | None, samples: int) -> tuple[str, int]:
    """``(mode, inputs)`` after checking the limits, before anything is allocated.

    ``exhaustive=None`` chooses exhaustive mode when ``(s+1)^q`` is at most
    :data:`EXHAUSTIVE_AUTO`.

    Raises
    ------
    InputLimitError
        Exhaustive mode above :data:`EXHAUSTIVE_MAX` inputs, or an estimated
        allocation above :func:`max_bytes`.
    """
    if exhaustive_mode(family, exhaustive, EXHAUSTIVE_MAX, "the limit"):
        mode, n = "exhaustive", family.size
        extra = 24  # the enumeration index and one column temporary
    else:
        if samples < 1:
            raise SketchsimError(f"the number of samples must be >= 1, got {samples}")
        mode, n, extra = "sampled", samples, 0
    per = family.q * np.dtype(family.answer_dtype).itemsize + _BYTES_PER_INPUT + extra
    need, limit = float(n) * per, max_bytes()
    if need > limit:
        raise InputLimitError(
            f"{n:,} {mode} inputs of {family.describe()} need about {byte_size(need, 'GiB')} "
            f"({per} bytes each), above the memory limit {byte_size(limit, 'GiB')}",
            "memory",
            need,
            limit,
        )
    return mode, n


def choose_answers(family: Family, exhaustive: bool | None, samples: int):
    """The answer vectors to run: ``(mode, T)`` (limits checked by :func:`plan_inputs`)."""
    mode, n = plan_inputs(family, exhaustive, samples)
    if mode == "exhaustive":
        return mode, family.all_answers()
    return mode, family.sample_answers(n)


def check_family(protocol: Protocol, family: Family) -> None:
    """Raise PluginError unless ``protocol`` declares that it runs on ``family``."""
    fams = tuple(getattr(protocol, "families", ("hard",)))
    if family.name not in fams:
        raise PluginError(
            f"protocol {protocol.name} does not support family {family.name} "
            f"(it supports: {', '.join(fams) or 'none'})"
        )


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
    collision_check_power: float | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    def verdict_text(self) -> str:
        """The readout's verdict in words: "correct on every input" only when every
        input of the family was run, else what the sample shows."""
        return decoded_text(self.to_dict())


def decodability(
    exact: bool,
    collision: dict | None,
    entropy_high: float,
    bound: float,
    inputs: int,
    unresolved: bool = False,
    confidence: float = config.ENTROPY_CONFIDENCE,
    undersampled: int = 0,
) -> tuple[bool | None, str]:
    """``(decodable, reason)``: ``True`` only when proved, ``False`` only when refuted.

    Parameters
    ----------
    exact : bool
        Every input of the family was run (exhaustive mode).
    collision : dict or None
        A verified collision (same exact transcript, different answers).
    entropy_high : float
        Upper end of the entry entropy's interval (the exact value when ``exact``).
    bound : float
        The family's bound in bits.
    inputs : int
        Inputs run.
    unresolved : bool
        Fingerprint groups held inputs with different answers whose exact
        transcripts differ (a 128-bit fingerprint collision) and no verified
        collision was found among the pairs checked: no proof either way.
    undersampled : int
        Entries taking more than n/10 values in a sample: their entropy
        estimates (and the interval) are biased low, so the entropy argument is
        not used.
    """
    tol = config.BITS_TOLERANCE
    if collision is not None:
        i, j = collision["inputs"]
        return False, (
            f"refuted: verified collision (inputs #{i} and #{j} share a transcript, "
            f"answers differ at query {collision['position']})"
        )
    if entropy_high < bound - tol and (exact or not undersampled):
        where = "exact" if exact else f"upper end of its {100 * confidence:.0f}% interval"
        return False, (
            f"refuted by the entropy argument: entry entropy ({where}) {entropy_high:,.2f} "
            f"< bound {bound:,.2f} bits"
        )
    if exact and not unresolved:
        return True, (
            f"proved: exhaustive run over all {inputs:,} inputs, no two with different "
            "answers share a transcript"
        )
    if exact:
        return None, (
            f"not refuted ({inputs:,} inputs, all of them; a 128-bit fingerprint collision "
            "left some pairs unchecked)"
        )
    skipped = (
        f"; entry entropy interval not used: {undersampled:,} undersampled entries"
        if undersampled and entropy_high < bound - tol
        else ""
    )
    return None, (
        f"not refuted ({inputs:,} sampled inputs, collision check reach "
        f"{_reach(collision_power(inputs))}{skipped})"
    )


def entropy_below_bound(
    entropy_high: float, bound: float, exact: bool, undersampled: int = 0
) -> bool:
    """The entropy argument applies: the entry entropy (the upper end of its interval
    when sampled) is below ``bound``, and in a sample no entry is undersampled (their
    estimates are biased low; the interval would not support the claim)."""
    return entropy_high < bound - config.BITS_TOLERANCE and (exact or not undersampled)


def _reach(power: float | None) -> str:
    return "-" if power is None else f"{power:.2g}"


def decodable_verdict(r: dict) -> tuple[bool | None, str]:
    """``(decodable, reason)`` of a report's JSON entry.

    Every entry a run reads back holds ``decodable_reason`` (the resume checks of
    :mod:`sketchsim.runs.transcript` and :mod:`sketchsim.runs.frontier` refuse one
    without it, and a file of other code resumes nothing).
    """
    return r.get("decodable"), r["decodable_reason"]


def decoded_text(r: dict) -> str:
    """The readout's verdict of a report's JSON entry, saying what the run covered."""
    n, wrong = int(r.get("inputs", 0)), int(r.get("wrong_inputs", 0))
    if not r.get("capped", True):
        return "correct on every input" if not wrong else "wrong on some input"
    if wrong:
        return f"wrong on {wrong:,} of {n:,} sampled inputs"
    upper = r.get("error_rate_upper95")
    rate = f" (error rate < {upper:.2g} at 95%)" if upper is not None else ""
    return f"correct on {n:,} sampled inputs{rate}"


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
    ctx = family.context()
    plan = protocol.plan(ctx, params)
    engine = Engine(plan, ctx, protocol.name, python=python)
    start = time.perf_counter()
    B = T.shape[0]
    if exact is None:
        exact = family.log2_size <= 62 and B == family.size
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
        collision_check_power=None if exact else collision_power(B),
    )
    report.decoded_reason = report.verdict_text()
    return report


def error_rate_upper(wrong: int, n: int, confidence: float = 0.95) -> float:
    """One-sided Clopper-Pearson upper bound on an error rate from ``wrong`` of ``n``.

    With no errors it is ``1 - (1 - confidence)^(1/n)`` (about ``3/n``).
    """
    if n <= 0:
        return 1.0
    if wrong >= n:
        return 1.0
    if wrong == 0:
        return 1.0 - (1.0 - confidence) ** (1.0 / n)
    # the beta quantile scipy.stats.beta.ppf returns, without importing scipy.stats
    # (0.8 s, a quarter of the main job); the two are compared in the tests
    from scipy.special import betaincinv

    return float(betaincinv(wrong + 1, n - wrong, confidence))


def collision_power(n: int, expected: float = 3.0) -> float | None:
    """The per-pair collision probability a sample of ``n`` inputs detects.

    Two independent draws collide (same transcript, different answers) with
    probability ``mu`` for a protocol that is not decodable on the distribution;
    ``n`` draws then hold ``mu * n (n - 1) / 2`` colliding pairs on average.  This
    returns the ``mu`` for which that average is ``expected`` (3): merges at
    least that likely are expected to show in the sample; rarer ones may not.
    """
    pairs = n * (n - 1) / 2
    return expected / pairs if pairs > 0 else None


#: Bytes per worker batch of transcripts (kept in the core's cache while counted).
_BATCH_BYTES = 1 << 20
#: Seconds per chunk of inputs (one progress update each).
_CHUNK_SECONDS = 0.5


def run_all(family: Family, engine: Engine, T: np.ndarray, progress):
    """Run the engine over all inputs: fingerprints, correctness, entry counts, first failure.

    Inputs go in chunks (one progress step each) split between the engine's
    threads; each thread builds the per-input tokens of a small batch (the
    family's fixed tokens are shared, not copied per input), runs the compiled
    loop, counts the transcript entries and checks the answers, all without the
    GIL where the family's tokens allow it.  Results do not depend on the split.
    """
    B = T.shape[0]
    T = np.ascontiguousarray(T)
    fingerprints = np.zeros((B, 2), dtype=np.uint64)
    correct = np.zeros(B, dtype=bool)
    ranges = entry_ranges(engine.layers, engine.speak)
    fixed = family.fixed_tokens()
    want = (family.n_fixed, family.words)
    if not isinstance(fixed, np.ndarray) or fixed.dtype != np.uint64 or fixed.shape != want:
        got = getattr(fixed, "shape", type(fixed).__name__)
        raise FamilyError(
            f"family {family.name}: fixed_tokens must be a uint64 array of shape {want}, got {got}"
        )
    fixed = np.ascontiguousarray(fixed)
    n_var = family.n_tokens - fixed.shape[0]
    per_input = 8 * (max(engine.total_len, 1) + n_var * family.words + family.q)
    batch = int(min(4096, max(16, _BATCH_BYTES // per_input)))
    # the plain-Python engine holds the GIL and checks its contract on its first run
    threads = max(1, min(engine.threads, -(-B // batch))) if engine.jitted else 1
    # chunks (progress steps) of about _CHUNK_SECONDS once the first has been timed
    step = max(threads * batch, min(B, 1 << 13))
    if B:  # the plug-in contract, on a sample of the first chunk
        first = T[: min(B, family.chunk_size())]
        tokens = check_variable_tokens(family, family.variable_tokens(first), len(first))
        engine.validate(tokens, fixed)
    lock = None if family.tokens_thread_safe else threading.Lock()
    workers = [_Worker(family, engine, T, fixed, ranges, batch, lock) for _ in range(threads)]
    pool = ThreadPoolExecutor(threads) if threads > 1 else None
    try:
        lo = 0
        while lo < B:
            hi = min(B, lo + step)
            started = time.perf_counter()
            bounds = np.linspace(lo, hi, threads + 1).astype(np.int64)
            parts = list(zip(workers, bounds[:-1], bounds[1:], strict=True))
            if pool is None:
                for w, a, b in parts:
                    w.run(int(a), int(b), fingerprints, correct)
            else:
                jobs = [
                    pool.submit(w.run, int(a), int(b), fingerprints, correct) for w, a, b in parts
                ]
                for job in jobs:
                    job.result()
            if progress is not None:
                progress(hi, B)
            per_input = (time.perf_counter() - started) / (hi - lo)
            step = int(min(1 << 17, max(threads * batch, _CHUNK_SECONDS / max(per_input, 1e-9))))
            lo = hi
    finally:
        if pool is not None:
            pool.shutdown()
    tally = workers[0].tally
    for w in workers[1:]:
        tally.merge(w.tally)
    fails = [w.first_failure for w in workers if w.first_failure is not None]
    first_failure = min(fails, key=lambda f: f["input"]) if fails else None
    return fingerprints, correct, tally.result(), first_failure


class _Worker:
    """One thread's share of :func:`run_all`: buffers, entry tally, first failure."""

    def __init__(self, family, engine, T, fixed, ranges, batch, lock):
        self.family, self.engine, self.T, self.fixed = family, engine, T, fixed
        self.batch, self.lock = batch, lock
        self.tally = EntryTally(ranges)
        self.outputs = engine.new_outputs(batch, True)
        self.first_failure = None
        n_var = family.n_tokens - fixed.shape[0]
        self.buffer = np.empty((batch, n_var, family.words), dtype=np.uint64)

    def run(self, lo: int, hi: int, fingerprints: np.ndarray, correct: np.ndarray) -> None:
        family, engine, T = self.family, self.engine, self.T
        tr, fp, ans, _ = self.outputs
        for a in range(lo, hi, self.batch):
            b = min(hi, a + self.batch)
            rows = b - a
            if self.lock is None:
                tokens = family.variable_tokens(T[a:b], out=self.buffer)
            else:
                with self.lock:
                    tokens = family.variable_tokens(T[a:b], out=self.buffer)
            tokens = check_variable_tokens(family, tokens, rows)
            if engine.jitted:
                engine.run_into(tokens, self.fixed, True, self.outputs)
                transcripts, answers = tr, ans
                fingerprints[a:b] = fp[:rows]
            else:
                res = engine.run(tokens, store=True, fixed=self.fixed)
                transcripts = np.ascontiguousarray(res.transcripts, dtype=np.int64)
                answers, fingerprints[a:b] = res.answers, res.fingerprints
            self.tally.add(transcripts, rows)
            wrong = match_answers(answers, T, a, rows, correct)
            if wrong >= 0 and self.first_failure is None:
                i = a + wrong
                pos = int(np.argmax(answers[wrong] != T[i]))
                self.first_failure = {
                    "input": i,
                    "position": pos + 1,
                    "target": int(T[i, pos]),
                    "answer": int(answers[wrong, pos]),
                }


def _certify_collision(family, engine, T, inverse) -> tuple[dict | None, bool]:
    """``(collision, unresolved)``: two inputs with equal exact transcripts and different
    true answers, or None; ``unresolved`` when candidates were found but none held.

    No candidate at all proves that no two inputs run with different answers share
    an exact transcript (equal transcripts have equal fingerprints).
    """
    candidates = find_collision_candidates(inverse, T)
    found = verified_collision(family, lambda: engine, candidates, T.__getitem__)
    return found, found is None and bool(candidates)
