"""Waiting on Dask futures without hanging, and Dask failures as one line.

Used by every part that submits work to a cluster (:mod:`sketchsim.cluster`,
the cluster path of :mod:`sketchsim.experiments.sweep`); nothing here imports
Dask until called.
"""

from __future__ import annotations

from collections.abc import Iterator

from sketchsim.errors import SketchsimError

__all__ = ["WORKER_TIMEOUT_S", "completed", "dask_failure"]

#: Seconds a run waits for a worker (to join at the start, or to return after all
#: left) before it stops with one line (``--cluster-timeout``).
WORKER_TIMEOUT_S = 60.0


def dask_failure(exc: BaseException, spec=None) -> SketchsimError | None:
    """One line for a Dask failure (scheduler lost, workers killed, task cancelled), or None.

    Errors that are not Dask's (a bug, a full disk) are left alone (None).
    """
    from concurrent.futures import CancelledError

    from distributed import KilledWorker
    from distributed.comm import CommClosedError

    where = spec.describe() if spec is not None else "the cluster"
    keep = "finished work is kept: run the same command again (with --resume where it has one)"
    if isinstance(exc, KilledWorker):
        return SketchsimError(
            f"a task's workers died more often than the scheduler allows "
            f"(distributed.scheduler.allowed-failures); {keep}"
        )
    if isinstance(exc, CommClosedError | CancelledError | TimeoutError | ConnectionError):
        return SketchsimError(f"lost the Dask scheduler at {where} ({type(exc).__name__}); {keep}")
    return None


def completed(client, futures, timeout: float | None = None, raise_errors: bool = True) -> Iterator:
    """Yield ``futures`` as they finish, like ``distributed.as_completed``, without hanging.

    While no future finishes, the scheduler is polled: when the cluster has had
    no worker, or the client no connection to the scheduler, for ``timeout``
    seconds (default: the ``--cluster-timeout`` of :func:`connect`), or a task
    raised, the run stops with one line.  A task that
    raised a :class:`~sketchsim.errors.SketchsimError` re-raises it as is.
    With ``raise_errors=False`` failed futures are yielded too (the caller's
    ``fut.result()`` raises, and it words the error itself).
    """
    import time

    from distributed import wait

    timeout = getattr(client, "sketchsim_timeout", WORKER_TIMEOUT_S) if timeout is None else timeout
    pending = list(futures)
    alone_since = None
    while pending:
        try:
            done, rest = wait(pending, timeout=min(1.0, timeout), return_when="FIRST_COMPLETED")
        except TimeoutError:
            connected = getattr(client, "status", "running") == "running"
            if connected and client.scheduler_info().get("workers"):
                alone_since = None
            elif alone_since is None:
                alone_since = time.monotonic()
            elif time.monotonic() - alone_since > timeout and not connected:
                raise SketchsimError(
                    f"lost the Dask scheduler (no connection for {timeout:g} s); finished "
                    "work is kept: run the same command again (with --resume where it has one)"
                ) from None
            elif time.monotonic() - alone_since > timeout:
                raise SketchsimError(
                    f"every Dask worker left and none came back within {timeout:g} s "
                    "(a worker that cannot import what a task needs leaves silently: check "
                    "the workers' logs); finished work is kept: run the same command again",
                    param="cluster_timeout",
                ) from None
            continue
        for fut in done:
            if fut.status == "error" and raise_errors:
                err = fut.exception()
                if isinstance(err, SketchsimError) or dask_failure(err) is not None:
                    raise err
                raise SketchsimError(
                    f"a task failed on a worker: {type(err).__name__}: {err}"
                ) from None
            yield fut
        pending = list(rest)
