"""The ``--cluster`` and ``--state`` options shared by commands that can run on Dask."""

from __future__ import annotations

import click

from sketchsim.cli.paths import OutputPath

__all__ = ["cluster_option", "cluster_options"]


def _parse(ctx, param, value):
    if value is None:
        return None
    from dataclasses import replace

    from sketchsim.cluster.client import parse_cluster

    spec = parse_cluster(value)
    return replace(spec, timeout=ctx.meta.get("cluster_timeout", spec.timeout))


def _timeout(ctx, param, value):
    import math

    if value is not None:
        if not (math.isfinite(value) and 0 < value <= 86400):
            raise click.BadParameter(
                f"must be in (0, 86400] seconds, got {value}", param_hint="--cluster-timeout"
            )
        ctx.meta["cluster_timeout"] = value


def cluster_option(func):
    """Add ``--cluster local:N|tcp://HOST:PORT`` (parsed to a ``ClusterSpec``) and
    ``--cluster-timeout SECONDS`` to a command."""
    func = click.option(
        "--cluster",
        "cluster",
        callback=_parse,
        metavar="local:N|tcp://HOST:PORT",
        help="Run on a Dask cluster: N local worker processes, or a running scheduler "
        "(needs the cluster extra).",
    )(func)
    return click.option(
        "--cluster-timeout",
        type=float,
        default=None,
        is_eager=True,
        expose_value=False,
        callback=_timeout,
        metavar="SECONDS",
        help="With --cluster: how long to wait for a worker to join (or to come back after "
        "all left) before stopping with an error. Default 60.",
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
