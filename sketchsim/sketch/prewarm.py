"""Engine loops compiled in a helper process while the first protocols are measured.

A fresh install spends most of its first main job in numba: each engine loop
(one per set of protocol functions, :mod:`~sketchsim.sketch.engine_cache`) takes
2-5 s to compile, one after the other (numba compiles under one lock per
process).  When a run measures protocols with two or more loops that are not
yet on disk, :func:`start` starts one helper, a fresh interpreter running this
module, that compiles those loops into the same numba cache, the last needed
first.  This process meets it in the middle: before each protocol,
:meth:`Prewarm.wait` claims the protocol's loop when the helper has not started
it (this process then compiles it, as without a helper), else waits until the
helper has finished it and loads it from the cache.  A loop goes to whoever
first creates its claim file (``O_EXCL``), so it is compiled once.

The helper measures nothing and cannot change a result: it only runs the
engine's contract check on one input, which compiles the loop.  If it fails or
dies, this process compiles what is left.  No helper is started when the loops'
generated modules already exist (warm caches), numba is disabled, fewer than
two CPUs are usable, the protocols are plug-ins (their loops are not cached on
disk), or ``SKETCHSIM_PREWARM=0``.  A fresh interpreter, not ``multiprocessing``,
so that a user's script is never imported again in the helper; it runs with
``-P`` and stops at once unless it imported the same sketchsim (package digest),
and on Linux it dies with the run.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numba
import numpy as np

__all__ = ["PREWARM_ENV", "Prewarm", "claim", "cold_loops", "start"]

PREWARM_ENV = "SKETCHSIM_PREWARM"
_POLL_S = 0.05


def cold_loops(family, resolved) -> list[list[str]]:
    """The protocol specs of ``resolved`` grouped by engine loop, for loops not on disk.

    Parameters
    ----------
    family : Family
    resolved : list of (spec, resolution)
        As :func:`~sketchsim.sketch.inputs.resolve_protocols` returns them.

    Returns
    -------
    list of list of str
        One list of specs per loop whose generated module does not exist yet, in
        the order the protocols come.  Plug-ins (their setup runs once, when
        measured), plans that fail (measuring reports it) and loops not cached
        on disk are left out.
    """
    from sketchsim.sketch.engine import loop_functions
    from sketchsim.sketch.engine_cache import loop_file

    ctx = family.context()
    groups: dict = {}
    for spec, r in resolved:
        if not r.protocol.builtin:
            continue
        try:
            plan = r.protocol.plan(ctx, r.params)
        except Exception:
            continue
        path = loop_file(*loop_functions(plan)) if plan.jitted else None
        if path is None or path.exists():
            continue
        groups.setdefault(path, []).append(spec)
    return list(groups.values())


def claim(folder: Path, index: int) -> bool:
    """Take loop ``index`` for the calling process: True unless another took it first."""
    try:
        os.close(os.open(folder / f"claim_{index}", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    return True


def _enabled() -> bool:
    from sketchsim.numba_cache import configure

    if os.environ.get(PREWARM_ENV, "1") == "0" or numba.config.DISABLE_JIT:
        return False
    if configure().source == "off":  # nothing the helper compiles would reach this process
        return False
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    return cpus >= 2


class Prewarm:
    """The helper of one run: :meth:`wait` before each protocol, :meth:`close` at the end.

    Parameters
    ----------
    process : subprocess.Popen or None
    folder : Path or None
        Claim and done files, one per loop.
    owned : dict
        Spec -> index of its loop.
    """

    def __init__(self, process=None, folder=None, owned=None):
        self.process, self.folder, self.owned = process, folder, owned or {}
        self.mine: set[int] = set()  # loops this process claimed (and so compiles)

    def wait(self, spec: str) -> None:
        """Claim ``spec``'s loop, or wait until the helper has compiled it or exited."""
        index = self.owned.get(spec)
        if index is None or self.process is None or index in self.mine:
            return
        if claim(self.folder, index):
            self.mine.add(index)
            return
        done = self.folder / f"done_{index}"
        while not done.exists() and self.process.poll() is None:
            time.sleep(_POLL_S)

    def close(self) -> None:
        """Stop the helper if it still runs (a run that ended early) and drop its files."""
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self.process = None
        shutil.rmtree(self.folder, ignore_errors=True)


