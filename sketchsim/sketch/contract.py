"""The plug-in contract, enforced (docs/protocols.md, "The contract").

- Symbols and answers are integers: a symbol in ``0..alphabet-1``, an answer in int64.
- ``emit``, ``update``, ``answer`` and the optional ``init`` are deterministic
  functions of their arguments.
- They write only ``out[:symbols]`` (emit) and ``state[:state_size]`` (init, update,
  answer); ``bits``, ``ctx``, ``aux``, the layer's ``sketch`` and emit's ``state``
  are read-only.

:func:`run_checked` is the plain-Python engine with every one of these checks at
the boundary; it runs pure-Python plug-ins, and the *guarded first pass* of jitted
ones on a small sample of inputs: there the plug-in's functions are recompiled with
numba's ``boundscheck=True`` (:func:`checked_copy`), read-only arguments are typed
read-only, and ``out`` is a float64 buffer so that a fractional symbol shows instead
of being truncated.  :func:`check_engine_size` refuses a plan whose per-input
buffers would not fit before anything is allocated.
"""

from __future__ import annotations

import numbers
import os

import numpy as np

from sketchsim.errors import PluginError, ProtocolError, SketchsimError
from sketchsim.estimates import byte_size
from sketchsim.sketch.fingerprint import SEED1, SEED2, fold_py

__all__ = [
    "SAMPLE_INPUTS",
    "MAX_ENGINE_BYTES",
    "MAX_ENGINE_BYTES_ENV",
    "check_engine_size",
    "checked_copy",
    "run_checked",
    "sample_indices",
    "brief",
]

#: Inputs re-run by the guarded first pass and by the determinism check.
SAMPLE_INPUTS = 4

#: Per-thread engine memory (state, symbols, sketch) a plan may ask for per input.
MAX_ENGINE_BYTES = 1 << 28
#: Environment variable that raises :data:`MAX_ENGINE_BYTES` (bytes).
MAX_ENGINE_BYTES_ENV = "SKETCHSIM_MAX_ENGINE_BYTES"

_INT64 = (-(1 << 63), (1 << 63) - 1)


def engine_bytes_limit() -> int:
    """:data:`MAX_ENGINE_BYTES`, or the value of ``$SKETCHSIM_MAX_ENGINE_BYTES``."""
    text = os.environ.get(MAX_ENGINE_BYTES_ENV, "")
    try:
        return int(float(text)) if text.strip() else MAX_ENGINE_BYTES
    except ValueError:
        raise SketchsimError(f"{MAX_ENGINE_BYTES_ENV}={text!r} is not a number of bytes") from None


def check_engine_size(entries: int, name: str = "", what: str = "its plan") -> None:
    """Refuse a plan needing more than the limit of int64 engine entries per input.

    Parameters
    ----------
    entries : int
        int64 entries the engine holds per input: ``n_tokens * state_size`` state,
        the largest ``symbols`` and the whole transcript.
    name : str
        Protocol name for the message (omitted: the caller adds it).
    what : str
        What needs the entries.

    Raises
    ------
    PluginError
        With the limit, the estimate and how to go past it.
    """
    need, limit = 8 * int(entries), engine_bytes_limit()
    if need > limit:
        prefix = f"protocol {name}: " if name else ""
        raise PluginError(
            f"{prefix}{what} needs {int(entries):,} int64 entries ({byte_size(need)}) per input "
            f"and engine thread, above the limit of {byte_size(limit)}; "
            f"set {MAX_ENGINE_BYTES_ENV}=<bytes> to go past it"
        )


