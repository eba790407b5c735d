"""Plug-in specs shared by protocols and families: ``NAME[:k=v,...]`` parameters, lookup."""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path

from sketchsim.errors import SketchsimError, printable

__all__ = [
    "parse_int",
    "parse_params",
    "pick",
    "load_file",
    "instances_in",
    "import_failure",
    "import_module",
    "Found",
    "discover_entry_points",
]


def parse_int(text: str) -> int:
    """``"12"``, ``"1e8"`` or ``"1_000"`` as an int; a fractional value is a ValueError."""
    try:
        return int(text)
    except ValueError:
        value = float(text)
        if not value.is_integer():
            raise
        return int(value)


def import_failure(exc: BaseException) -> str:
    """``"Kind: message"`` for an exception raised while importing plug-in code."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def import_module(name: str, kind: str, error: type[Exception]):
    """Import a plug-in's module by name; whatever its import raises (``SystemExit``
    included, only ``KeyboardInterrupt`` passes) is one ``error`` line naming ``kind``."""
    try:
        return importlib.import_module(name)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # SystemExit from a plug-in must not end sketchsim
        raise error(f"{kind} module {name} failed to import: {import_failure(exc)}") from None


def load_file(path: Path, kind: str, prefix: str, error: type[SketchsimError] = SketchsimError):
    """Import a plug-in's Python file as a module registered in ``sys.modules``.

    numba's on-disk cache re-imports a function's module by name, so file
    plug-ins get a stable name derived from their path and their contents (an
    edited file is imported afresh), starting with ``prefix`` (numba caches
    record it: keep it stable).  Any failure on import, ``SystemExit``
    included, becomes ``error``; only ``KeyboardInterrupt`` passes through.
    """
    if not path.is_file():
        from sketchsim.input_files import file_problem

        why = file_problem(path, "does not exist") or "cannot be read"
        raise error(f"{kind} file {printable(path)} {why}")
    where = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:10]
    what = hashlib.sha1(path.read_bytes()).hexdigest()[:10]
    name = f"{prefix}_{path.stem.replace('-', '_')}_{where}_{what}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except KeyboardInterrupt:
        del sys.modules[name]
        raise
    except BaseException as exc:  # SystemExit from a plug-in must not end sketchsim
        del sys.modules[name]
        raise error(f"{kind} file {path} failed to import: {import_failure(exc)}") from None
    return module


def instances_in(module, cls) -> dict:
    """Instances of ``cls`` a module defines, by attribute name and by their ``name``."""
    found = {}
    for attr, value in vars(module).items():
        if isinstance(value, cls):
            found[attr] = value
            found[value.name] = value
    return found


def parse_params(text: str, owner: str, error: type[SketchsimError] = SketchsimError) -> dict:
    """``"r=4,bits=8"`` to ``{"r": "4", "bits": "8"}``; ``owner`` names the plug-in in errors.

    Raises
    ------
    error
        For a part that is not ``key=value`` or a key given twice.
    """
    params = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        if "=" not in part:
            raise error(f"{owner}: parameter {part!r} is not key=value")
        key, value = (x.strip() for x in part.split("=", 1))
        if key in params:
            raise error(f"{owner}: parameter {key!r} given twice")
        params[key] = value
    return params


def pick(found: dict, name: str, where: str, kind: str, error: type[SketchsimError]):
    """``found[name]``, or ``error`` naming what ``where`` defines instead."""
    if name not in found:
        have = sorted({item.name for item in found.values()})
        raise error(f"{where} defines no {kind} {name!r}; it has: {', '.join(have) or 'none'}")
    return found[name]


@dataclass
class Found:
    """A plug-in found (a protocol, a family or a model): the object, where it came from
    (for people), its source identity (for resume keys), or why it was skipped."""

    name: str
    source: str
    value: object | None = None
    error: str | None = None
    identity: str = ""

    @property
    def protocol(self):
        """The protocol found (protocol plug-ins)."""
        return self.value

    @property
    def family(self):
        """The family type found (family plug-ins)."""
        return self.value


def _dist_identity(ep) -> str:
    """``dist <name> <version> <value>`` of an entry point (its value alone without a dist)."""
    dist = getattr(ep, "dist", None)
    if dist is None:
        return f"entry point {ep.value}"
    return f"dist {dist.metadata['Name']} {dist.version} {ep.value}"


def discover_entry_points(group: str, cls: type, kind: str, taken: dict) -> list[Found]:
    """Load the entry points of ``group``; never raises for a bad one.

    An entry point that fails to import (whatever it raises, ``SystemExit``
    included; only ``KeyboardInterrupt`` passes), whose value is not a ``cls``,
    or whose ``name`` is already in ``taken`` is listed with its ``error`` and no
    value.  ``taken`` maps names to who holds them (``"built-in"``, say); the
    first holder keeps a name, and every accepted entry point is added to it.

    Parameters
    ----------
    group : str
        Entry-point group, e.g. ``"sketchsim.protocols"``.
    cls : type
        What an entry point must name.
    kind : str
        Word for ``cls`` in errors (``"Protocol"``).
    taken : dict
        Names already in use; updated in place.
    """
    out = []
    for ep in entry_points(group=group):
        source = f"entry point {ep.value}"
        try:
            obj = ep.load()
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # SystemExit from a plug-in must not end sketchsim
            out.append(Found(ep.name, source, error=f"failed to import: {import_failure(exc)}"))
            continue
        if not isinstance(obj, cls):
            out.append(Found(ep.name, source, error=f"entry point is not a sketchsim {kind}"))
            continue
        name = getattr(obj, "name", ep.name)
        if name in taken:
            out.append(
                Found(
                    name,
                    source,
                    error=f"ignored: the name {name!r} is already taken by {taken[name]}",
                )
            )
            continue
        taken[name] = source
        out.append(Found(name, source, obj, identity=_dist_identity(ep)))
    return out
