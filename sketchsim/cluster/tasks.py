"""The worker side of a cluster transcript: map tasks run the engine on a shard, reduce
tasks group one fingerprint range (with the single process's grouping)."""

from __future__ import annotations

import os
import time

import numpy as np

from sketchsim.cluster.jobs import TranscriptJob, worker_spec
from sketchsim.errors import FamilyError, PluginError, SketchsimError
from sketchsim.sketch.fingerprint import answer_hashes
from sketchsim.sketch.grouping import sort_groups

__all__ = ["CANDIDATES", "prepare_job", "transcript_map", "reduce_partition", "transcript_reduce"]

#: Collision candidates kept per fingerprint range and verified at most (as the single process).
CANDIDATES = 8


#: Per worker process: ``TranscriptJob.cache_key()`` -> ``(family, engine)``, filled by
#: :func:`prepare_job`.  The engine compiles (or loads from numba's cache) once per
#: process and job, not once per task.
_PREPARED: dict = {}


def prepare_job(job: TranscriptJob):
    """``(family, engine, seconds)`` of a job: built on its first task in this process,
    then reused (``seconds`` is 0.0 then)."""
    key = job.cache_key()
    if key in _PREPARED:
        family, engine = _PREPARED[key]
        return family, engine, 0.0
    t0 = time.perf_counter()
    _settle_numba_threads()
    from sketchsim.sketch.engine import Engine
    from sketchsim.sketch.family_plugins import resolve_family
    from sketchsim.sketch.measure import check_family
    from sketchsim.sketch.plugins import resolve

    ftype, fparams, _ = resolve_family(worker_spec(job.family_spec, job.family_source))
    family = ftype.make(job.q, job.s, job.seed, fparams)
    if family.digest() != job.family_digest:
        raise FamilyError(
            f"family {job.family_spec} on worker {_worker_name()} builds other tokens than "
            "the client's: install the same version"
        )
    r = resolve(worker_spec(job.protocol_spec, job.protocol_source))
    if r.identity != job.identity:
        raise PluginError(
            f"protocol {job.protocol_spec} on worker {_worker_name()} differs from the "
            f"client's ({r.identity[:20]} != {job.identity[:20]}): install the same version"
        )
    check_family(r.protocol, family)
    ctx = family.context()
    plan = r.protocol.plan(ctx, r.params)
    engine = Engine(plan, ctx, r.protocol.name)
    engine.threads = 1  # Dask runs one task per worker thread: no nested threads
    # Compile (or load) the token builder and the engine loop now, through a second
    # engine on one input: both engines share the process's compiled loop, and the
    # contract check of ``engine`` still runs on its first real batch.
    first = family.answers_range(0, 1)
    Engine(plan, ctx, r.protocol.name).run(family.tokens(first), store=True)
    _PREPARED[key] = (family, engine)
    return family, engine, time.perf_counter() - t0


def _settle_numba_threads() -> None:
    """Make numba's thread count agree with the worker's environment, before it compiles.

    Dask sets the worker's environment (``NUMBA_NUM_THREADS=1``) after the worker
    process has imported the client's main module; when that module imports
    numba, numba read the count without it, and a parallel kernel loaded from
    cache may launch its threads with that count.  numba re-reads the
    environment at every compilation and refuses a count that differs from the
    launched one, so: re-read it now, or keep the launched count.
    """
    import numba

    try:
        numba.config.reload_config()
    except RuntimeError:  # threads already launched with the count read at import
        os.environ["NUMBA_NUM_THREADS"] = str(numba.config.NUMBA_NUM_THREADS)
        numba.config.reload_config()


def _worker_name() -> str:
    try:
        from distributed import get_worker

        return get_worker().address
    except (ImportError, ValueError):
        return f"pid {os.getpid()}"


def _run_range(family, engine, T: np.ndarray):
    """``(fingerprints, correct, entry counts, first failure)`` of the inputs ``T``.

    The single process's own loop (:func:`sketchsim.sketch.threaded_run.run_all`), so both
    paths run the same code and count the same entries.
    """
    from sketchsim.sketch.threaded_run import run_all

    fingerprints, correct, counts, first_failure = run_all(family, engine, T, None)
    return fingerprints, int(correct.sum()), counts, first_failure


