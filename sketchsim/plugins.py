"""Protocol discovery: built-ins, installed entry points, files and modules.

- Built-ins: one file each in the top-level ``protocols/`` folder (shipped inside
  the wheel as ``sketchsim/builtin_protocols``).
- Installed plug-ins: entry points in the group ``sketchsim.protocols`` whose
  value is a :class:`~sketchsim.sketch.Protocol` object.
- Explicit specs: ``path/to/file.py:NAME`` or ``package.module:NAME``, where
  ``NAME`` is an attribute holding a Protocol (or a protocol's name).

Any spec may end with ``:key=value,key=value`` parameters.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path

from sketchsim.errors import PluginError
from sketchsim.sketch.protocol import Protocol

__all__ = ["Found", "builtin_dir", "discover", "resolve_spec", "parse_params", "ENTRY_POINT_GROUP"]

ENTRY_POINT_GROUP = "sketchsim.protocols"


@dataclass
class Found:
    """A protocol and where it came from (or why it failed to load)."""

    name: str
    source: str
    protocol: Protocol | None = None
    error: str | None = None


def builtin_dir() -> Path:
    """The folder of built-in protocol files (installed copy, else the source tree)."""
    here = Path(__file__).resolve().parent
    installed = here / "builtin_protocols"
    return installed if installed.is_dir() else here.parent / "protocols"


def _load_file(path: Path):
    """Import a Python file as a module registered in ``sys.modules``.

    numba's on-disk cache re-imports a function's module by name, so file
    plug-ins get a stable, importable name derived from their path.
    """
    if not path.is_file():
        raise PluginError(f"protocol file {path} does not exist")
    digest = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:10]
    name = f"sketchsim_plugin_{path.stem}_{digest}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        raise PluginError(
            f"protocol file {path} failed to import: {type(exc).__name__}: {exc}"
        ) from None
    return module


def _protocols_in(module) -> dict[str, Protocol]:
    """Protocols a module defines, by attribute name and by protocol name."""
    found = {}
    for attr, value in vars(module).items():
        if isinstance(value, Protocol):
            found[attr] = value
            found[value.name] = value
    return found


def _builtins() -> list[Found]:
    out = []
    for path in sorted(builtin_dir().glob("*.py")):
        if path.name.startswith("_"):
            continue
        try:
            module = _load_file(path)
        except PluginError as exc:
            out.append(Found(path.stem, "built-in", error=str(exc)))
            continue
        seen = set()
        for proto in _protocols_in(module).values():
            if proto.name not in seen:
                seen.add(proto.name)
                out.append(Found(proto.name, "built-in", proto))
    return out


def _entry_points() -> list[Found]:
    out = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        source = f"entry point {ep.value}"
        try:
            obj = ep.load()
        except Exception as exc:
            out.append(
                Found(ep.name, source, error=f"failed to import: {type(exc).__name__}: {exc}")
            )
            continue
        if not isinstance(obj, Protocol):
            out.append(Found(ep.name, source, error="entry point is not a sketchsim Protocol"))
            continue
        out.append(Found(obj.name, source, obj))
    return out


def discover() -> list[Found]:
    """Every protocol found: built-ins first, then installed entry points.

    Raises
    ------
    PluginError
        When two protocols share a name.
    """
    found = _builtins() + _entry_points()
    names = {}
    for item in found:
        if item.protocol is None:
            continue
        if item.name in names:
            first = names[item.name]
            raise PluginError(
                f"protocol name {item.name!r} is defined twice: {first} and {item.source}"
            )
        names[item.name] = item.source
    return found


def parse_params(text: str, protocol: str) -> dict[str, str]:
    """``"r=4,bits=8"`` to ``{"r": "4", "bits": "8"}``."""
    params = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        if "=" not in part:
            raise PluginError(f"protocol {protocol}: parameter {part!r} is not key=value")
        key, value = (x.strip() for x in part.split("=", 1))
        if key in params:
            raise PluginError(f"protocol {protocol}: parameter {key!r} given twice")
        params[key] = value
    return params


def _pick(module_protocols: dict[str, Protocol], name: str, where: str) -> Protocol:
    if name not in module_protocols:
        have = sorted({p.name for p in module_protocols.values()})
        raise PluginError(
            f"{where} defines no protocol {name!r}; it has: {', '.join(have) or 'none'}"
        )
    return module_protocols[name]


def resolve_spec(spec: str, found: list[Found] | None = None) -> tuple[Protocol, dict, str]:
    """Turn a ``--protocol`` spec into ``(protocol, parameters, source)``.

    Parameters
    ----------
    spec : str
        ``NAME[:k=v,...]``, ``path/file.py:NAME[:k=v,...]`` or ``pkg.mod:NAME[:k=v,...]``.
    found : list of Found, optional
        Result of :func:`discover` (computed when omitted).
    """
    parts = spec.split(":")
    head = parts[0].strip()
    if not head:
        raise PluginError(f"empty protocol spec {spec!r}")
    if head.endswith(".py"):
        if len(parts) < 2 or not parts[1]:
            raise PluginError(f"protocol spec {spec!r} needs a name: path/to/file.py:NAME")
        proto = _pick(_protocols_in(_load_file(Path(head))), parts[1], head)
        rest, source = parts[2:], f"file {head}"
    elif len(parts) >= 2 and parts[1] and "=" not in parts[1]:
        try:
            module = importlib.import_module(head)
        except Exception as exc:
            raise PluginError(
                f"protocol module {head} failed to import: {type(exc).__name__}: {exc}"
            ) from None
        proto = _pick(_protocols_in(module), parts[1], f"module {head}")
        rest, source = parts[2:], f"module {head}"
    else:
        found = discover() if found is None else found
        match = [f for f in found if f.name == head]
        if not match:
            names = ", ".join(sorted(f.name for f in found if f.protocol))
            raise PluginError(f"unknown protocol {head!r}; known: {names}")
        if match[0].protocol is None:
            raise PluginError(f"protocol {head}: {match[0].error}")
        proto, rest, source = match[0].protocol, parts[1:], match[0].source
    if len(rest) > 1:
        raise PluginError(f"protocol spec {spec!r} has too many ':' parts")
    params = proto.resolve(parse_params(rest[0], proto.name) if rest else {})
    return proto, params, source
