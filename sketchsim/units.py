"""The one unit runner of the measuring commands: units measured here or as Dask tasks.

A run is a list of *units* (a bound row, a minrank row, a frontier cell, a
trained run).  :func:`run_units` takes the units' arguments and the results a
resumed checkpoint already holds, measures every other unit with
``measure(*args)`` in this process, or as one Dask task each given a client
(:func:`sketchsim.runs.clusters.open_cluster` opens one from a run's
``cluster=``), and hands each result to ``finished(i, result)`` in this process as it
arrives (in any order on a cluster), so that the caller rewrites its
:class:`~sketchsim.checkpoint.Checkpoint` after every unit and a killed run
resumes at the last unit boundary.  ``progress(done, total)`` counts resumed
units as done.

A unit's resume key names everything its result depends on: its settings,
the identities of the files it reads (protocol and family sources, weights
files) and, through the checkpoint, the code (:class:`~sketchsim.checkpoint.
Checkpoint` records :func:`sketchsim.machine.package_digest` and refuses to
resume from a file another code wrote).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

__all__ = ["run_units"]


def run_units(
    args: Sequence[tuple] | Callable[[int, object], tuple],
    measure: Callable,
    total: int | None = None,
    *,
    resumed: Sequence | None = None,
    finished: Callable[[int, object], None] | None = None,
    client=None,
    progress: Callable[[int, int], None] | None = None,
    task: Callable | None = None,
    submit: dict | None = None,
    failed: Callable[[int, Exception], Exception | None] | None = None,
) -> list:
    """Every unit's result, in unit order: resumed ones as given, the others measured.

    Parameters
    ----------
    args : sequence of tuple, or callable
        Unit ``i``'s arguments; or ``args(i, client)`` building them when the
        unit is measured (``client``: the Dask client or None), for arguments
        that are expensive or live on the cluster.
    measure : callable
        ``measure(*args) -> result`` in this process.
    total : int, optional
        The number of units (needed when ``args`` is a callable).
    resumed : sequence, optional
        Per unit, its result from a checkpoint, or None to measure it.
    finished : callable, optional
        ``finished(i, result)`` after each measured unit (save the checkpoint here).
    client : distributed.Client, optional
        Measure the units as Dask tasks on this client's cluster.
    progress : callable, optional
        ``progress(done, total)``, resumed units counted as done: first once the
        units are under way (on a cluster, once every task is submitted), then
        after each one.
    task : callable, optional
        What a Dask task runs instead of ``measure`` (one torch thread, say).
    submit : dict, optional
        Keyword arguments of every ``client.submit`` (``retries``, ``resources``).
    failed : callable, optional
        ``failed(i, exc)``: the exception to raise when unit ``i``'s task raised
        ``exc`` (None: re-raise ``exc``); every other task is cancelled first.

    Returns
    -------
    list
        One result per unit.
    """
    n = len(args) if total is None else total
    unit_args = args if callable(args) else (lambda i, _client: args[i])
    results = list(resumed) if resumed is not None else [None] * n
    todo = [i for i in range(n) if results[i] is None]
    done = n - len(todo)

    def started() -> None:
        if progress is not None:
            progress(done, n)

    def finish(i: int, result) -> None:
        nonlocal done
        results[i] = result
        done += 1
        if finished is not None:
            finished(i, result)
        if progress is not None:
            progress(done, n)

    if client is None or not todo:
        started()
        for i in todo:
            finish(i, measure(*unit_args(i, None)))
    else:
        fn = measure if task is None else task
        units = [(i, unit_args(i, client)) for i in todo]
        _on_cluster(client, fn, units, started, finish, submit, failed)
    return results


def _on_cluster(client, fn, units: list, started, finish, submit: dict | None, failed) -> None:
    """One Dask task per unit; each result handed to ``finish`` as it arrives."""
    from sketchsim.futures import completed

    futures = {client.submit(fn, *a, pure=False, **(submit or {})): i for i, a in units}
    try:
        started()
        for fut in completed(client, list(futures), raise_errors=failed is None):
            i = futures[fut]
            try:
                result = fut.result()
            except Exception as exc:
                if failed is None:
                    raise
                mapped = failed(i, exc)
                raise (exc if mapped is None else mapped) from None
            finish(i, result)
    except BaseException:
        client.cancel(list(futures))
        raise
