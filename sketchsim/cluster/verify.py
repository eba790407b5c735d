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

__all__ = ["verify_span", "verify_on_cluster", "estimate_verify_seconds"]


def verify_span(
    construction: str, m: int, n: int, beta: float, causal: bool, start: int, count: int
):
    """Check inputs ``start .. start+count-1``: max error, exact count, first wrong index (-1)."""
    from sketchsim.heads.verify import check_range

    max_err, exact, first_bad = check_range(construction, m, n, beta, causal, start, count)
    return {"max_abs_error": float(max_err), "exact": int(exact), "first_bad": int(first_bad)}


def estimate_verify_seconds(m: int, n: int, workers: int) -> float:
    """Rough wall time of an enumeration of ``2^(m n)`` inputs on ``workers`` cores."""
    return 2.0 ** (m * n) * n * n / (config.VERIFY_RATE_PER_CORE * max(workers, 1))


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
    """:func:`sketchsim.heads.verify.verify` with the index space sharded over a Dask cluster.

    ``client`` is a ``distributed.Client`` (see :func:`sketchsim.cluster.client.connect`).
    Returns the same :class:`~sketchsim.heads.verify.VerifyResult` as the single-process
    path (only ``seconds`` differs).  Finished shards are kept in ``state_dir``.
    """
    from sketchsim.heads.attention import make_construction
    from sketchsim.heads.verify import VerifyResult, describe_counterexample

    if m * n > config.CLUSTER_VERIFY_MAX_BITS:
        raise SketchsimError(
            f"m*n = {m * n} exceeds the cluster limit {config.CLUSTER_VERIFY_MAX_BITS}"
        )
    try:
        head = make_construction(construction, m, beta)
    except ValueError as exc:
        raise SketchsimError(str(exc)) from None
    total = 1 << (m * n)
    span = min(total, config.CLUSTER_SHARD_INPUTS)
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
    exact = sum(p["exact"] for p in parts)
    return VerifyResult(
        m=m,
        n=n,
        construction=construction,
        beta=None if construction == "rank1" else float(beta),
        rank=head.rank,
        causal=causal,
        inputs=total,
        max_abs_error=max(p["max_abs_error"] for p in parts),
        exact_fraction=exact / total,
        counterexample=describe_counterexample(head, min(bad), m, n, causal) if bad else None,
        seconds=time.perf_counter() - t0,
    )
