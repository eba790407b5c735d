"""The sketch-model engine: runs a protocol's plan over a batch of inputs.

numba compiles one loop (:mod:`sketchsim.sketch.loop`) with the plan's
jitted functions bound in; pure-Python plans run in the checked Python engine
(:func:`sketchsim.sketch.contract.run_checked`), which computes the same
results.  Per input it returns a 128-bit fingerprint of the transcript (two
independent 64-bit hashes of the sketch entries, each keyed by its position),
the answers at the query positions, and, on request, the exact transcript.  A
symbol outside its declared alphabet stops the run with a
:class:`~sketchsim.errors.ProtocolError`.

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

from sketchsim.errors import ProtocolError, SketchsimError
from sketchsim.sketch import loop as engine_loop
from sketchsim.sketch.channels import CHANNEL_CODE, sketch_length
from sketchsim.sketch.contract import (
    brief,
    check_engine_size,
    checked_copy,
    run_checked,
    sample_indices,
)
from sketchsim.sketch.engine_cache import cached_loop
from sketchsim.sketch.protocol import Context, Plan

__all__ = ["RunResult", "Engine", "full_tokens", "loop_functions"]

_LOOPS: dict = {}


def _jitted_loop(emit, update, answer, init, cache: bool = False):
    """The compiled loop for these four functions, built once per process.

    ``init``: the plan's, or :func:`~sketchsim.sketch.loop.no_init`.  ``cache``: the
    functions are sketchsim's own (:attr:`Plan.builtin`): the small ones are inlined
    into the loop (:func:`~sketchsim.sketch.loop.inlined`) and the on-disk cache
    (:mod:`~sketchsim.sketch.engine_cache`) is tried first.  Plug-ins' functions
    (bounds-checked copies) are called.  A serial, GIL-free loop run on threads
    compiles in about a third of the time of a ``prange`` version and runs as fast.
    """
    key = funcs = (emit, update, answer, init)
    if key not in _LOOPS:
        loop = cached_loop(*funcs) if cache else None
        if loop is None:
            loop = engine_loop.compiled(funcs, inline=cache)
        _LOOPS[key] = loop
    return _LOOPS[key]


def loop_functions(plan: Plan) -> tuple:
    """``(emit, update, answer, init)`` that the engine loop of ``plan`` is compiled for.

    A plan without ``init`` gets :func:`~sketchsim.sketch.loop.no_init`.  Plug-ins'
    functions are these before the engine's bounds-checked copies.
    """
    init = engine_loop.no_init if plan.init is None else plan.init
    return (plan.emit, plan.update, plan.answer, init)


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
        starts = (n if plan.init is not None else 0) * plan.state_size  # the loop's copy
        check_engine_size(n * plan.state_size + starts + kmax + sum(lengths), name)
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
        self.runner = plan.runner
        self.jitted = (plan.jitted and not python) or self.runner is not None
        self.threads = numba.config.NUMBA_NUM_THREADS
        self._validated = self.runner is not None  # sketchsim's own, tested by its suite
        if self.jitted and self.runner is None:
            funcs = loop_functions(plan)
            if not plan.builtin:  # not ours: bounds-checked for the whole run
                funcs = tuple(f if f is engine_loop.no_init else checked_copy(f) for f in funcs)
            self._loop = _jitted_loop(*funcs, cache=plan.builtin)

    def run(
        self, tokens: np.ndarray, store: bool = False, fixed: np.ndarray | None = None
    ) -> RunResult:
        """Run the protocol on packed tokens (B, n_tokens, words).

        The first call checks the plug-in contract on a sample of ``tokens``.

        Parameters
        ----------
        tokens : numpy.ndarray, uint64
            (B, n_tokens, words); with ``fixed``, only the tokens after the fixed
            ones: (B, n_tokens - n_fixed, words).
        store : bool
            Keep the exact transcripts.
        fixed : numpy.ndarray, optional
            (n_fixed, words): the leading tokens every input shares (a family's
            :meth:`~sketchsim.sketch.family.Family.fixed_tokens`), not repeated per input.

        Raises
        ------
        ProtocolError
            One line naming the protocol when it breaks its contract or fails.
        """
        tokens = np.ascontiguousarray(tokens)
        fixed = self._fixed(tokens, fixed)
        if not self.jitted:
            full = full_tokens(fixed, tokens)
            fp, ans, tr = run_checked(self, full, store, python=self.python)
            if not self._validated:
                idx = sample_indices(full.shape[0])
                fp2, ans2, _ = run_checked(self, full[idx], False, python=self.python)
                self._same(idx, (fp[idx], ans[idx]), (fp2, ans2))
                self._validated = True
            return RunResult(fp, ans, tr)
        if not self._validated:
            self._validate(tokens, fixed)
        return self._run_jitted(tokens, store, fixed)

    def validate(self, tokens: np.ndarray, fixed: np.ndarray | None = None) -> None:
        """Check the plug-in contract on a sample of ``tokens`` unless done (see :meth:`run`).

        The plain-Python engine checks it on its first :meth:`run` instead.
        """
        if self.jitted and not self._validated:
            tokens = np.ascontiguousarray(tokens)
            self._validate(tokens, self._fixed(tokens, fixed))

    def run_into(self, tokens: np.ndarray, fixed: np.ndarray, store: bool, outputs) -> None:
        """Run a validated jitted engine on the calling thread, into preallocated outputs.

        ``outputs`` is :meth:`new_outputs` (at least ``B`` rows); ``tokens`` and
        ``fixed`` as in :meth:`run`.  For callers that run batches on their own
        threads (``measure``); the first batch must have gone through :meth:`run`.

        Raises
        ------
        ProtocolError
            As :meth:`run`.
        """
        B = tokens.shape[0]
        tr, fp, ans, err = outputs
        if self.runner is not None:
            got = self.runner(full_tokens(fixed, tokens), store)
            fp[:B], ans[:B] = got[0], got[1]
            if store:
                tr[:B, : self.total_len] = got[2]
            return
        args = self._args(tokens, fixed, store, outputs)
        self._call(0, B, args)
        self._check_errors(err[:B])

    def new_outputs(self, B: int, store: bool):
        """``(transcripts, fingerprints, answers, errors)`` buffers for ``B`` inputs."""
        return (
            np.zeros((B if store else 1, max(self.total_len, 1)), dtype=np.int64),
            np.zeros((B, 2), dtype=np.uint64),
            np.zeros((B, self.ctx.q), dtype=np.int64),
            np.zeros((B, 5), dtype=np.int64),
        )

    def _fixed(self, tokens: np.ndarray, fixed) -> np.ndarray:
        if fixed is None:
            return np.zeros((0, tokens.shape[2]), dtype=np.uint64)
        fixed = np.ascontiguousarray(fixed, dtype=np.uint64)
        if fixed.ndim != 2 or fixed.shape[1] != tokens.shape[2]:
            raise ValueError(f"fixed tokens of shape {fixed.shape} do not match {tokens.shape}")
        return fixed

    def _validate(self, tokens: np.ndarray, fixed: np.ndarray) -> None:
        """Guarded first pass on a sample, then the compiled engine twice: all must agree."""
        idx = sample_indices(tokens.shape[0])
        sample = tokens[idx]
        runs = []
        if not self.plan.builtin:
            full = full_tokens(fixed, sample)
            for _ in range(2):
                fp, ans, _ = run_checked(self, full, False)
                runs.append((fp, ans))
        for _ in range(2):
            res = self._run_jitted(sample, False, fixed)
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
                    f"batch gave a different {what} when run again (emit, update, answer and "
                    f"init must be functions of their arguments only)"
                )

    def _args(self, tokens, fixed, store, outputs) -> tuple:
        return (
            tokens,
            fixed,
            self.ctx.array(),
            self.plan.aux,
            self.layers,
            self.speak,
            self.sizes,
            self.queries,
            store,
            outputs,
        )

    def _call(self, lo: int, hi: int, args) -> None:
        """The compiled loop over inputs ``lo..hi-1``; compile and run errors as one line."""
        try:
            self._loop(lo, hi, *args)
        except (KeyboardInterrupt, SketchsimError):
            raise
        except Exception as exc:
            from numba.core.errors import NumbaError

            what = "cannot be compiled into the engine" if isinstance(exc, NumbaError) else "failed"
            raise ProtocolError(f"protocol {self.name} {what}: {brief(exc)}") from None

    def _check_errors(self, err: np.ndarray) -> None:
        if err[:, 0].any():
            b = int(np.argmax(err[:, 0]))
            lay, pos, v, c = (int(x) for x in err[b, 1:])
            raise ProtocolError(
                f"protocol {self.name}: layer {lay + 1}, token {pos + 1}, slot {c + 1} emitted "
                f"symbol {v} outside its declared alphabet 0..{self.layers[lay, 2] - 1}"
            )

    def _run_jitted(self, tokens: np.ndarray, store: bool, fixed: np.ndarray) -> RunResult:
        if self.runner is not None:
            return RunResult(*self._run_runner(full_tokens(fixed, tokens), store))
        B = tokens.shape[0]
        outputs = self.new_outputs(B, store)
        tr, fp, ans, err = outputs
        args = self._args(tokens, fixed, store, outputs)
        threads = min(self.threads, max(1, B // 64))
        bounds = np.linspace(0, B, threads + 1).astype(int)
        if threads == 1:
            self._call(0, B, args)
        else:
            with ThreadPoolExecutor(threads) as pool:
                jobs = [
                    pool.submit(self._call, int(lo), int(hi), args)
                    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)
                ]
                for job in jobs:
                    job.result()
        self._check_errors(err)
        return RunResult(fp, ans, tr[:, : self.total_len] if store else None)

    def _run_runner(self, full: np.ndarray, store: bool):
        """The plan's runner on threads over slices of the inputs (its jitted loop runs
        without the GIL), the slices' outputs joined in input order."""
        B = full.shape[0]
        threads = min(self.threads, max(1, B // 64))
        if threads == 1:
            return self.runner(full, store)
        bounds = np.linspace(0, B, threads + 1).astype(int)
        with ThreadPoolExecutor(threads) as pool:
            parts = list(pool.map(lambda lh: self.runner(full[lh[0] : lh[1]], store),
                                  zip(bounds[:-1], bounds[1:], strict=True)))  # fmt: skip
        fp = np.concatenate([p[0] for p in parts])
        ans = np.concatenate([p[1] for p in parts])
        tr = np.concatenate([p[2] for p in parts]) if store else None
        return fp, ans, tr


def full_tokens(fixed: np.ndarray, tokens: np.ndarray) -> np.ndarray:
    """The whole inputs (B, n_fixed + n, words) from shared ``fixed`` and per-input ``tokens``."""
    if fixed.shape[0] == 0:
        return tokens
    B = tokens.shape[0]
    out = np.empty((B, fixed.shape[0] + tokens.shape[1], tokens.shape[2]), dtype=np.uint64)
    out[:, : fixed.shape[0]] = fixed
    out[:, fixed.shape[0] :] = tokens
    return out