def start(family_args: tuple, family, resolved, T: np.ndarray) -> Prewarm:
    """Start a helper that compiles the cold engine loops of ``resolved``, the last first.

    Parameters
    ----------
    family_args : tuple
        ``(spec, q, s, samples, seed)`` for :func:`~sketchsim.sketch.inputs.build_family`,
        which rebuilds the family in the helper.
    family : Family
        The same family, built here.
    resolved : list of (spec, resolution)
    T : numpy.ndarray
        Answer vectors; the first is the helper's one input.

    Returns
    -------
    Prewarm
        Without a process when fewer than two loops are cold.
    """
    if T.shape[0] == 0 or not _enabled():
        return Prewarm()
    loops = cold_loops(family, resolved)
    if len(loops) < 2:
        return Prewarm()
    from sketchsim.machine import package_digest

    env = dict(os.environ)
    env[PREWARM_ENV] = "0"  # the helper's own imports start no helper
    # the same sketchsim as here, wherever it was imported from (the helper also
    # checks the package digest); -P: not the working folder's packages first
    root = str(Path(__file__).resolve().parents[2])
    if root not in _site_folders():
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    folder = None
    try:
        family_spec, q, s, samples, seed = family_args
        folder = Path(tempfile.mkdtemp(prefix="sketchsim-prewarm-"))
        job = {
            "family": [family_spec, int(q), int(s), None if samples is None else int(samples),
                       int(seed)],
            "specs": [specs[0] for specs in loops],
            "answers": [int(t) for t in T[0]],
            "dtype": str(T.dtype),
            "digest": package_digest(),
            "parent": os.getpid(),
            "folder": str(folder),
        }  # fmt: skip
        (folder / "job.json").write_text(json.dumps(job))
        process = subprocess.Popen(
            [sys.executable, "-P", "-m", "sketchsim.sketch.prewarm", str(folder / "job.json")],
            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
    except (OSError, TypeError, ValueError):  # no folder, no process or odd arguments:
        # this process compiles every loop, as without a helper
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
        return Prewarm()
    owned = {spec: index for index, specs in enumerate(loops) for spec in specs}
    return Prewarm(process, folder, owned)


def _site_folders() -> set[str]:
    import site

    folders = [*site.getsitepackages(), site.getusersitepackages()]
    return {str(Path(f).resolve()) for f in folders}


def _die_with_parent(parent: int) -> bool:
    """Ask Linux to kill this process when its parent exits; False if it already has."""
    try:
        import ctypes
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError, TypeError):  # not Linux: the run's close() still stops it
        pass
    return os.getppid() == parent


def compile_loops(job_path: str) -> None:
    """The helper: compile each unclaimed loop of the job, the last first.

    Stops at the first loop the measuring process has claimed (it claims them in
    order, so it has passed every loop before that one), and at once when its
    sketchsim is not the measuring process's (another package digest: its loops
    would never be found in the cache).
    """
    from sketchsim.machine import package_digest
    from sketchsim.sketch.engine import Engine
    from sketchsim.sketch.family import check_variable_tokens
    from sketchsim.sketch.inputs import build_family, resolve_protocols

    job = json.loads(Path(job_path).read_text())
    if not _die_with_parent(job["parent"]) or package_digest() != job["digest"]:
        return
    folder = Path(job["folder"])
    family, _ = build_family(*job["family"])
    ctx = family.context()
    fixed = np.ascontiguousarray(family.fixed_tokens())
    T = np.array([job["answers"]], dtype=job["dtype"])
    tokens = check_variable_tokens(family, family.variable_tokens(T), 1)
    resolved = resolve_protocols(job["specs"])
    for index in range(len(resolved) - 1, -1, -1):
        if not claim(folder, index):
            return
        r = resolved[index][1]
        Engine(r.protocol.plan(ctx, r.params), ctx, r.protocol.name).validate(tokens, fixed)
        (folder / f"done_{index}").touch()


if __name__ == "__main__":
    compile_loops(sys.argv[1])
