"""Output paths checked before any work starts, and never equal to an input.

``OutputPath`` is a click parameter type for ``--json``, ``--out``, ``--plot``:
it refuses a path that cannot be written (under a file, a read-only or virtual
file system, an existing directory, an unsupported suffix) at parse time, so a
long run never fails at its last step.  :class:`CheckedCommand` then refuses an
output that names a file another argument reads (``certify w.npz --json w.npz``,
a plug-in's own ``.py``) or that two outputs share.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:  # pathlib itself is imported where paths are converted
    from pathlib import Path

__all__ = ["OutputPath", "PlotPath", "CheckedCommand", "probe_writable"]

_VIRTUAL = ("/proc", "/sys", "/dev")


def probe_writable(directory: Path) -> str | None:
    """Why files cannot be created in ``directory``, or None.

    The probe writes in ``directory``'s nearest existing ancestor and creates
    nothing that stays: a command refused later (or one that only checks its
    options) leaves no empty output folder behind.
    """
    existing = directory
    while not existing.exists():
        if existing.parent == existing:
            break
        existing = existing.parent
    if existing.exists() and not existing.is_dir():
        return f"{existing} is a file, not a directory"
    resolved = str(existing.resolve())
    if any(resolved == v or resolved.startswith(v + "/") for v in _VIRTUAL):
        return f"{resolved} is a virtual file system"
    import tempfile  # only when a directory is probed: not on start-up of every command

    try:
        fd, tmp = tempfile.mkstemp(dir=existing, prefix=".sketchsim-probe-")
        os.close(fd)
        os.unlink(tmp)
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


class OutputPath(click.ParamType):
    """A file (or, with ``directory=True``, a folder) that the command will write.

    Parameters
    ----------
    suffixes : tuple of str, optional
        Accepted file suffixes (lower case, with the dot); any when omitted.
    directory : bool
        The path names a folder to write files into.
    """

    name = "path"

    def __init__(self, suffixes: tuple[str, ...] = (), directory: bool = False):
        self.suffixes = tuple(suffixes)
        self.directory = directory

    def convert(self, value, param, ctx):
        from pathlib import Path  # here: pathlib (6 ms) is not needed to start a command

        if value is None or isinstance(value, Path):
            return value
        text = str(value)
        if not text.strip() or "\x00" in text:
            self.fail(f"{text!r} is not a usable path", param, ctx)
        path = Path(text).expanduser()
        longest = _name_max(path.parent if str(path.parent) else Path("."))
        if any(len(os.fsencode(part)) > longest for part in path.parts):
            self.fail(f"{text}: a file name is longer than the {longest} bytes allowed", param, ctx)
        if self.directory:
            if path.exists() and not path.is_dir():
                self.fail(f"{text} exists and is not a directory", param, ctx)
            folder = path
        else:
            if path.is_dir():
                self.fail(f"{text} is a directory", param, ctx)
            if path.exists() and not path.is_file():  # a FIFO, a device node: never replace it
                self.fail(f"{text} exists and is not a regular file", param, ctx)
            if self.suffixes and path.suffix.lower() not in self.suffixes:
                accepted = ", ".join(self.suffixes)
                self.fail(f"{text}: unsupported file type (use {accepted})", param, ctx)
            folder = path.parent if str(path.parent) else Path(".")
        why = probe_writable(folder)
        if why:
            self.fail(f"cannot write {text}: {why}", param, ctx)
        longest = _name_max(folder)
        if len(os.fsencode(path.name)) > longest:
            self.fail(
                f"{text}: the file name is longer than the {longest} bytes allowed", param, ctx
            )
        return text


class PlotPath(OutputPath):
    """A ``.png`` file a command will plot into: refused at parse time, before any
    work, when matplotlib does not import (missing, or present and broken: a numpy ABI
    mismatch fails only when imported, so it is imported, not looked up)."""

    def __init__(self):
        super().__init__((".png",))

    def convert(self, value, param, ctx):
        if value is not None:
            try:
                import matplotlib

                matplotlib.use("Agg")  # the backend every plot uses
                import matplotlib.pyplot  # noqa: F401
            except Exception as exc:  # noqa: BLE001 - any failure means no plot
                from sketchsim.errors import one_line

                missing = isinstance(exc, ModuleNotFoundError) and exc.name == "matplotlib"
                why = "" if missing else f" ({one_line(exc)})"
                self.fail(f"plots need matplotlib{why}: pip install 'sketchsim[plot]'", param, ctx)
        return super().convert(value, param, ctx)


def _name_max(folder: Path) -> int:
    """Longest file name (bytes) the file system of ``folder`` accepts."""
    try:
        while not folder.exists() and folder.parent != folder:
            folder = folder.parent
        return os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError):
        return 255


def _param_name(param) -> str:
    """How help names a parameter: its first flag, or an argument's metavar (``FOLDER``)."""
    if isinstance(param, click.Argument):
        return param.human_readable_name
    return param.opts[0] if param.opts else param.name


class CheckedCommand(click.Command):
    """A command whose outputs never overwrite its inputs or each other."""

    def invoke(self, ctx):
        outputs = {}
        for param in self.params:
            if isinstance(param.type, OutputPath) and ctx.params.get(param.name):
                real = os.path.realpath(ctx.params[param.name])
                flag = param.opts[0] if param.opts else param.name
                if real in outputs:
                    raise click.UsageError(f"{flag} and {outputs[real]} name the same file")
                outputs[real] = flag
        if outputs:
            from sketchsim.errors import SketchsimError
            from sketchsim.input_files import refuse_overwrite

            inputs = [
                (_param_name(param), ctx.params.get(param.name))
                for param in self.params
                if not isinstance(param.type, OutputPath)
            ]
            try:
                refuse_overwrite({path: flag for path, flag in outputs.items()}, inputs)
            except SketchsimError as exc:
                raise click.UsageError(str(exc)) from None
        from sketchsim.errors import SketchsimError

        try:
            return super().invoke(ctx)
        except SketchsimError as exc:
            # how this command names the library parameter at fault (None: it has no such option)
            param = getattr(exc, "param", None)
            if param and not hasattr(exc, "flag"):
                flag = "--" + param.replace("_", "-")
                named = [
                    p
                    for p in self.params
                    if p.name == param.replace("-", "_") or flag in getattr(p, "opts", ())
                ]
                exc.flag = _param_name(named[0]) if named else None
            raise
