"""Measured memory of a cluster ``transcript`` task, the basis of its sizing.

:func:`sketchsim.cluster.layout.layout` sizes map shards and fingerprint
ranges from bytes per input (``MAP_BYTES_PER_INPUT``,
``REDUCE_BYTES_PER_INPUT``).  This module measures those figures: it runs one
map task and one reduce task in this process under :mod:`tracemalloc` (NumPy
and pandas report their buffers to it) and returns the peak bytes per input.
``benchmarks/bench_cluster_memory.py`` prints them; the tests check that the sizing
constants stay above what the tasks really hold.
"""

from __future__ import annotations

import tracemalloc

import numpy as np

__all__ = ["measure_task_memory"]


def _traced_peak(fn, *args):
    """``(result, peak bytes allocated while fn ran)``."""
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        out = fn(*args)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    return out, peak


def measure_task_memory(
    q: int, s: int, mode: str, inputs: int, spec: str = "clipped-counts", seed: int = 0
) -> dict:
    """Peak memory per input of a map and a reduce task on ``F(q, s)``.

    The map task's figure counts its answer vectors (built on the worker when
    exhaustive, received with the task when sampled); the reduce task's counts
    the shuffled partition it receives (all ``inputs`` rows in one range).

    Parameters
    ----------
    q, s : int
        The hard family ``F(q, s)`` (seeded with ``seed``).
    mode : {"exhaustive", "sampled"}
    inputs : int
        Inputs of the measured task (exhaustive: the first ``inputs`` of the
        enumeration; sampled: ``inputs`` seeded samples).
    spec : str
        Protocol; one that groups inputs (a collision) takes the reduce's
        longest path.

    Returns
    -------
    dict
        ``map_bytes_per_input``, ``answer_bytes_per_input``,
        ``reduce_bytes_per_input`` and ``table_bytes_per_input`` (the rows
        shuffled), ``first_task_bytes`` (a worker's first task's peak on 64
        inputs: what it allocates once and later tasks reuse), plus the parameters.
    """
    from sketchsim.cluster.jobs import TranscriptJob
    from sketchsim.cluster.tasks import prepare_job, reduce_partition, transcript_map
    from sketchsim.sketch.family import HardFamily
    from sketchsim.sketch.plugins import resolve

    family = HardFamily(q, s, seed=seed)
    r = resolve(spec)
    job = TranscriptJob("hard", q, s, seed, spec, r.identity, family.digest(), mode, inputs)
    prepare_job(job)  # compile before measuring: the engine is built once per worker
    answers = family.sample_answers(inputs) if mode == "sampled" else None
    # a worker's first task also allocates what later tasks reuse: not per task
    (_, warm), once = _traced_peak(
        transcript_map, job, 0, min(inputs, 64), None if answers is None else answers[:64]
    )
    del warm
    held = 0 if answers is None else answers.nbytes
    (summary, table), map_peak = _traced_peak(transcript_map, job, 0, inputs, answers)
    if "error" in summary:
        raise summary["error"]
    # the shuffle delivers the key as the index, sorted: left unsorted here, the
    # reduce takes its longest path (it sorts), so the figure is an upper bound
    frame = table.set_index("key")
    del table
    rows = int(frame.memory_usage(index=True, deep=True).sum())
    _, reduce_peak = _traced_peak(reduce_partition, frame, True)
    answer_bytes = q * np.dtype(family.answer_dtype).itemsize
    return {
        "q": q,
        "s": s,
        "mode": mode,
        "inputs": inputs,
        "protocol": spec,
        "answer_bytes_per_input": answer_bytes,
        "map_bytes_per_input": (map_peak + held) / inputs,
        "table_bytes_per_input": rows / inputs,
        "reduce_bytes_per_input": (reduce_peak + rows) / inputs,
        "first_task_bytes": once,
    }
