"""The ``cluster=`` argument of every run: None, ``local:N``, ``tcp://...``, a spec, a Client."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from sketchsim.errors import SketchsimError

__all__ = ["open_cluster", "training_client", "cluster_threads", "describe"]

#: What a ``cluster=`` value must have to be used as a ``distributed.Client``.
CLIENT_METHODS = ("submit", "scheduler_info")


@contextmanager
def open_cluster(
    cluster, log: Callable[[str], None] | None = None, need_torch: bool = False
) -> Iterator:
    """Yield ``(client, spec)`` for a run's ``cluster=`` value, or ``(None, None)``.

    A ``distributed.Client`` passed in is used as it is and left open; a
    ``ClusterSpec`` or its text form (``local:N``, ``tcp://HOST:PORT``) is
    connected with :func:`sketchsim.cluster.client.connect` and closed on exit.

    Raises
    ------
    SketchsimError
        For a value of none of these kinds (a Client is anything with
        ``submit`` and ``scheduler_info``).
    """
    if cluster is None:
        yield None, None
        return
    from sketchsim.cluster.client import ClusterSpec, connect, parse_cluster

    if isinstance(cluster, str):
        cluster = parse_cluster(cluster)
    if not isinstance(cluster, ClusterSpec):
        if not all(callable(getattr(cluster, name, None)) for name in CLIENT_METHODS):
            raise SketchsimError(
                "cluster must be None, 'local:N', 'tcp://HOST:PORT', a ClusterSpec or a "
                f"distributed.Client, got {type(cluster).__name__} {cluster!r:.40}",
                param="cluster",
            )
        yield cluster, None  # a Client of the caller's
        return
    with connect(cluster, log=log, need_torch=need_torch) as client:
        yield client, cluster


@contextmanager
def training_client(cluster, device: str, log: Callable[[str], None]) -> Iterator:
    """The Dask client of a training run's ``cluster=`` (None without one).

    ``log`` is told where the runs go: with workers that advertise the ``GPU``
    resource each training run requests ``GPU=1``; asked for ``cuda`` without
    one, the runs share the workers' GPUs.
    """
    from sketchsim.experiments.sweep import task_resources

    with open_cluster(cluster, log=log, need_torch=True) as (client, _):
        if client is not None:
            if task_resources(client, device):
                log("each training run requests the worker resource GPU=1")
            elif device == "cuda":
                log(
                    "no worker advertises a GPU resource (dask worker --resources GPU=1): "
                    "runs share the workers' GPUs"
                )
        yield client


def cluster_threads(client, spec) -> int:
    """Worker threads of the cluster: ``N`` of ``local:N``, else counted on the scheduler."""
    from sketchsim.cluster.client import worker_threads

    if spec is not None and spec.kind == "local":
        return spec.workers
    return worker_threads(client)


def describe(client, spec) -> str:
    """The cluster's address for result files."""
    if spec is not None:
        return spec.describe()
    return str(getattr(getattr(client, "scheduler", None), "address", "client"))
