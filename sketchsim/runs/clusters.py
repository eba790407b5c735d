"""The ``cluster=`` argument of every run: None, ``local:N``, ``tcp://...``, a spec, a Client."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["open_cluster", "cluster_threads", "describe"]


@contextmanager
def open_cluster(
    cluster, log: Callable[[str], None] | None = None, need_torch: bool = False
) -> Iterator:
    """Yield ``(client, spec)`` for a run's ``cluster=`` value, or ``(None, None)``.

    A ``distributed.Client`` passed in is used as it is and left open; a
    ``ClusterSpec`` or its text form (``local:N``, ``tcp://HOST:PORT``) is
    connected with :func:`sketchsim.cluster.client.connect` and closed on exit.
    """
    if cluster is None:
        yield None, None
        return
    from sketchsim.cluster.client import ClusterSpec, connect, parse_cluster

    if isinstance(cluster, str):
        cluster = parse_cluster(cluster)
    if not isinstance(cluster, ClusterSpec):  # a Client of the caller's
        yield cluster, None
        return
    with connect(cluster, log=log, need_torch=need_torch) as client:
        yield client, cluster


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
