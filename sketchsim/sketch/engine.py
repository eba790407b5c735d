"""The sketch-model engine: runs a protocol's plan over a batch of inputs.

One loop (:func:`_make_loop`) serves both engines: numba compiles it with the
plan's jitted functions bound in, or it runs as plain Python.  Per input it
returns a 128-bit fingerprint of the transcript (two independent 64-bit hashes
over the sketch entries in order), the answers at the query positions, and,
on request, the exact transcript.  A symbol outside its declared alphabet
stops the run with a :class:`~sketchsim.errors.ProtocolError`.

The plug-in contract (:mod:`sketchsim.sketch.contract`): pure-Python plans run
in the checked Python engine; a jitted plan first runs a guarded pass on a few
inputs of its first batch (bounds-checked copies of its functions, integer
checks on every symbol and answer, a second run for determinism), and plug-ins
not shipped with sketchsim keep bounds checking in their functions for the
whole run.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numba
import numpy as np
from numba import njit

from sketchsim.errors import ProtocolError, SketchsimError
from sketchsim.sketch.channels import CHANNEL_CODE, sketch_length
from sketchsim.sketch.contract import (
    brief,
    check_engine_size,
    checked_copy,
    run_checked,
    sample_indices,
)
from sketchsim.sketch.protocol import Context, Plan

__all__ = ["RunResult", "Engine"]

_M1 = 0xBF58476D1CE4E5B9
_M2 = 0x94D049BB133111EB
_SEED1 = 0x9E3779B97F4A7C15
_SEED2 = 0xD1B54A32D192ED03
_FNV = 0x100000001B3


@njit(inline="always")
def _fold(h1, h2, v):
    """Fold one sketch entry into both hashes; all arithmetic in uint64.

    ``h1``: splitmix64 finalizer of ``h1 ^ f(v, h1)``; ``h2``: FNV-style multiply-add.
    """
    u = np.uint64(v)
    x = h1 ^ (u + np.uint64(_SEED1) + (h1 << np.uint64(6)) + (h1 >> np.uint64(2)))
    x = (x ^ (x >> np.uint64(30))) * np.uint64(_M1)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(_M2)
    return x ^ (x >> np.uint64(31)), h2 * np.uint64(_FNV) + u + np.uint64(1)


_MASK = (1 << 64) - 1


def _fold_py(h1, h2, v):
    """:func:`_fold` on Python ints (the plain-Python engine)."""
    u = int(v) & _MASK
    x = h1 ^ ((u + _SEED1 + (h1 << 6) + (h1 >> 2)) & _MASK)
    x = ((x ^ (x >> 30)) * _M1) & _MASK
    x = ((x ^ (x >> 27)) * _M2) & _MASK
    return x ^ (x >> 31), (h2 * _FNV + u + 1) & _MASK


def _make_loop(emit, update, answer, jit, fold=_fold):
    """Build the engine loop over a batch with the protocol's functions bound in.

    ``layers`` is an int64 table with one row per layer:
    ``[channel code, symbols k, alphabet a, levels, first entry, end entry]``
    (entries of the concatenated transcript); ``sizes`` is
    ``[state size, largest k, transcript length]``; ``outputs`` is the tuple
    ``(transcripts, fingerprints, answers, errors)``.
    """

    jitted = fold is _fold

    def one_input(b, tokens, ctx, aux, layers, speak, queries, store, outputs, state, sym, sk):
        transcripts, fingerprints, answers, errors = outputs
        N = tokens.shape[1]
        h1 = np.uint64(_SEED1)
        h2 = np.uint64(_SEED2)
        if not jitted:
            h1, h2 = _SEED1, _SEED2
        for lay in range(layers.shape[0]):
            chan, k, a = layers[lay, 0], layers[lay, 1], layers[lay, 2]
            levels, lo, hi = layers[lay, 3], layers[lay, 4], layers[lay, 5]
            for e in range(lo, hi):
                sk[e] = 0
            spoken = 0
            for pos in range(N):
                if not speak[lay, pos]:
                    continue
                sym[:] = 0
                emit(lay, pos, tokens[b, pos], ctx, state[pos], aux, sym)
                for c in range(k):
                    v = sym[c]
                    if v < 0 or v >= a:
                        errors[b, 0] = 1
                        errors[b, 1] = lay
                        errors[b, 2] = pos
                        errors[b, 3] = v
                        errors[b, 4] = c
                        return
                    if chan == 0:
                        sk[lo + c] += v
                    elif chan == 1:
                        sk[lo + c * a + v] += 1
                    else:
                        sk[lo + spoken * k + c] = v
                spoken += 1
            if chan == 0 and levels > 0:
                for e in range(lo, hi):
                    if sk[e] > levels - 1:
                        sk[e] = levels - 1
            for e in range(lo, hi):
                h1, h2 = fold(h1, h2, sk[e])
            layer_sketch = sk[lo:hi]
            for pos in range(N):
                update(lay, pos, tokens[b, pos], ctx, state[pos], layer_sketch, aux)
        fingerprints[b, 0] = h1
        fingerprints[b, 1] = h2
        if store:
            for e in range(transcripts.shape[1]):
                transcripts[b, e] = sk[e]
        for i in range(queries.shape[0]):
            p = queries[i]
            answers[b, i] = answer(p, tokens[b, p], ctx, state[p], aux)

    one = jit(one_input)

    def loop(lo, hi, tokens, ctx, aux, layers, speak, sizes, queries, store, outputs):
        state_size, kmax, total_len = sizes[0], sizes[1], sizes[2]
        state = np.zeros((tokens.shape[1], state_size), dtype=np.int64)
        sym = np.zeros(max(1, kmax), dtype=np.int64)
        sk = np.zeros(max(1, total_len), dtype=np.int64)
        for b in range(lo, hi):
            state[:, :] = 0
            one(b, tokens, ctx, aux, layers, speak, queries, store, outputs, state, sym, sk)

    return loop


_LOOPS: dict = {}


def _jitted_loop(emit, update, answer):
    """The compiled loop for these three functions, built once per process.

    A serial, GIL-free loop run on threads compiles in about a third of the
    time of a ``prange`` version and runs as fast.
    """
    key = (emit, update, answer)
    if key not in _LOOPS:
        _LOOPS[key] = njit(nogil=True)(_make_loop(emit, update, answer, njit(inline="always")))
    return _LOOPS[key]


@dataclass
class RunResult:
    """Per input: transcript fingerprint (B, 2) uint64, answers (B, q), optional transcripts."""

    fingerprints: np.ndarray
    answers: np.ndarray
    transcripts: np.ndarray | None


class Engine:
    """A protocol plan bound to a context, ready to run batches.

    Parameters
    ----------
    plan : Plan
    ctx : Context
    name : str
        Protocol name, used in error messages.
    python : bool
        Force the plain-Python engine (the reference: every function as Python).

    Raises
    ------
    PluginError
        When the plan's per-input buffers exceed the engine memory limit.
    """

    def __init__(self, plan: Plan, ctx: Context, name: str = "protocol", python: bool = False):
        self.plan, self.ctx, self.name, self.python = plan, ctx, name, python
        n = ctx.n_tokens
        layers = plan.layers
        speakers = [L.speaker_positions(n) for L in layers]
        lengths = [
            sketch_length(L.channel, L.symbols, L.alphabet, len(pos))
            for L, pos in zip(layers, speakers, strict=True)
        ]
        kmax = max([1] + [L.symbols for L in layers])
        check_engine_size(n * plan.state_size + kmax + sum(lengths), name)
        self.speak = np.zeros((len(layers), n), dtype=np.bool_)
        self.layers = np.zeros((len(layers), 6), dtype=np.int64)
        end = 0
        for lay, L in enumerate(layers):
            self.speak[lay, list(speakers[lay])] = True
            start, end = end, end + lengths[lay]
            code = CHANNEL_CODE[L.channel]
            self.layers[lay] = (code, L.symbols, L.alphabet, L.levels, start, end)
        self.total_len = end
        self.sizes = np.array([plan.state_size, kmax, end], dtype=np.int64)
        self.queries = np.arange(ctx.q, dtype=np.int64)
        self.jitted = plan.jitted and not python
        self.threads = numba.config.NUMBA_NUM_THREADS
        self._validated = False
        if self.jitted:
            funcs = (plan.emit, plan.update, plan.answer)
            if not plan.builtin:  # not ours: bounds-checked for the whole run
                funcs = tuple(checked_copy(f) for f in funcs)
            self._loop = _jitted_loop(*funcs)

    def run(self, tokens: np.ndarray, store: bool = False) -> RunResult:
        """Run the protocol on packed tokens (B, n_tokens, words).

        The first call checks the plug-in contract on a sample of ``tokens``.

        Raises
        ------
        ProtocolError
            One line naming the protocol when it breaks its contract or fails.
        """
        tokens = np.ascontiguousarray(tokens)
        if not self.jitted:
            fp, ans, tr = run_checked(self, tokens, store, python=self.python)
            if not self._validated:
                idx = sample_indices(tokens.shape[0])
                fp2, ans2, _ = run_checked(self, tokens[idx], False, python=self.python)
                self._same(idx, (fp[idx], ans[idx]), (fp2, ans2))
                self._validated = True
            return RunResult(fp, ans, tr)
        if not self._validated:
            self._validate(tokens)
        return self._run_jitted(tokens, store)

    def _validate(self, tokens: np.ndarray) -> None:
        """Guarded first pass on a sample, then the compiled engine twice: all must agree."""
        idx = sample_indices(tokens.shape[0])
        sample = tokens[idx]
        runs = []
        if not self.plan.builtin:
            for _ in range(2):
                fp, ans, _ = run_checked(self, sample, False)
                runs.append((fp, ans))
        for _ in range(2):
            res = self._run_jitted(sample, False)
            runs.append((res.fingerprints, res.answers))
        for other in runs[1:]:
            self._same(idx, runs[0], other)
        self._validated = True

    def _same(self, idx, first, other) -> None:
        for what, a, b in (("transcript", first[0], other[0]), ("answers", first[1], other[1])):
            if not np.array_equal(a, b):
                i = int(idx[np.argmax((a != b).reshape(a.shape[0], -1).any(axis=1))])
                raise ProtocolError(
                    f"protocol {self.name} is not deterministic: input #{i + 1} of its first "
                    f"batch gave a different {what} when run again (emit, update and answer "
                    f"must be functions of their arguments only)"
                )

    def _run_jitted(self, tokens: np.ndarray, store: bool) -> RunResult:
        B = tokens.shape[0]
        fp = np.zeros((B, 2), dtype=np.uint64)
        ans = np.zeros((B, self.ctx.q), dtype=np.int64)
        err = np.zeros((B, 5), dtype=np.int64)
        tr = np.zeros((B if store else 1, max(self.total_len, 1)), dtype=np.int64)
        args = (
            tokens,
            self.ctx.array(),
            self.plan.aux,
            self.layers,
            self.speak,
            self.sizes,
            self.queries,
            store,
            (tr, fp, ans, err),
        )
        threads = min(self.threads, max(1, B // 64))
        bounds = np.linspace(0, B, threads + 1).astype(int)
        try:
            if threads == 1:
                self._loop(0, B, *args)
            else:
                with ThreadPoolExecutor(threads) as pool:
                    jobs = [
                        pool.submit(self._loop, int(lo), int(hi), *args)
                        for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)
                    ]
                    for job in jobs:
                        job.result()
        except (KeyboardInterrupt, SketchsimError):
            raise
        except Exception as exc:
            from numba.core.errors import NumbaError

            what = "cannot be compiled into the engine" if isinstance(exc, NumbaError) else "failed"
            raise ProtocolError(f"protocol {self.name} {what}: {brief(exc)}") from None
        if err[:, 0].any():
            b = int(np.argmax(err[:, 0]))
            lay, pos, v, c = (int(x) for x in err[b, 1:])
            raise ProtocolError(
                f"protocol {self.name}: layer {lay + 1}, token {pos + 1}, slot {c + 1} emitted "
                f"symbol {v} outside its declared alphabet 0..{self.layers[lay, 2] - 1}"
            )
        return RunResult(fp, ans, tr[:, : self.total_len] if store else None)
