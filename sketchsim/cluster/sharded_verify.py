"""Commands split into cluster shards: module-level task functions and their merges.

Each task returns a small JSON-able summary, never raw data, and every merge
is order-independent (max, sum, min index), so a run on a cluster gives the
same result as the single-process path.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from sketchsim import config
from sketchsim.cluster.client import run_shards
from sketchsim.errors import SketchsimError

__all__ = [
    "verify_span",
    "verify_on_cluster",
    "estimate_verify_seconds",
    "measure_rate",
    "shard_inputs",
]


def verify_span(
    construction: str, m: int, n: int, beta: float, causal: bool, start: int, count: int
):
    """Check inputs ``start .. start+count-1``: max error, exact count, first wrong index (-1)."""
    from sketchsim.heads.exhaustive import check_range

    max_err, exact, first_bad = check_range(construction, m, n, beta, causal, start, count)
    return {"max_abs_error": float(max_err), "exact": int(exact), "first_bad": int(first_bad)}


def shard_inputs(total: int) -> int:
    """Inputs per task: about 16 tasks, each between ``CLUSTER_SHARD_INPUTS`` and 16 times that.

    The cut depends on the run alone (never on the cluster's size), so a run
    resumes on a cluster of any size; tasks of 2^24..2^28 inputs take 0.1-1.5 s
    per thread, long enough that Dask's per-task cost does not show.
    """
    low = config.CLUSTER_SHARD_INPUTS
    return min(total, max(low, min(16 * low, total >> 4)))


def estimate_verify_seconds(m: int, n: int, workers: int, rate: float | None = None) -> float:
    """Wall time of an enumeration of ``2^(m n)`` inputs on ``workers`` threads.

    ``rate`` is inputs/s per thread (:func:`measure_rate`); without it, the
    nominal ``VERIFY_RATE_PER_CORE`` at N = 3, scaled by N^2 (often off by 10x).
    """
    if rate is None:
        rate = config.VERIFY_RATE_PER_CORE * 9 / (n * n)
    return 2.0 ** (m * n) / (rate * max(workers, 1))


def measure_rate(
    construction: str, m: int, n: int, beta: float, causal: bool, inputs: int = 1 << 20
) -> float:
    """Inputs/s of the enumeration kernel on one thread of this machine, timed on a sample.

    Runs the kernel once on a few inputs (loading or compiling it), then times
    ``inputs`` of them with one numba thread, as a cluster worker runs it.
    """
    import numba

    from sketchsim.heads.exhaustive import check_range

    total = 1 << (m * n)
    count = min(total, inputs)
    threads = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        check_range(construction, m, n, beta, causal, 0, min(total, 64))
        t0 = time.perf_counter()
        check_range(construction, m, n, beta, causal, 0, count)
        seconds = time.perf_counter() - t0
    finally:
        numba.set_num_threads(threads)
    return count / max(seconds, 1e-9)


def verify_on_cluster(
    client,
    m: int,
    n: int,
    construction: str,
    beta: float,
    causal: bool,
    state_dir,
    progress: Callable[[int, int], None] | None = None,
):
    """:func:`sketchsim.heads.exhaustive.verify` with the index space sharded over a Dask cluster.

    ``client`` is a ``distributed.Client`` (see :func:`sketchsim.cluster.client.connect`).
    Returns the same :class:`~sketchsim.heads.exhaustive.VerifyResult` as the single-process
    path (only ``seconds`` differs).  Finished shards are kept in ``state_dir``.
    """
    from sketchsim.heads.attention import make_construction
    from sketchsim.heads.exhaustive import uses_count_vectors, verify, verify_result

    if uses_count_vectors(m, n):  # the count vectors: one process, well under a second
        return verify(m, n, construction, beta, causal, progress)

    if m * n > config.CLUSTER_VERIFY_MAX_BITS:
        raise SketchsimError(
            f"m*n = {m * n} exceeds the cluster limit {config.CLUSTER_VERIFY_MAX_BITS}"
        )
    try:
        head = make_construction(construction, m, beta)
    except ValueError as exc:
        raise SketchsimError(str(exc)) from None
    total = 1 << (m * n)
    span = shard_inputs(total)
    shards = [
        (construction, m, n, float(beta), causal, lo, min(span, total - lo))
        for lo in range(0, total, span)
    ]
    key = {
        "command": "verify",
        "m": m,
        "n": n,
        "construction": construction,
        "beta": float(beta),
        "causal": causal,
        "span": span,
    }
    t0 = time.perf_counter()
    parts = run_shards(client, verify_span, shards, state_dir=state_dir, key=key, progress=progress)
    bad = [p["first_bad"] for p in parts if p["first_bad"] >= 0]
    return verify_result(
        head,
        construction,
        m,
        n,
        beta,
        causal,
        max(p["max_abs_error"] for p in parts),
        sum(p["exact"] for p in parts),
        total,
        min(bad) if bad else -1,
        t0,
    )
