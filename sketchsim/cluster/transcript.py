"""``transcript`` on a Dask cluster: map, Dask's P2P shuffle by fingerprint range, reduce.

The single-process path (:func:`sketchsim.sketch.transcript.measure`) holds every
input's 128-bit transcript fingerprint and sorts them all to group inputs by
transcript.  Here that array is never built in one place:

- **map** (one task per shard of input indices): run the protocol on the shard,
  exactly as :func:`~sketchsim.sketch.transcript.measure` does chunk by chunk, and
  return a small *summary* (correct inputs, the first wrong input, per-entry
  value counts) and a *table*: the shard's ``(fingerprint, index)`` rows
  (sampled mode adds a 128-bit hash of each input's answer vector).
- **shuffle**: Dask's peer-to-peer shuffle moves the rows to ``P`` equal ranges
  of the fingerprint's top 32 bits (:mod:`sketchsim.cluster.shuffle`).
- **reduce** (one task per range): sort the range by fingerprint, count its
  groups, their sizes, and its first collision candidates (an input whose
  answers differ from those of the first input with the same fingerprint).

Shards and ranges are sized by memory (:func:`layout`: at most
``CLUSTER_TASK_BYTES`` per task, from measured bytes per input).  Every group
lies in one range, and the ranges come in fingerprint order, so concatenating
their groups gives the single process's groups in its order.  The client
merges only small results (sums, minima, histograms), so the report is the
single process's report: the transcript entropy is computed by the same sum
over the group sizes in fingerprint order up to
``CLUSTER_TRANSCRIPT_ORDERED_MAX`` inputs, and from the merged histogram of
group sizes above it.  The first collision candidate is re-checked on exact
transcripts, as in the single process.

Workers compile the protocol's engine once per process: the prepared family,
protocol and engine are kept in a module-level dict on the worker
(:data:`_PREPARED`), and the first task on each worker reports how long that
took.
"""

from __future__ import annotations

import hashlib
import math
import operator
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from sketchsim import config
from sketchsim.cluster.shuffle import row_bytes
from sketchsim.errors import FamilyError, PluginError, SketchsimError
from sketchsim.futures import completed
from sketchsim.sketch.fingerprint import answer_hashes
from sketchsim.sketch.grouping import sort_groups

__all__ = [
    "TranscriptJob",
    "ClusterLayout",
    "answers_range",
    "plan_cluster_inputs",
    "layout",
    "transcript_map",
    "transcript_reduce",
    "reduce_partition",
    "prepare_job",
    "task_bytes",
    "measure_on_cluster",
]

#: Collision candidates kept per fingerprint range and verified at most (as the single process).
CANDIDATES = 8


@dataclass(frozen=True)
class TranscriptJob:
    """What a worker needs to rebuild the family, the protocol and its engine.

    Specs are passed as text and resolved on the worker.  A plug-in given as a
    file travels with the job (``family_source``, ``protocol_source``: its file
    name and bytes): the worker writes it under its own temporary folder, keyed
    by the content's hash, and never opens the client's path, so the run works
    on machines that do not share the client's files.  ``identity`` is the
    client's protocol source identity, checked there, so a worker never measures
    another version of a plug-in.  A file plug-in must be self-contained (install
    a plug-in that imports sibling files as a package on the workers).
    """

    family_spec: str
    q: int
    s: int
    seed: int
    protocol_spec: str
    identity: str
    family_digest: str
    mode: str
    inputs: int
    family_source: tuple | None = None
    protocol_source: tuple | None = None

    def cache_key(self) -> tuple:
        return (
            self.family_spec,
            self.q,
            self.s,
            self.seed,
            self.protocol_spec,
            self.identity,
            self.family_digest,
        )


@dataclass(frozen=True)
class ClusterLayout:
    """How one protocol's run is cut: ``shards`` (lo, hi) ranges and ``partitions`` reducers.

    ``map_bytes`` and ``reduce_bytes`` are the planned peak memory of one map
    and one reduce task (:func:`task_bytes`).
    """

    shards: list = field(repr=False)
    partitions: int
    shard_inputs: int
    map_bytes: int = 0
    reduce_bytes: int = 0

    @property
    def map_tasks(self) -> int:
        return len(self.shards)


