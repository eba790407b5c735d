"""The ``--cluster`` and ``--state`` options shared by commands that can run on Dask."""

from __future__ import annotations

import click

from sketchsim.cli.paths import OutputPath

__all__ = ["cluster_option", "cluster_options"]


def _parse(ctx, param, value):
    if value is None:
        return None
    from sketchsim.cluster.client import parse_cluster

    return parse_cluster(value)


def cluster_option(func):
    """Add ``--cluster local:N|tcp://HOST:PORT`` (parsed to a ``ClusterSpec``) to a command."""
    return click.option(
        "--cluster",
        "cluster",
        callback=_parse,
        metavar="local:N|tcp://HOST:PORT",
        help="Run on a Dask cluster: N local worker processes, or a running scheduler "
        "(needs the cluster extra).",
    )(func)


def cluster_options(func):
    """Add ``--cluster local:N|tcp://HOST:PORT`` and ``--state DIR`` to a command."""
    func = click.option(
        "--state",
        "state_dir",
        type=OutputPath(directory=True),
        help="With --cluster: keep finished shards here to resume a killed run "
        "(default: next to --json).",
    )(func)
    return cluster_option(func)
