"""Running shards of work on a Dask cluster (the ``cluster`` extra).

Nothing here schedules work itself: Dask distributed does (a ``LocalCluster``
of single-threaded worker processes for ``local:N``, or a running scheduler
for ``tcp://HOST:PORT``).  This module only parses the ``--cluster`` value,
opens the client, and runs a list of independent shards with a *state
directory*: every finished shard's result is written there atomically, so a
killed run resumes where it stopped and a shard is never computed twice.
Shard functions must be module-level (picklable) and deterministic.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from sketchsim.errors import SketchsimError
from sketchsim.futures import WORKER_TIMEOUT_S, completed, dask_failure
from sketchsim.machine import package_digest
from sketchsim.results import read_json, write_json_atomic

__all__ = [
    "ClusterSpec",
    "parse_cluster",
    "connect",
    "run_shards",
    "worker_threads",
    "INSTALL_HINT",
    "STATE_FORMAT",
]

#: Version of the state directory's layout, part of every state key: a state made
#: by another layout or another sketchsim source is refused, never misread.
STATE_FORMAT = 2

INSTALL_HINT = "pip install 'sketchsim[cluster]'"

#: Seconds to wait for a remote scheduler before giving up (``SKETCHSIM_CONNECT_TIMEOUT``
#: overrides it: a slow network may need more, the tests use less).
CONNECT_TIMEOUT_S = 5


def connect_timeout() -> float:
    """Seconds :func:`connect` waits for a remote scheduler."""
    text = os.environ.get("SKETCHSIM_CONNECT_TIMEOUT", "")
    try:
        value = float(text) if text else CONNECT_TIMEOUT_S
    except ValueError:
        raise SketchsimError(
            f"SKETCHSIM_CONNECT_TIMEOUT must be a number of seconds, got {text!r}"
        ) from None
    if not 0 < value < 1e6:
        raise SketchsimError(f"SKETCHSIM_CONNECT_TIMEOUT must be in (0, 1e6), got {text!r}")
    return value


#: Most worker processes ``local:N`` starts.
MAX_LOCAL_WORKERS = 256

#: Why a local cluster started from a script without a main guard fails.
SCRIPT_GUARD_HINT = (
    "Dask starts worker processes that import the calling script, so a script that starts "
    'a local cluster must call sketchsim under `if __name__ == "__main__":`'
)


@dataclass(frozen=True)
class ClusterSpec:
    """A parsed ``--cluster`` value: ``local`` with ``workers``, or a scheduler ``address``."""

    kind: str
    workers: int = 0
    address: str = ""
    timeout: float = WORKER_TIMEOUT_S

    def describe(self) -> str:
        """Human-readable form for reports."""
        if self.kind == "local":
            return f"local:{self.workers}"
        return self.address


def parse_cluster(text: str) -> ClusterSpec:
    """Parse ``local:N`` or ``tcp://HOST:PORT``.

    Raises
    ------
    SketchsimError
        For anything else (the message names the accepted forms).
    """
    value = (text or "").strip()
    if value.startswith("local:"):
        try:
            n = int(value.split(":", 1)[1])
        except ValueError:
            n = 0
        if not 1 <= n <= MAX_LOCAL_WORKERS:
            raise SketchsimError(
                f"cluster {text!r}: local:N needs 1 <= N <= {MAX_LOCAL_WORKERS} worker processes",
                param="cluster",
            )
        return ClusterSpec("local", workers=n)
    if value.startswith(("tcp://", "tls://")):
        rest = value.split("://", 1)[1]
        host, _, port = rest.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise SketchsimError(f"cluster {text!r}: expected tcp://HOST:PORT", param="cluster")
        return ClusterSpec("remote", address=value)
    raise SketchsimError(f"cluster {text!r}: use local:N or tcp://HOST:PORT", param="cluster")


def _require_distributed():
    try:
        import distributed
    except ImportError:
        raise SketchsimError(
            f"cluster needs Dask distributed: {INSTALL_HINT}", param="cluster"
        ) from None
    return distributed


@contextmanager
def connect(
    spec: ClusterSpec, log: Callable[[str], None] | None = None, need_torch: bool = False
) -> Iterator:
    """Open a Dask ``Client`` for ``spec``; closes it (and a local cluster) on exit.

    Waits up to ``spec.timeout`` seconds for a first worker, then checks every
    worker's environment (the same sketchsim version; torch when ``need_torch``).
    Inside the block, a lost scheduler, workers killed too often or a cancelled
    task end as one :class:`~sketchsim.errors.SketchsimError` line saying what
    to do; finished work stays in the state directory or result file.

    Parameters
    ----------
    spec : ClusterSpec
    log : callable, optional
        Receives one line naming the cluster (and its dashboard, when bokeh is installed).
    need_torch : bool
        Refuse workers that cannot import torch (training runs).
    """
    distributed = _require_distributed()
    timeout = connect_timeout()
    with _quiet_dask_logs():
        yield from _connected(distributed, spec, timeout, log, need_torch)


@contextmanager
def _quiet_dask_logs():
    """Keep Dask's own log lines (a lost scheduler's tracebacks) off the terminal.

    Every failure they report ends the run as one :class:`SketchsimError`
    line; the workers' and scheduler's own logs stay where they are.
    """
    import logging

    names = ["distributed"] + [
        name for name in logging.root.manager.loggerDict if name.startswith("distributed.")
    ]  # Dask's logging config sets some children's levels (distributed.client) itself
    loggers = [logging.getLogger(name) for name in names]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


def _importing_parent_script() -> bool:
    """Whether this is a spawned child process still running its parent's script.

    Python's ``spawn`` start method (Dask's for worker processes) runs the
    parent's main script again as ``__mp_main__`` while the child starts, with
    ``_inheriting`` set on the process (``parent_process()`` is None until then).
    """
    import multiprocessing

    main = sys.modules.get("__mp_main__")
    return bool(
        getattr(multiprocessing.current_process(), "_inheriting", False)
        and getattr(main, "__name__", None) == "__mp_main__"
    )


def _connected(distributed, spec: ClusterSpec, timeout: float, log, need_torch: bool):
    """The body of :func:`connect` (a generator it delegates to)."""
    cluster = None
    if spec.kind == "local" and _importing_parent_script():
        raise SketchsimError(
            f"cannot start {spec.describe()} in a worker process that is importing the "
            f"script which started it: {SCRIPT_GUARD_HINT}"
        )
    try:
        if spec.kind == "local":
            cluster = distributed.LocalCluster(
                n_workers=spec.workers,
                threads_per_worker=1,
                processes=True,
                dashboard_address=":0",  # served only with bokeh; the link is shown then
                silence_logs=50,  # workers' heartbeat errors after a failure are not ours
                # one task per single-threaded process: no nested numba/torch threads
                env={"NUMBA_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"},
            )
            client = distributed.Client(cluster)
        else:
            client = distributed.Client(spec.address, timeout=f"{timeout}s")
    except RuntimeError as exc:  # "Nanny failed to start.": a worker process died starting
        if cluster is not None:
            cluster.close()
        if spec.kind != "local" or "failed to start" not in str(exc):
            raise
        raise SketchsimError(
            f"could not start {spec.describe()} ({exc}): {SCRIPT_GUARD_HINT}"
        ) from None
    except (OSError, TimeoutError) as exc:
        if cluster is not None:
            cluster.close()
        if spec.kind == "local":
            raise SketchsimError(f"could not start {spec.describe()}: {exc}") from None
        raise SketchsimError(
            f"cannot reach the Dask scheduler at {spec.describe()} within {timeout:g} s: {exc}"
        ) from None
    client.sketchsim_timeout = spec.timeout
    try:
        _wait_for_workers(client, spec)
        _check_workers(client, need_torch)
        if log is not None:
            n = len(client.scheduler_info().get("workers", {}))
            board = f", dashboard {client.dashboard_link}" if _has_bokeh() else ""
            log(f"cluster {spec.describe()}: {n} workers{board}")
        yield client
    except SketchsimError:
        raise
    except Exception as exc:
        translated = dask_failure(exc, spec)
        if translated is None:
            raise
        raise translated from None
    finally:
        _quiet_close(client, cluster)


def _has_bokeh() -> bool:
    """Dask serves its dashboard only with bokeh installed: no link without it."""
    from importlib.util import find_spec

    return find_spec("bokeh") is not None


def _quiet_close(client, cluster) -> None:
    """Close the client and a local cluster; a dead scheduler makes closing fail, not us."""
    for obj in (client, cluster):
        if obj is None:
            continue
        try:
            obj.close()
        except Exception:  # noqa: BLE001 - closing a connection to a dead scheduler
            pass


def _wait_for_workers(client, spec: ClusterSpec) -> None:
    try:
        client.wait_for_workers(1, timeout=spec.timeout)
    except TimeoutError:
        raise SketchsimError(
            f"no Dask worker joined {spec.describe()} within {spec.timeout:g} s; start "
            "workers (dask worker ADDRESS) or raise the timeout",
            param="cluster_timeout",
        ) from None


def _worker_environment() -> dict:
    """What :func:`connect` checks on each worker (runs there)."""
    from importlib.util import find_spec

    import sketchsim

    return {"sketchsim": sketchsim.__version__, "torch": find_spec("torch") is not None}


def _check_workers(client, need_torch: bool) -> None:
    import sketchsim

    for worker, env in sorted(client.run(_worker_environment).items()):
        if env["sketchsim"] != sketchsim.__version__:
            raise SketchsimError(
                f"worker {worker} runs sketchsim {env['sketchsim']}, this client "
                f"{sketchsim.__version__}: install the same version on every worker"
            )
        if need_torch and not env["torch"]:
            raise SketchsimError(
                f"worker {worker} cannot import torch, which training needs: "
                "pip install 'sketchsim[torch]' on every worker"
            )


def worker_threads(client) -> int:
    """Worker threads of the cluster behind ``client`` (at least 1): its parallelism."""
    workers = client.scheduler_info().get("workers", {}).values()
    return max(1, sum(int(w.get("nthreads", 1)) for w in workers))


def _key_digest(key: dict) -> str:
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]


def _open_state(state_dir: Path, key: dict, n_shards: int) -> dict[int, object]:
    """Finished shard results in ``state_dir`` (made for ``key``), by shard index."""
    manifest = state_dir / "manifest.json"
    want = {"key": key, "digest": _key_digest(key), "shards": n_shards}
    if manifest.exists():
        try:
            have = read_json(manifest)
        except SketchsimError as exc:
            raise SketchsimError(
                f"state directory {state_dir}: unreadable manifest ({exc})"
            ) from None
        if not isinstance(have, dict) or have.get("digest") != want["digest"]:
            raise SketchsimError(
                f"state directory {state_dir} belongs to another run; "
                "remove it or choose another state directory",
                param="state",
            )
    else:
        write_json_atomic(manifest, want)
    done = {}
    for path in state_dir.glob("shard-*.json"):
        try:
            index = int(path.stem.split("-", 1)[1])
            entry = read_json(path)
        except (ValueError, SketchsimError):
            continue  # a torn or foreign file: the shard is simply recomputed
        if isinstance(entry, dict) and entry.get("digest") == want["digest"] and index < n_shards:
            done[index] = entry["result"]
    return done


def _one_thread(fn: Callable, *args):
    """Run ``fn(*args)`` with one numba (and torch) thread: Dask runs one task per worker thread."""
    import numba

    numba.set_num_threads(1)
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(1)
    return fn(*args)


def run_shards(
    client,
    fn: Callable,
    shards: Sequence[tuple],
    *,
    state_dir: str | os.PathLike | None,
    key: dict,
    progress: Callable[[int, int], None] | None = None,
    retries: int = 2,
) -> list:
    """Run ``fn(*shard)`` for every shard on the cluster; results in shard order.

    Parameters
    ----------
    client : distributed.Client
    fn : callable
        Module-level, deterministic, returning a JSON-serialisable value.
    shards : sequence of tuple
        Arguments of each task.
    state_dir : path or None
        Where finished shards are kept for resuming (None: keep nothing).
    key : dict
        Everything that determines the results; a state directory made for
        another key is refused.
    progress : callable, optional
        ``progress(done, total)`` in shards.
    retries : int
        Dask retries a task whose worker died this many times.
    """
    n = len(shards)
    key = {**key, "state_format": STATE_FORMAT, "code": package_digest()}
    state = Path(state_dir) if state_dir is not None else None
    done = _open_state(state, key, n) if state is not None else {}
    digest = _key_digest(key)
    results: list = [None] * n
    for index, value in done.items():
        results[index] = value
    pending = [i for i in range(n) if i not in done]
    if progress is not None:
        progress(n - len(pending), n)
    futures = {}
    for i in pending:
        fut = client.submit(_one_thread, fn, *shards[i], pure=False, retries=retries)
        futures[fut] = i
    finished = n - len(pending)
    for fut in completed(client, futures):
        i = futures[fut]
        value = fut.result()
        results[i] = value
        if state is not None:
            write_json_atomic(state / f"shard-{i:06d}.json", {"digest": digest, "result": value})
        finished += 1
        if progress is not None:
            progress(finished, n)
    return results