def transcript_map(job: TranscriptJob, lo: int, hi: int, answers: np.ndarray | None = None):
    """Run the protocol on inputs ``lo .. hi-1``: ``(summary, table)``.

    ``answers`` are the inputs' answer vectors in sampled mode (None: exhaustive,
    rows of the enumeration).  The summary holds the correct count, the first
    wrong input (global index), the per-entry value counts, the worker's
    start-up seconds (nonzero on its first task only) and the task's peak
    traced memory; the table (:func:`sketchsim.cluster.shuffle.frame_of`)
    holds every input's fingerprint and global index, plus its answer hash in
    sampled mode, for the shuffle.
    """
    from sketchsim.cluster.shuffle import empty_frame, frame_of

    t0 = time.perf_counter()
    try:
        family, engine, setup = prepare_job(job)
        T = family.answers_range(lo, hi) if answers is None else answers
        fingerprints, n_correct, counts, first_failure = _run_range(family, engine, T)
    except SketchsimError as exc:
        # a plug-in's error is deterministic: returned (the client raises it), not
        # raised (Dask would retry it and log a traceback per worker)
        return {"error": exc}, empty_frame(job.mode == "sampled")
    if first_failure is not None:
        first_failure = {**first_failure, "input": lo + first_failure["input"]}
    hashes = answer_hashes(T) if job.mode == "sampled" else None
    table = frame_of(fingerprints, np.arange(lo, hi, dtype=np.int64), hashes)
    summary = {
        "inputs": hi - lo,
        "correct": n_correct,
        "first_failure": first_failure,
        "n_entries": counts.n_entries,
        "entry": counts.entry,
        "value": counts.value,
        "count": counts.count,
        "worker": _worker_name(),
        "setup_seconds": setup,
        "seconds": time.perf_counter() - t0,
    }
    return summary, table


def _smallest_uint(values: np.ndarray) -> np.ndarray:
    top = int(values.max()) if values.size else 0
    for dt in (np.uint8, np.uint16, np.uint32):
        if top <= np.iinfo(dt).max:
            return values.astype(dt)
    return values.astype(np.uint64)


def reduce_partition(frame, ordered: bool) -> dict:
    """:func:`transcript_reduce` of one shuffled partition (a pandas ``DataFrame``)."""
    from sketchsim.cluster.shuffle import arrays_of

    return transcript_reduce(ordered, *arrays_of(frame))


def transcript_reduce(
    ordered: bool,
    fp0: np.ndarray,
    fp1: np.ndarray,
    idx: np.ndarray,
    hashes: np.ndarray | None = None,
) -> dict:
    """Group one fingerprint range's inputs by fingerprint.

    Parameters
    ----------
    ordered : bool
        Return the group sizes in fingerprint order.
    fp0, fp1 : numpy.ndarray, uint64
        The two words of each input's fingerprint (rows in any order).
    idx : numpy.ndarray, int64
        Each input's global index.
    hashes : numpy.ndarray, shape (n, 2), optional
        Answer hashes (sampled mode: answers repeat).

    Returns
    -------
    dict
        The range's input and group counts, the histogram of group sizes, the
        group sizes in fingerprint order when ``ordered``, and up to
        :data:`CANDIDATES` collision candidates ``(first input of the group,
        input)`` with the smallest second index.
    """
    t0 = time.perf_counter()
    n = idx.shape[0]
    empty = {
        "inputs": 0,
        "distinct": 0,
        "size_values": np.zeros(0, np.int64),
        "size_counts": np.zeros(0, np.int64),
        "sizes": np.zeros(0, np.uint8) if ordered else None,
        "candidates": [],
        "seconds": 0.0,
    }
    if n == 0:
        return empty
    presorted = bool((fp0[1:] >= fp0[:-1]).all())  # the shuffle sorts each range by fp0
    f0 = fp0 if presorted else np.sort(fp0)
    if not (f0[1:] == f0[:-1]).any():  # every transcript once: no index sort
        return {
            **empty,
            "inputs": int(n),
            "distinct": int(n),
            "size_values": np.ones(1, np.int64),
            "size_counts": np.full(1, n, np.int64),
            "sizes": np.ones(n, np.uint8) if ordered else None,
            "seconds": time.perf_counter() - t0,
        }
    # groups in (fp0, fp1) order, the single process's (sketchsim.sketch.grouping)
    order, new = sort_groups(fp0, fp1, presorted)
    ids = idx if order is None else idx[order]
    starts = np.flatnonzero(new)
    sizes = np.diff(np.append(starts, n))
    first = np.minimum.reduceat(ids, starts)  # the first input of each group
    is_first = ids == np.repeat(first, sizes)
    if hashes is not None:  # sampled: answers repeat; compare with the first input's answers
        ah = hashes if order is None else hashes[order]
        differ = (ah != np.repeat(ah[is_first], sizes, axis=0)).any(axis=1)
    else:  # exhaustive: every input has its own answer vector
        differ = ~is_first
    cand = np.flatnonzero(differ)
    if cand.size > CANDIDATES:
        cand = cand[np.argpartition(ids[cand], CANDIDATES)[:CANDIDATES]]
    cand = cand[np.argsort(ids[cand])]
    group_of = np.cumsum(new) - 1
    hist = np.bincount(sizes)
    values = np.flatnonzero(hist)
    return {
        "inputs": int(n),
        "distinct": int(starts.size),
        "size_values": values.astype(np.int64),
        "size_counts": hist[values].astype(np.int64),
        "sizes": _smallest_uint(sizes) if ordered else None,
        "candidates": [(int(first[group_of[c]]), int(ids[c])) for c in cand],
        "seconds": time.perf_counter() - t0,
    }