def shipped_source(spec: str) -> tuple | None:
    """``(file name, bytes)`` of a ``path/file.py:NAME`` spec's file, or None for other specs."""
    head = spec.partition(":")[0].strip()
    if not head.endswith(".py"):
        return None
    path = Path(head)
    try:
        return path.name, path.read_bytes()
    except OSError as exc:
        raise PluginError(f"cannot read plug-in file {head}: {exc.strerror or exc}") from None


def worker_spec(spec: str, source: tuple | None) -> str:
    """``spec`` with its file head replaced by a worker-local copy of ``source``.

    The copy lives in ``<tmp>/sketchsim-plugins/<sha256 prefix>/<name>``, written
    once per content (atomically), so equal content is shared and a changed file
    never reuses an old copy.
    """
    if source is None:
        return spec
    import tempfile

    from sketchsim.results import atomic_path

    name, content = source
    _, sep, rest = spec.partition(":")
    digest = hashlib.sha256(content).hexdigest()[:32]
    path = Path(tempfile.gettempdir()) / "sketchsim-plugins" / digest / name
    if not path.exists() or path.read_bytes() != content:
        with atomic_path(path, suffix=".py") as tmp:
            tmp.write_bytes(content)
    return str(path) + sep + rest


def answers_range(family, lo: int, hi: int) -> np.ndarray:
    """:meth:`sketchsim.sketch.family.Family.answers_range` (rows ``lo .. hi-1``)."""
    return family.answers_range(lo, hi)


def family_digest(family) -> str:
    """:meth:`sketchsim.sketch.family.Family.digest`: what workers compare with the client's."""
    return family.digest()


def plan_cluster_inputs(family, exhaustive: bool | None, samples: int) -> tuple[str, int]:
    """``(mode, inputs)`` for a cluster run, limits checked before anything is allocated.

    The mode is chosen as in :func:`sketchsim.sketch.transcript.plan_inputs` (so a run
    with and without a cluster measures the same inputs); exhaustive mode is
    accepted up to ``CLUSTER_TRANSCRIPT_EXHAUSTIVE_MAX`` inputs.  In sampled
    mode the client draws the answer vectors (as the single process does) and
    holds them, so they must fit the memory limit.

    Raises
    ------
    InputLimitError
    """
    from sketchsim.sketch.transcript import InputLimitError, exhaustive_mode, max_bytes

    limit_n = config.CLUSTER_TRANSCRIPT_EXHAUSTIVE_MAX
    if exhaustive_mode(family, exhaustive, limit_n, "the cluster limit"):
        return "exhaustive", int(family.size)
    if samples < 1:
        raise SketchsimError(f"the number of samples must be >= 1, got {samples}")
    per = family.q * np.dtype(family.answer_dtype).itemsize
    need, limit = float(samples) * per, max_bytes()
    if need > limit:
        raise InputLimitError(
            f"{samples:,} sampled inputs of {family.describe()} need about "
            f"{need / 2**30:.3g} GiB of answers on the client ({per} bytes each), above the "
            f"memory limit {limit / 2**30:.3g} GiB",
            "memory",
            need,
            limit,
        )
    return "sampled", int(samples)


#: Peak bytes per input of a map task besides its answer vectors (fingerprints,
#: correctness flags, the table it returns, the answer hashes and their
#: temporaries), and of a reduce task (its partition's table and the sort's
#: arrays), measured with tracemalloc (``benchmarks/cluster_memory.py``; the
#: measured figures are in docs/cluster.md).  Rounded up: they size the tasks.
MAP_BYTES_PER_INPUT = {"exhaustive": 40, "sampled": 80}
REDUCE_BYTES_PER_INPUT = {"exhaustive": 112, "sampled": 160}


def task_bytes(inputs: int, mode: str, answer_bytes: int, role: str) -> int:
    """Planned peak memory of a map or reduce task over ``inputs`` inputs.

    Parameters
    ----------
    inputs : int
    mode : {"exhaustive", "sampled"}
    answer_bytes : int
        Bytes of one input's answer vector (``q`` times the answer dtype's size).
    role : {"map", "reduce"}
    """
    if role == "map":
        return inputs * (answer_bytes + MAP_BYTES_PER_INPUT[mode])
    return inputs * REDUCE_BYTES_PER_INPUT[mode]


