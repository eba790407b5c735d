"""How a cluster transcript is cut: input modes and limits, shards and fingerprint ranges
sized by memory, and the cost estimate shown before a run."""

from __future__ import annotations

from dataclasses import dataclass, field

from sketchsim import config
from sketchsim.cluster.shuffle import row_bytes

__all__ = [
    "ClusterLayout",
    "plan_cluster_inputs",
    "task_bytes",
    "layout",
    "estimate",
    "MAP_BYTES_PER_INPUT",
    "REDUCE_BYTES_PER_INPUT",
]


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


def plan_cluster_inputs(family, exhaustive: bool | None, samples: int) -> tuple[str, int]:
    """``(mode, inputs)`` for a cluster run, limits checked before anything is allocated.

    The inputs are those of a single-process run
    (:func:`sketchsim.sketch.input_plan.choose_inputs`), with exhaustive mode
    accepted up to ``CLUSTER_TRANSCRIPT_EXHAUSTIVE_MAX`` inputs.  Workers build
    the inputs of their shards; in sampled mode the client draws the answer
    vectors (as the single process does) and holds them, so they must fit the
    memory limit.

    Raises
    ------
    InputLimitError
    """
    from sketchsim.sketch.input_plan import answer_bytes, check_memory, choose_inputs

    mode, n = choose_inputs(
        family, exhaustive, samples, config.CLUSTER_TRANSCRIPT_EXHAUSTIVE_MAX, "the cluster limit"
    )
    if mode == "sampled":
        check_memory(family, mode, n, answer_bytes(family), " of answers on the client")
    return mode, n


#: Peak bytes per input of a map task besides its answer vectors (fingerprints,
#: correctness flags, the table it returns, the answer hashes and their
#: temporaries), and of a reduce task (its partition's table and the sort's
#: arrays), measured with tracemalloc (``benchmarks/bench_cluster_memory.py``; the
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