def brief(exc: BaseException) -> str:
    """One line for an exception raised by (or while compiling) plug-in code."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    skip = ("Failed in ", "During:", "File ", "^", "- ", "Resolution failure", "This error")
    useful = [ln for ln in lines if not ln.startswith(skip)]
    text = (useful or lines or [""])[0]
    text = text.replace("\x1b[1m", "").replace("\x1b[0m", "")
    if len(text) > 200:
        text = text[:197] + "..."
    kind = type(exc).__name__
    return f"{kind}: {text}" if text else kind


def sample_indices(B: int, k: int = SAMPLE_INPUTS) -> np.ndarray:
    """Up to ``k`` inputs spread over ``0..B-1`` (first and last included)."""
    return np.unique(np.linspace(0, B - 1, min(B, k)).astype(np.int64)) if B else np.zeros(0, int)


_COPIES: dict = {}


def checked_copy(fn):
    """``fn`` (a numba dispatcher) recompiled with ``boundscheck=True``; cached per function."""
    if fn not in _COPIES:
        from numba import njit

        drop = ("cache", "boundscheck", "nopython", "inline")
        options = {k: v for k, v in fn.targetoptions.items() if k not in drop}
        _COPIES[fn] = njit(boundscheck=True, nogil=True, **options)(fn.py_func)
    return _COPIES[fn]


def _readonly(a: np.ndarray) -> np.ndarray:
    a = a.view()
    a.setflags(write=False)
    return a


def _is_integer(v) -> bool:
    return isinstance(v, numbers.Integral | np.integer)


def _is_dispatcher(fn) -> bool:
    return hasattr(fn, "py_func") and hasattr(fn, "targetoptions")


def run_checked(engine, tokens: np.ndarray, store: bool, python: bool = False):
    """Run ``engine``'s plan in plain Python with every contract check.

    Parameters
    ----------
    engine : sketchsim.sketch.engine.Engine
        Supplies the plan, the layer table, speakers and queries.
    tokens : numpy.ndarray (B, n_tokens, words) uint64
    store : bool
        Keep exact transcripts.
    python : bool
        Call every function as plain Python (``py_func`` of jitted ones): the reference
        engine.  Otherwise jitted functions run as bounds-checked copies (the guarded
        first pass) and a jitted emit writes a float64 ``out``; plain functions get an
        object ``out`` that keeps whatever they write.

    Returns
    -------
    (fingerprints, answers, transcripts) as in :class:`~sketchsim.sketch.engine.RunResult`.

    Raises
    ------
    ProtocolError
        One line: protocol, function, layer/token or query, and the bad value or error.
    """

    plan, name = engine.plan, engine.name
    funcs = list(plan.functions())
    if python:
        funcs = [getattr(f, "py_func", f) for f in funcs]
    else:
        funcs = [checked_copy(f) if _is_dispatcher(f) else f for f in funcs]
    emit, update, answer = funcs[:3]
    init = funcs[3] if len(funcs) > 3 else None
    B, N = tokens.shape[0], tokens.shape[1]
    layers = engine.layers
    ctx = _readonly(engine.ctx.array())
    aux = _readonly(plan.aux)
    fps = np.zeros((B, 2), dtype=np.uint64)
    answers = np.zeros((B, engine.queries.shape[0]), dtype=np.int64)
    transcripts = np.zeros((B if store else 1, max(engine.total_len, 1)), dtype=np.int64)
    out_dtype = [np.float64 if _is_dispatcher(emit) else object]
    for b in range(B):
        state = np.zeros((N, plan.state_size), dtype=np.int64)
        sk = np.zeros(max(engine.total_len, 1), dtype=np.int64)
        bits = [_readonly(tokens[b, pos]) for pos in range(N)]
        if init is not None:
            for pos in range(N):
                where = f"init at token {pos + 1}"
                _call(name, where, init, pos, bits[pos], ctx, state[pos], aux)
        h1, h2 = SEED1, SEED2
        for lay in range(layers.shape[0]):
            chan, k, a, levels, lo, hi = (int(x) for x in layers[lay])
            spoken = 0
            for pos in range(N):
                if not engine.speak[lay, pos]:
                    continue
                # emit reads its state: the engine emits layer 0 of the tokens shared
                # by every input once per batch, so an emit that wrote it would differ
                args = (lay, pos, bits[pos], ctx, _readonly(state[pos]), aux)
                out = _emit(name, emit, out_dtype, k, args)
                for c in range(k):
                    v = _symbol(name, out[c], lay, pos, c, a, strict=out.dtype == object)
                    if chan == 0:
                        sk[lo + c] += v
                    elif chan == 1:
                        sk[lo + c * a + v] += 1
                    else:
                        sk[lo + spoken * k + c] = v
                spoken += 1
            if chan == 0 and levels > 0:
                np.minimum(sk[lo:hi], levels - 1, out=sk[lo:hi])
            for e in range(lo, hi):
                h1, h2 = fold_py(h1, h2, e, sk[e])
            sketch = _readonly(sk[lo:hi].copy())
            for pos in range(N):
                where = f"update at layer {lay + 1}, token {pos + 1}"
                _call(name, where, update, lay, pos, bits[pos], ctx, state[pos], sketch, aux)
        fps[b] = (h1, h2)
        if store:
            transcripts[b] = sk
        for i, p in enumerate(engine.queries.tolist()):
            where = f"answer at query {p + 1}"
            v = _call(name, where, answer, p, bits[p], ctx, state[p], aux)
            if not _is_integer(v) or not _INT64[0] <= int(v) <= _INT64[1]:
                raise ProtocolError(
                    f"protocol {name}: {where} returned {v!r} ({type(v).__name__}); "
                    f"answers must be int64 integers"
                )
            answers[b, i] = int(v)
    return fps, answers, (transcripts[:, : engine.total_len] if store else None)


def _emit(name, emit, out_dtype, k, args):
    """Call emit with a fresh ``out`` of exactly ``k`` entries; float64 falls back to int64."""
    lay, pos = args[0], args[1]
    where = f"emit at layer {lay + 1}, token {pos + 1}"
    out = np.zeros(k, dtype=out_dtype[0])
    if out_dtype[0] is object:
        out[:] = 0
    try:
        _call(name, where, emit, *args, out)
    except _Retry:
        out_dtype[0] = np.int64  # a plug-in that cannot take float64 symbols: no fraction test
        out = np.zeros(k, dtype=np.int64)
        _call(name, where, emit, *args, out, retry=False)
    return out


class _Retry(Exception):
    pass


def _call(name, where, fn, *args, retry=True):
    """Call plug-in code; any failure becomes one ProtocolError line naming ``where``."""
    try:
        return fn(*args)
    except (KeyboardInterrupt, SketchsimError):
        raise
    except BaseException as exc:  # SystemExit and friends from plug-in code too
        from numba.core.errors import TypingError

        if isinstance(exc, TypingError):
            text = str(exc)
            if "readonly" in text or "read-only" in text:
                raise ProtocolError(
                    f"protocol {name}: {where.split(' ')[0]} writes into a read-only argument "
                    f"(bits, ctx, aux, the sketch and emit's state are read-only; emit writes "
                    f"out, init, update and answer write state)"
                ) from None
            if retry and where.startswith("emit") and "float64" in text:
                raise _Retry from None
            raise ProtocolError(
                f"protocol {name}: numba cannot compile {where.split(' ')[0]} for the engine's "
                f"arguments: {brief(exc)}"
            ) from None
        if isinstance(exc, IndexError):
            raise ProtocolError(
                f"protocol {name}: {where} indexed outside an array ({brief(exc)}); "
                f"it may write only out[:symbols] and state[:state_size]"
            ) from None
        raise ProtocolError(f"protocol {name}: {where} raised {brief(exc)}") from None


def _symbol(name, v, lay, pos, c, a, strict) -> int:
    """``out[c]`` as an int in ``0..a-1``.  ``strict``: any float is refused (pure Python);
    else ``out`` was a float64 buffer and only a fractional or non-finite value is."""
    where = f"protocol {name}: layer {lay + 1}, token {pos + 1}, slot {c + 1}"
    if isinstance(v, float | np.floating) and not strict:
        if not np.isfinite(v) or not float(v).is_integer():
            raise ProtocolError(f"{where} emitted {float(v)!r}: symbols must be integers")
        v = int(v)
    elif not _is_integer(v):
        raise ProtocolError(f"{where} emitted {v!r} ({type(v).__name__}): symbols must be integers")
    v = int(v)
    if not 0 <= v < a:
        raise ProtocolError(f"{where} emitted symbol {v} outside its declared alphabet 0..{a - 1}")
    return v
