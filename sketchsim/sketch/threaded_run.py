"""The measuring loop: the engine's threads over a run's inputs, chunk by chunk."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from sketchsim.errors import FamilyError
from sketchsim.sketch.engine import Engine
from sketchsim.sketch.entry_counts import entry_ranges
from sketchsim.sketch.entry_tally import EntryTally
from sketchsim.sketch.estimators import match_answers
from sketchsim.sketch.family import Family, check_variable_tokens

__all__ = ["run_all"]


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
