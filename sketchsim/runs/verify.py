"""The exhaustive check of a construction as a library run, here or sharded over a cluster.

:func:`check` refuses a size before any work (the CLI calls it before its
progress bar), :func:`run` checks the construction and writes its own result
file (``json_path``: the file ``sketchsim verify --json`` writes, also when
the run is interrupted, marked incomplete).
"""

from __future__ import annotations

from collections.abc import Callable

from sketchsim.errors import SketchsimError
from sketchsim.runs.clusters import cluster_threads, open_cluster

__all__ = ["run", "check", "parameters", "state_folder", "DEFAULT_CONSTRUCTION"]

#: The construction ``verify`` checks by default (the CLI and the API read it here):
#: softmax, which THEORY section 3 shows correct at every length with a constant temperature.
DEFAULT_CONSTRUCTION = "softmax"


def check(m: int, n: int, cluster=None) -> None:
    """Refuse ``m`` and ``n`` before any work: the size limit of a run in this process.

    Parameters
    ----------
    m, n : int
        Token width and sequence length.
    cluster : None, str, ClusterSpec or distributed.Client
        With a cluster nothing is checked here: a run there checks its own
        limit once it knows whether count vectors decide it in this process.

    Raises
    ------
    SketchsimError
        ``m`` or ``n`` below 1, or ``2^(m n)`` inputs too many to enumerate.
    """
    from sketchsim.heads.exhaustive import check_verify_size

    if cluster is None:
        check_verify_size(m, n)


def parameters(m: int, n: int, construction: str, beta: float, causal: bool) -> dict:
    """The ``parameters`` of the result file."""
    return {"m": m, "n": n, "construction": construction, "beta": beta, "causal": causal}


def state_folder(state, json_path):
    """Where a cluster run keeps its finished shards: ``state``, else ``JSON.state``
    beside the result file, else nowhere (None)."""
    if state is None and json_path:
        return f"{json_path}.state"
    return state


def _write(json_path, params: dict, result):
    # json, platform and the version probes only when a file is written
    from sketchsim.results import result_payload, write_json_atomic

    return write_json_atomic(json_path, result_payload("verify", params, result.to_dict()))


def run(
    m: int,
    n: int = 3,
    construction: str = DEFAULT_CONSTRUCTION,
    beta: float = 2.0,
    causal: bool = False,
    progress: Callable[[int, int], None] | None = None,
    cluster=None,
    state=None,
    log: Callable[[str], None] | None = None,
    json_path=None,
):
    """Check a THEORY section 3 construction on all ``2^(m n)`` inputs.

    Parameters
    ----------
    m, n : int
        Token width and sequence length.
    construction : {"rank1", "softmax", "onehot"}
        Default :data:`DEFAULT_CONSTRUCTION`.
    beta : float
        Inverse temperature of softmax / onehot.
    causal : bool
        Score only the final position.
    progress : callable, optional
        ``progress(done, total)`` in inputs (in shards on a cluster).
    cluster : None, str, ClusterSpec or distributed.Client
        Shard the enumeration over a Dask cluster; not started when count
        vectors decide the run in this process (well under a second).
    state : path-like, optional
        With a cluster: keep finished shards here to resume a killed run
        (default :func:`state_folder`: beside ``json_path``).
    log : callable, optional
        Receives the cluster's plan, or why it is not started.
    json_path : path-like, optional
        Receives the result file (``sketchsim verify --json``); when the run
        is interrupted, the result over the finished inputs, marked incomplete.

    Returns
    -------
    sketchsim.heads.exhaustive.VerifyResult

    Raises
    ------
    sketchsim.heads.exhaustive.VerifyInterrupted
        On SIGINT in this process, after ``json_path`` was written.
    """
    from sketchsim.heads.exhaustive import VerifyInterrupted, uses_count_vectors
    from sketchsim.heads.exhaustive import verify as verify_here

    say = log or (lambda msg: None)
    if cluster is not None and m >= 1 and n >= 1 and uses_count_vectors(m, n):
        say(
            f"the 2^{m * n} inputs are checked through their column-type count vectors "
            "in this process, in well under a second: the cluster is not started"
        )
        cluster = None
    check(m, n, cluster)
    params = parameters(m, n, construction, beta, causal)
    try:
        if cluster is None:
            res = verify_here(m, n, construction, beta=beta, causal=causal, progress=progress)
        else:
            state = state_folder(state, json_path)
            res = _on_cluster(m, n, construction, beta, causal, progress, cluster, state, say)
    except VerifyInterrupted as stop:
        if json_path:  # keep what was finished, marked incomplete
            _write(json_path, params, stop.partial)
        raise
    if json_path:
        _write(json_path, params, res)
    return res


def _on_cluster(m, n, construction, beta, causal, progress, cluster, state, say):
    from sketchsim import config
    from sketchsim.cluster.sharded_verify import (
        estimate_verify_seconds,
        measure_rate,
        verify_on_cluster,
    )
    from sketchsim.estimates import duration_words

    if m * n > config.CLUSTER_VERIFY_MAX_BITS:
        raise SketchsimError(
            f"m*n = {m * n} exceeds the cluster limit {config.CLUSTER_VERIFY_MAX_BITS} "
            f"(2^{m * n} inputs)"
        )
    with open_cluster(cluster, log=say) as (client, spec):
        workers = cluster_threads(client, spec)
        rate = measure_rate(construction, m, n, beta, causal)
        secs = estimate_verify_seconds(m, n, workers, rate)
        say(
            f"2^{m * n} inputs on {workers} worker threads: {duration_words(secs)} "
            f"at {rate:,.3g} inputs/s per thread (timed here on 2^20 inputs; workers as fast "
            "as this machine's cores; the progress line measures the real rate)"
            + (f"; finished shards kept in {state}" if state else "")
        )
        return verify_on_cluster(client, m, n, construction, beta, causal, state, progress=progress)