def layout(
    inputs: int, workers: int, mode: str = "exhaustive", answer_bytes: int = 1
) -> ClusterLayout:
    """Cut a run into map shards and reduce partitions sized by memory.

    A map task holds at most ``CLUSTER_TASK_BYTES`` (:func:`task_bytes`), and
    there are at least 4 per worker thread; the partitions number at least one
    per worker thread and hold at most ``CLUSTER_TASK_BYTES`` each on average
    (fingerprints are uniform, so ranges of equal width hold nearly equal counts).
    """
    workers = max(1, workers)
    budget = config.CLUSTER_TASK_BYTES
    per_map = answer_bytes + MAP_BYTES_PER_INPUT[mode]
    span = max(1, min(budget // per_map, -(-inputs // (4 * workers))))
    shards = [(lo, min(inputs, lo + span)) for lo in range(0, inputs, span)]
    per_reduce = REDUCE_BYTES_PER_INPUT[mode]
    partitions = max(workers, -(-inputs * per_reduce // budget))
    return ClusterLayout(
        shards,
        partitions,
        span,
        map_bytes=task_bytes(span, mode, answer_bytes, "map"),
        reduce_bytes=task_bytes(-(-inputs // partitions), mode, answer_bytes, "reduce"),
    )


# ---------------------------------------------------------------------------
# Worker side
# ---------------------------------------------------------------------------

#: Per worker process: job key -> (family, protocol, plan, engine).  The engine
#: compiles (or loads from numba's cache) once per process, not once per task.
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
    from sketchsim.sketch.plugins import resolve
    from sketchsim.sketch.transcript import check_family

    ftype, fparams, _ = resolve_family(worker_spec(job.family_spec, job.family_source))
    family = ftype.make(job.q, job.s, job.seed, fparams)
    if family_digest(family) != job.family_digest:
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
    first = answers_range(family, 0, 1)
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

    The single process's own loop (:func:`sketchsim.sketch.transcript.run_all`), so both
    paths run the same code and count the same entries.
    """
    from sketchsim.sketch.transcript import run_all

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
        T = answers_range(family, lo, hi) if answers is None else answers
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


# ---------------------------------------------------------------------------
# Client side
# ---------------------------------------------------------------------------


def _entropy_from_histogram(values, counts, total: int, distinct: int) -> float:
    """``log2 N - (1/N) sum_groups c log2 c``, summed exactly over the size histogram."""
    if total == 0:
        return 0.0
    s = math.fsum(float(k) * c * math.log2(c) for c, k in zip(values, counts, strict=True) if c)
    h = math.log2(total) - s / total
    return max(0.0, min(h, math.log2(distinct) if distinct else 0.0))


def _wrap_failure(exc: BaseException) -> SketchsimError:
    if isinstance(exc, SketchsimError):
        return exc
    return SketchsimError(f"cluster task failed: {type(exc).__name__}: {exc}")


def measure_on_cluster(
    client,
    family,
    family_spec: str,
    spec: str,
    resolved,
    mode: str,
    inputs: int,
    answers: np.ndarray | None = None,
    workers: int = 1,
    progress: Callable[[int, int], None] | None = None,
    retries: int = 2,
):
    """:func:`sketchsim.sketch.transcript.measure` with the inputs sharded over a Dask cluster.

    Parameters
    ----------
    client : distributed.Client
    family : Family
        The client's family (built from ``family_spec``; workers rebuild it).
    family_spec, spec : str
        The ``--family`` and ``--protocol`` specs.
    resolved : sketchsim.sketch.plugins.Resolved
        ``spec`` resolved on the client.
    mode : {"exhaustive", "sampled"}
    inputs : int
        Number of inputs (``(s+1)^q`` when exhaustive).
    answers : numpy.ndarray, optional
        Sampled mode: the answer vectors, shape (inputs, q).
    workers : int
        Worker threads (sizes the shards and fingerprint ranges).
    progress : callable, optional
        ``progress(done, total)`` in tasks (map, then reduce).
    retries : int
        Dask retries a failed task this many times (a dead worker's tasks are
        rescheduled by Dask in any case).

    Returns
    -------
    (ProtocolReport, dict)
        The report, identical to the single process's (``seconds`` aside), and
        cluster statistics (tasks, partitions, bytes shuffled, worker start-up).
    """
    from sketchsim.sketch.engine import Engine
    from sketchsim.sketch.grouping import verified_collision
    from sketchsim.sketch.transcript import check_family, protocol_report

    if mode == "sampled" and (answers is None or answers.shape[0] != inputs):
        raise SketchsimError("sampled mode needs the answer vectors of every input")
    protocol, params = resolved.protocol, resolved.params
    check_family(protocol, family)
    ctx = family.context()
    plan = protocol.plan(ctx, params)
    shape = Engine(plan, ctx, protocol.name, python=True)  # layout only: nothing compiles
    start = time.perf_counter()
    answer_bytes = family.q * np.dtype(family.answer_dtype).itemsize
    cut = layout(inputs, workers, mode, answer_bytes)
    job = _job(family, family_spec, spec, resolved, mode, inputs)
    ordered = inputs <= config.CLUSTER_TRANSCRIPT_ORDERED_MAX
    total_tasks = cut.map_tasks + cut.partitions
    if progress is not None:
        progress(0, total_tasks)
    got = _Gathered(cut.partitions, start, shape.total_len)
    futures = []
    try:
        summaries, reduces = _submit(client, job, cut, answers, ordered, retries)
        futures = summaries + reduces
        got.collect(client, summaries, reduces, progress, total_tasks)
    except (KeyboardInterrupt, SketchsimError):
        client.cancel(futures)
        raise
    except Exception as exc:
        client.cancel(futures)
        raise _wrap_failure(exc) from None
    del futures, summaries, reduces
    gathered_at = time.perf_counter()
    B = inputs
    distinct, ent, candidates = _groups(got.ranges, ordered, B)

    def answers_of(i: int) -> np.ndarray:
        return answers[i] if answers is not None else answers_range(family, i, i + 1)[0]

    collision = verified_collision(
        family, lambda: Engine(plan, ctx, protocol.name), candidates[:CANDIDATES], answers_of
    )
    report = protocol_report(
        protocol.name, params, resolved.source, family, plan, shape.layers, plan.jitted,
        counts=got.entries.counts(),
        exact=family.log2_size <= 62 and B == family.size, distinct=distinct, entropy=ent,
        n_correct=got.n_correct, inputs=B, collision=collision,
        first_failure=min(got.failures, key=lambda f: f["input"]) if got.failures else None,
        start=start,
    )  # fmt: skip
    return report, got.stats(cut, B * row_bytes(mode == "sampled"), ordered, start, gathered_at)


def _job(family, family_spec: str, spec: str, resolved, mode: str, inputs: int) -> TranscriptJob:
    """What every map task of one protocol's run carries (plug-in files by content)."""
    return TranscriptJob(
        family_spec,
        family.q,
        family.s,
        family.seed,
        spec,
        resolved.identity,
        family_digest(family),
        mode,
        inputs,
        family_source=shipped_source(family_spec),
        protocol_source=shipped_source(spec),
    )


def _submit(client, job: TranscriptJob, cut: ClusterLayout, answers, ordered: bool, retries: int):
    """Submit the map tasks, the shuffle and one reduce task per fingerprint range.

    Returns ``(summaries, reduces)`` futures.  Each map task's output is cut
    into its summary and its table; the tables go through Dask's P2P shuffle
    (:func:`sketchsim.cluster.shuffle.range_partitions`), so a reduce task
    receives exactly its range's rows of every map task.
    """
    import dask

    from sketchsim.cluster.shuffle import range_partitions

    maps = [
        client.submit(
            transcript_map,
            job,
            lo,
            hi,
            None if answers is None else answers[lo:hi],
            pure=False,
            retries=retries,
        )
        for lo, hi in cut.shards
    ]
    summaries = [client.submit(operator.getitem, m, 0, pure=False) for m in maps]
    tables = [client.submit(operator.getitem, m, 1, pure=False) for m in maps]
    del maps  # released once cut into summary and table
    ranges = range_partitions(tables, cut.partitions, job.mode == "sampled")
    work = [dask.delayed(reduce_partition, pure=False)(r, ordered) for r in ranges]
    reduces = client.compute(work, retries=retries)
    return summaries, reduces


class _Gathered:
    """What the client keeps of a sharded run: merged entry counts, correct inputs,
    failures, per-worker start-up, task seconds, and each range's reduce output."""

    def __init__(self, n_ranges: int, start: float, n_entries: int):
        from sketchsim.sketch.entry_counts import CountMerge

        self.entries = CountMerge(n_entries)
        self.n_correct, self.failures, self.startup = 0, [], {}
        self.map_seconds = self.reduce_seconds = 0.0
        self.maps_done_at = start
        self.ranges: list = [None] * n_ranges

    def add_map(self, value: dict) -> None:
        if "error" in value:
            raise value["error"]
        self.entries.add_triples(value["entry"], value["value"], value["count"], value["inputs"])
        self.n_correct += value["correct"]
        self.map_seconds += value["seconds"]
        self.maps_done_at = time.perf_counter()
        if value["first_failure"] is not None:
            self.failures.append(value["first_failure"])
        if value["setup_seconds"] > 0:
            worker = value["worker"]
            self.startup[worker] = max(self.startup.get(worker, 0.0), value["setup_seconds"])

    def stats(self, cut: ClusterLayout, shuffled: int, ordered: bool, start, gathered_at) -> dict:
        """The run's cluster statistics (the JSON's per-protocol ``cluster``)."""
        return {
            "map_tasks": cut.map_tasks,
            "shard_inputs": cut.shard_inputs,
            "partitions": cut.partitions,
            "planned_map_task_bytes": cut.map_bytes,
            "planned_reduce_task_bytes": cut.reduce_bytes,
            "shuffle_bytes": shuffled,
            "entropy_from": "ordered group sizes" if ordered else "group-size histogram",
            "map_task_seconds": self.map_seconds,
            "reduce_task_seconds": self.reduce_seconds,
            "maps_done_after_seconds": self.maps_done_at - start,
            "reduces_done_after_seconds": gathered_at - start,
            "client_merge_seconds": time.perf_counter() - gathered_at,
            "worker_startup_seconds": {w: round(t, 4) for w, t in sorted(self.startup.items())},
        }

    def collect(self, client, summaries, reduces, progress, total_tasks: int) -> None:
        """Take every task's output as it finishes, releasing it at once."""
        is_map = {f.key for f in summaries}
        range_of = {f.key: b for b, f in enumerate(reduces)}
        done = 0
        for fut in completed(client, summaries + reduces):
            value = fut.result()
            if fut.key in is_map:
                self.add_map(value)
            else:
                self.ranges[range_of[fut.key]] = value
                self.reduce_seconds += value["seconds"]
            fut.release()
            done += 1
            if progress is not None:
                progress(done, total_tasks)


def _groups(ranges: list, ordered: bool, B: int):
    """``(distinct transcripts, transcript entropy, collision candidates)`` of the ranges.

    Up to ``CLUSTER_TRANSCRIPT_ORDERED_MAX`` inputs the group sizes come in
    fingerprint order and the entropy is the single process's very sum; above,
    from the merged histogram of group sizes (equal up to rounding).
    """
    from sketchsim.sketch.grouping import entropy_bits

    distinct = sum(r["distinct"] for r in ranges)
    if ordered:
        ent = entropy_bits(np.concatenate([r["sizes"] for r in ranges]))
    else:
        hist: dict[int, int] = {}
        for r in ranges:
            for c, k in zip(r["size_values"].tolist(), r["size_counts"].tolist(), strict=True):
                hist[c] = hist.get(c, 0) + k
        ent = _entropy_from_histogram(list(hist), list(hist.values()), B, distinct)
    candidates = sorted((c for r in ranges for c in r["candidates"]), key=lambda p: p[1])
    return distinct, ent, candidates


def estimate(inputs: int, protocols: int, workers: int, mode: str, answer_bytes: int) -> dict:
    """Rough wall time, bytes shuffled and planned task memory of a cluster transcript run."""
    cut = layout(inputs, workers, mode, answer_bytes)
    return {
        "seconds": inputs * protocols / (config.TRANSCRIPT_RATE_PER_CORE * max(workers, 1)),
        "shuffle_bytes": inputs * row_bytes(mode == "sampled"),
        "map_tasks": cut.map_tasks,
        "partitions": cut.partitions,
        "map_bytes": cut.map_bytes,
        "reduce_bytes": cut.reduce_bytes,
    }
