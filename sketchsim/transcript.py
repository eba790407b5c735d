"""The main job: run sketch protocols on F(q, s) and measure their transcripts.

For each protocol: declared bits (THEORY section 5), distinct transcripts, their
log2, the empirical entropy, the fraction of inputs answered correctly at every
query, whether the declared size meets ``q log2(s+1)``, and a certificate of
failure (two inputs, same transcript, different answers) where one exists.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np

from sketchsim.errors import SketchsimError
from sketchsim.sketch.channels import declared_bits, log2_range
from sketchsim.sketch.engine import Engine
from sketchsim.sketch.family import HardFamily
from sketchsim.sketch.measure import entropy_bits, find_collision_candidates, group_transcripts
from sketchsim.sketch.protocol import Protocol

__all__ = ["DEFAULT_SPECS", "EXHAUSTIVE_AUTO", "ProtocolReport", "choose_answers", "measure"]

#: Protocols run when no ``--protocol`` is given.
DEFAULT_SPECS = (
    "raw",
    "block-counts",
    "clipped-counts",
    "kernel",
    "kernel:bits=6",
    "kernel:values=blocks,bits=7",
    "multihead:heads=4",
)

#: Exhaustive mode is the default up to this many inputs.
EXHAUSTIVE_AUTO = 1 << 20
EXHAUSTIVE_MAX = 1 << 24


@dataclass
class ProtocolReport:
    """One protocol's measurements (the entries of the JSON ``protocols`` list)."""

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
    spec: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


def choose_answers(family: HardFamily, exhaustive: bool | None, samples: int):
    """The answer vectors to run: ``(mode, T)``; ``exhaustive=None`` chooses by size."""
    if exhaustive is None:
        exhaustive = family.size <= EXHAUSTIVE_AUTO
    if exhaustive:
        if family.size > EXHAUSTIVE_MAX:
            raise SketchsimError(
                f"exhaustive F(q={family.q}, s={family.s}) has (s+1)^q = {family.size:.4g} "
                f"inputs, above the limit 2^{EXHAUSTIVE_MAX.bit_length() - 1}; use --samples"
            )
        return "exhaustive", family.all_answers()
    return "sampled", family.sample_answers(samples)


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
    family: HardFamily,
    T: np.ndarray,
    protocol: Protocol,
    params: dict,
    source: str = "",
    progress: Callable[[int, int], None] | None = None,
    python: bool = False,
) -> ProtocolReport:
    """Run one protocol on the inputs with answer vectors ``T`` and measure it.

    Parameters
    ----------
    family : HardFamily
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
    """
    ctx = family.context()
    plan = protocol.plan(ctx, params)
    engine = Engine(plan, ctx, protocol.name, python=python)
    start = time.perf_counter()
    B = T.shape[0]
    fingerprints = np.zeros((B, 2), dtype=np.uint64)
    correct = np.zeros(B, dtype=bool)
    first_failure = None
    step = family.chunk_size()
    buffer = np.empty((min(step, B), family.n_tokens, family.words), dtype=np.uint64)
    for lo in range(0, B, step):
        hi = min(B, lo + step)
        res = engine.run(family.tokens(T[lo:hi], out=buffer))
        fingerprints[lo:hi] = res.fingerprints
        ok = (res.answers == T[lo:hi]).all(axis=1)
        correct[lo:hi] = ok
        if first_failure is None and not ok.all():
            b = int(np.argmin(ok))
            pos = int(np.argmax(res.answers[b] != T[lo + b]))
            first_failure = {
                "input": lo + b,
                "position": pos + 1,
                "target": int(T[lo + b, pos]),
                "answer": int(res.answers[b, pos]),
            }
        if progress is not None:
            progress(hi, B)
    inverse, counts = group_transcripts(fingerprints)
    distinct = int(counts.size)
    declared = declared_bits(plan.layers, ctx.n_tokens)
    collision = _certify_collision(family, engine, T, inverse)
    return ProtocolReport(
        name=protocol.name,
        params=dict(params),
        source=source,
        engine="jit" if engine.jitted else "python (slow)",
        layers=_layer_info(plan, ctx.n_tokens),
        declared_bits=declared,
        distinct_transcripts=distinct,
        log2_distinct=math.log2(distinct) if distinct else 0.0,
        entropy_bits=entropy_bits(counts),
        correct_fraction=float(correct.mean()) if B else 1.0,
        meets_bound=declared >= family.bound_bits - 1e-9,
        wrong_inputs=int(B - correct.sum()),
        collision=collision,
        first_failure=first_failure,
        seconds=time.perf_counter() - start,
    )


def _certify_collision(family, engine, T, inverse) -> dict | None:
    """Two inputs with equal exact transcripts and different true answers, or None."""
    for i, j in find_collision_candidates(inverse, T):
        res = engine.run(family.tokens(T[[i, j]]), store=True)
        if not np.array_equal(res.transcripts[0], res.transcripts[1]):
            continue  # a 128-bit fingerprint collision: not a certificate
        pos = int(np.argmax(T[i] != T[j]))
        return {
            "inputs": [i, j],
            "answers_a": T[i].tolist(),
            "answers_b": T[j].tolist(),
            "position": pos + 1,
            "protocol_answer": int(res.answers[0, pos]),
            "transcript_entries": int(res.transcripts.shape[1]),
            "verified": True,
        }
    return None
