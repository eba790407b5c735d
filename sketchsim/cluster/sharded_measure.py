"""``transcript`` on a Dask cluster: map, Dask's P2P shuffle by fingerprint range, reduce.

The single-process path (:func:`sketchsim.sketch.measure.measure`) holds every
input's 128-bit transcript fingerprint and sorts them all to group inputs by
transcript.  Here that array is never built in one place:

- **map** (one task per shard of input indices): run the protocol on the shard,
  exactly as :func:`~sketchsim.sketch.measure.measure` does chunk by chunk, and
  return a small *summary* (correct inputs, the first wrong input, per-entry
  value counts) and a *table*: the shard's ``(fingerprint, index)`` rows
  (sampled mode adds a 128-bit hash of each input's answer vector).
- **shuffle**: Dask's peer-to-peer shuffle moves the rows to ``P`` equal ranges
  of the fingerprint's top 32 bits (:mod:`sketchsim.cluster.shuffle`).
- **reduce** (one task per range): sort the range by fingerprint, count its
  groups, their sizes, and its first collision candidates (an input whose
  answers differ from those of the first input with the same fingerprint).

Shards and ranges are sized by memory (:func:`~sketchsim.cluster.layout.layout`: at most
``CLUSTER_TASK_BYTES`` per task, from measured bytes per input).  Every group
lies in one range, and the ranges come in fingerprint order, so concatenating
their groups gives the single process's groups in its order.  The client
merges only small results (sums, minima, histograms), so the report is the
single process's report: the transcript entropy is the single process's
formula (:func:`~sketchsim.sketch.grouping.entropy_from_size_histogram`, an
exactly rounded sum over the histogram of group sizes), applied to the group
sizes in fingerprint order up to ``CLUSTER_TRANSCRIPT_ORDERED_MAX`` inputs and
to the merged histogram above it: the same number either way.  The first
collision candidate is re-checked on exact transcripts, as in the single process.

Workers compile the protocol's engine once per process: the prepared family,
protocol and engine are kept in a module-level dict on the worker
(:mod:`sketchsim.cluster.tasks`), and the first task on each worker reports how long that
took.

The pieces: :mod:`~sketchsim.cluster.jobs` (what a task carries),
:mod:`~sketchsim.cluster.layout` (shards, ranges, estimates),
:mod:`~sketchsim.cluster.tasks` (map and reduce) and this driver.
"""

from __future__ import annotations

import operator
import time
from collections.abc import Callable

import numpy as np

from sketchsim import config
from sketchsim.cluster.jobs import TranscriptJob, make_job, shipped_source, worker_spec
from sketchsim.cluster.layout import (
    ClusterLayout,
    estimate,
    layout,
    plan_cluster_inputs,
    task_bytes,
)
from sketchsim.cluster.shuffle import row_bytes
from sketchsim.cluster.tasks import (
    CANDIDATES,
    prepare_job,
    reduce_partition,
    transcript_map,
    transcript_reduce,
)
from sketchsim.errors import SketchsimError
from sketchsim.futures import completed

__all__ = [
    "TranscriptJob",
    "ClusterLayout",
    "answers_range",
    "family_digest",
    "plan_cluster_inputs",
    "layout",
    "estimate",
    "transcript_map",
    "transcript_reduce",
    "reduce_partition",
    "prepare_job",
    "task_bytes",
    "shipped_source",
    "worker_spec",
    "measure_on_cluster",
    "CANDIDATES",
]


def answers_range(family, lo: int, hi: int) -> np.ndarray:
    """:meth:`sketchsim.sketch.family.Family.answers_range` (rows ``lo .. hi-1``)."""
    return family.answers_range(lo, hi)


def family_digest(family) -> str:
    """:meth:`sketchsim.sketch.family.Family.digest`: what workers compare with the client's."""
    return family.digest()


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
    """:func:`sketchsim.sketch.measure.measure` with the inputs sharded over a Dask cluster.

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
    from sketchsim.sketch.input_plan import answer_bytes, covers_family
    from sketchsim.sketch.measure import check_family
    from sketchsim.sketch.report import protocol_report

    if mode == "sampled" and (answers is None or answers.shape[0] != inputs):
        raise SketchsimError("sampled mode needs the answer vectors of every input")
    protocol, params = resolved.protocol, resolved.params
    check_family(protocol, family)
    ctx = family.context()
    plan = protocol.plan(ctx, params)
    shape = Engine(plan, ctx, protocol.name, python=True)  # layout only: nothing compiles
    start = time.perf_counter()
    cut = layout(inputs, workers, mode, answer_bytes(family))
    job = make_job(family, family_spec, spec, resolved, mode, inputs)
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

    tried = candidates[:CANDIDATES]
    collision = verified_collision(
        family, lambda: Engine(plan, ctx, protocol.name), tried, answers_of
    )
    # candidates whose exact transcripts all differ: decodability is not proved
    unresolved = collision is None and any(
        not np.array_equal(answers_of(i), answers_of(j)) for i, j in tried
    )
    report = protocol_report(
        protocol.name, params, resolved.source, family, plan, shape.layers, plan.jitted,
        counts=got.entries.counts(),
        exact=covers_family(family, B), distinct=distinct, entropy=ent,
        n_correct=got.n_correct, inputs=B, collision=collision,
        collision_unresolved=unresolved,
        first_failure=min(got.failures, key=lambda f: f["input"]) if got.failures else None,
        start=start,
    )  # fmt: skip
    return report, got.stats(cut, B * row_bytes(mode == "sampled"), ordered, start, gathered_at)


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
    fingerprint order; above, as the merged histogram of group sizes.  Either
    way the entropy is :func:`~sketchsim.sketch.grouping.entropy_from_size_histogram`,
    the single process's formula, exactly rounded: the same number.
    """
    from sketchsim.sketch.grouping import entropy_bits, entropy_from_size_histogram

    distinct = sum(r["distinct"] for r in ranges)
    if ordered:
        ent = entropy_bits(np.concatenate([r["sizes"] for r in ranges]))
    else:
        hist: dict[int, int] = {}
        for r in ranges:
            for c, k in zip(r["size_values"].tolist(), r["size_counts"].tolist(), strict=True):
                hist[c] = hist.get(c, 0) + k
        ent = entropy_from_size_histogram(list(hist), list(hist.values()))
    candidates = sorted((c for r in ranges for c in r["candidates"]), key=lambda p: p[1])
    return distinct, ent, candidates
