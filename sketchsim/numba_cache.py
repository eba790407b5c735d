"""Where numba keeps compiled kernels, chosen once at import so that no install is read-only.

sketchsim's kernels are compiled with ``cache=True``.  numba writes the cache
beside each source file (``__pycache__``), else in a per-user folder; when
neither can be written (a read-only install and a read-only ``HOME``) it fails
with a traceback at import.  :func:`configure` runs before any kernel is
defined and picks, in order:

1. ``$NUMBA_CACHE_DIR`` when it is set and writable (numba's own variable);
2. the package's ``__pycache__`` folders when they are writable (numba's default);
3. ``$XDG_CACHE_HOME/sketchsim/numba`` (``~/.cache/sketchsim/numba``);
4. a temporary folder for this process only, with one warning line on stderr;
5. no cache at all, with one warning line, when not even that can be written.

Steps 3-5 set ``NUMBA_CACHE_DIR`` in the environment, so worker processes
(Dask, ``multiprocessing``) compile into the same folder.
"""

from __future__ import annotations

import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CacheChoice", "configure", "decide", "writable"]

_PACKAGE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class CacheChoice:
    """The folder numba caches sketchsim's kernels in, and why.

    ``source`` is one of ``NUMBA_CACHE_DIR``, ``package``, ``user``, ``temporary``
    or ``off``; ``path`` is None for ``off``; ``warning`` is the line printed, if any.
    """

    source: str
    path: str | None
    warning: str | None = None


_CHOICE: CacheChoice | None = None


def writable(folder: str | os.PathLike) -> bool:
    """Whether ``folder`` exists or can be made, and a file can be created in it.

    Tried for real (as numba does): permission bits say nothing for root, and a
    read-only mount is only found by writing.
    """
    try:
        os.makedirs(folder, exist_ok=True)
        tempfile.TemporaryFile(dir=folder).close()
    except (OSError, ValueError):
        return False
    return True


def _user_dir(env) -> Path:
    base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "sketchsim" / "numba"


def decide(env=None, package: Path = _PACKAGE, make_temporary=tempfile.mkdtemp) -> CacheChoice:
    """The cache folder for an environment (no side effects beyond probing folders).

    Parameters
    ----------
    env : mapping, optional
        Environment variables (default ``os.environ``).
    package : Path
        The folder whose ``__pycache__`` numba uses by default.
    make_temporary : callable
        Makes a fresh temporary folder (``tempfile.mkdtemp``).
    """
    env = os.environ if env is None else env
    note = ""
    given = env.get("NUMBA_CACHE_DIR")
    if given:
        if writable(given):
            return CacheChoice("NUMBA_CACHE_DIR", given)
        note = f"NUMBA_CACHE_DIR={given} is not writable; "
    if writable(package / "__pycache__"):
        choice = CacheChoice("package", str(package / "__pycache__"))
    elif writable(_user_dir(env)):
        choice = CacheChoice("user", str(_user_dir(env)))
    else:
        try:
            temporary = make_temporary(prefix="sketchsim-numba-")
        except OSError:
            return CacheChoice(
                "off",
                None,
                f"warning: {note}no writable folder for numba's cache (package, "
                f"{_user_dir(env)}, temporary); kernels are compiled on every run "
                "(set NUMBA_CACHE_DIR to a writable folder)",
            )
        return CacheChoice(
            "temporary",
            temporary,
            f"warning: {note}no writable folder for numba's cache (package, {_user_dir(env)}); "
            f"compiling into {temporary} for this run only (set NUMBA_CACHE_DIR to keep them)",
        )
    if note:
        return CacheChoice(choice.source, choice.path, f"warning: {note}using {choice.path}")
    return choice


def _apply(chosen: CacheChoice) -> None:
    if chosen.source in ("user", "temporary") or (
        chosen.source == "package" and os.environ.get("NUMBA_CACHE_DIR")
    ):
        # numba reads its config at import; set both so that an already imported
        # numba and every child process agree (the package case unsets a bad value)
        value = chosen.path if chosen.source != "package" else ""
        if value:
            os.environ["NUMBA_CACHE_DIR"] = value
        else:
            os.environ.pop("NUMBA_CACHE_DIR", None)
        config = sys.modules.get("numba.core.config")
        if config is not None:
            config.CACHE_DIR = value
    if chosen.source == "temporary":  # "for this run only": removed when the process ends
        import atexit
        import shutil

        atexit.register(shutil.rmtree, chosen.path, True)
    if chosen.source == "off":
        _disable_caching()
    if chosen.warning:
        print(chosen.warning, file=sys.stderr)


def _disable_caching() -> None:
    """Make ``cache=True`` a no-op: numba would raise 'no locator available' otherwise."""
    from numba.core.dispatcher import Dispatcher

    Dispatcher.enable_caching = lambda self: None


def configure() -> CacheChoice:
    """Choose and apply the cache folder once per process (see the module docstring)."""
    global _CHOICE
    if _CHOICE is None:
        _CHOICE = decide()
        _apply(_CHOICE)
    return _CHOICE
