"""Protocol discovery: built-ins, installed entry points, files and modules.

- Built-ins: one file each in the top-level ``protocols/`` folder (shipped inside
  the wheel as ``sketchsim/builtin_protocols``).
- Installed plug-ins: entry points in the group ``sketchsim.protocols`` whose
  value is a :class:`~sketchsim.sketch.Protocol` object.
- Explicit specs: ``path/to/file.py:NAME`` or ``package.module:NAME``, where
  ``NAME`` is an attribute holding a Protocol (or a protocol's name).

Any spec may end with ``:key=value,key=value`` parameters.

Every protocol found carries a *source identity* (used to key resumed results):
``sha256:<hex>`` of the file's bytes for built-ins and file plug-ins, the module
file's hash for ``package.module`` specs, and ``dist <name> <version> <value>``
for installed entry points, followed by the hash of every file a ``path``
parameter names (:func:`read_files_identity`).  A plug-in that fails to import (whatever it raises,
``SystemExit`` included) or reuses a taken name is reported, not fatal.
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass
from pathlib import Path

from sketchsim.errors import PluginError
from sketchsim.sketch import specs
from sketchsim.sketch.protocol import Protocol
from sketchsim.sketch.specs import Found

__all__ = [
    "Found",
    "Resolved",
    "builtin_dir",
    "discover",
    "resolve",
    "resolve_spec",
    "parse_params",
    "file_identity",
    "module_identity",
    "read_files_identity",
    "ENTRY_POINT_GROUP",
]

ENTRY_POINT_GROUP = "sketchsim.protocols"


@dataclass
class Resolved:
    """A ``--protocol`` spec resolved: the protocol, its parsed parameters, where it came
    from (for people) and its source identity (for resume keys)."""

    protocol: Protocol
    params: dict
    source: str
    identity: str


def file_identity(path: Path) -> str:
    """``sha256:<hex>`` of a file's bytes (read in 1 MiB pieces)."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for piece in iter(lambda: fh.read(1 << 20), b""):
            digest.update(piece)
    return "sha256:" + digest.hexdigest()


def builtin_dir() -> Path:
    """The folder of built-in protocol files (installed copy, else the source tree)."""
    here = Path(__file__).resolve().parents[1]  # the sketchsim package
    installed = here / "builtin_protocols"
    return installed if installed.is_dir() else here.parent / "protocols"


def _load_file(path: Path):
    """Import a protocol file (see :func:`sketchsim.sketch.specs.load_file`)."""
    return specs.load_file(path, "protocol", "sketchsim_plugin", PluginError)


def _protocols_in(module) -> dict[str, Protocol]:
    """Protocols a module defines, by attribute name and by protocol name."""
    return specs.instances_in(module, Protocol)


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
        identity = file_identity(path)
        seen = set()
        for proto in _protocols_in(module).values():
            if proto.name not in seen:
                seen.add(proto.name)
                marked = dataclasses.replace(proto, builtin=True)
                out.append(Found(proto.name, "built-in", marked, identity=identity))
    return out


def discover() -> list[Found]:
    """Every protocol found: built-ins first, then installed entry points.

    Never raises for a bad plug-in: one that fails to import, or that reuses a name
    already taken (a built-in's, or an earlier entry point's), is listed with its
    ``error`` and without a protocol; the first holder of a name keeps it.
    """
    found, taken = [], {}
    for item in _builtins():
        if item.protocol is not None and item.name in taken:
            item = Found(
                item.name,
                item.source,
                error=f"ignored: the name {item.name!r} is already taken by {taken[item.name]}",
            )
        elif item.protocol is not None:
            taken[item.name] = item.source
        found.append(item)
    for d in specs.discover_entry_points(ENTRY_POINT_GROUP, Protocol, "Protocol", taken):
        found.append(d)
    return found


def parse_params(text: str, protocol: str) -> dict[str, str]:
    """``"r=4,bits=8"`` to ``{"r": "4", "bits": "8"}``."""
    return specs.parse_params(text, f"protocol {protocol}", PluginError)


def _pick(module_protocols: dict[str, Protocol], name: str, where: str) -> Protocol:
    return specs.pick(module_protocols, name, where, "protocol", PluginError)


def resolve_spec(spec: str, found: list[Found] | None = None) -> tuple[Protocol, dict, str]:
    """Turn a ``--protocol`` spec into ``(protocol, parameters, source)``; see :func:`resolve`."""
    r = resolve(spec, found)
    return r.protocol, r.params, r.source


def resolve(spec: str, found: list[Found] | None = None) -> Resolved:
    """Turn a ``--protocol`` spec into a :class:`Resolved`.

    Parameters
    ----------
    spec : str
        ``NAME[:k=v,...]``, ``path/file.py:NAME[:k=v,...]`` or ``pkg.mod:NAME[:k=v,...]``.
    found : list of Found, optional
        Result of :func:`discover` (computed when omitted).

    Raises
    ------
    PluginError
        Unknown, broken or ambiguous protocols, bad parameters.
    """
    parts = spec.split(":")
    head = parts[0].strip()
    if not head:
        raise PluginError(f"empty protocol spec {spec!r}")
    if head.endswith(".py"):
        if len(parts) < 2 or not parts[1]:
            raise PluginError(f"protocol spec {spec!r} needs a name: path/to/file.py:NAME")
        proto = _pick(_protocols_in(_load_file(Path(head))), parts[1], head)
        rest, source, identity = parts[2:], f"file {head}", file_identity(Path(head))
    elif len(parts) >= 2 and parts[1] and "=" not in parts[1]:
        module = specs.import_module(head, "protocol", PluginError)
        proto = _pick(_protocols_in(module), parts[1], f"module {head}")
        rest, source, identity = parts[2:], f"module {head}", module_identity(module)
    else:
        found = discover() if found is None else found
        match = [f for f in found if f.name == head and f.protocol is not None]
        if not match:
            broken = [f for f in found if f.name == head]
            if broken:
                raise PluginError(f"protocol {head} ({broken[0].source}): {broken[0].error}")
            names = ", ".join(sorted(f.name for f in found if f.protocol))
            raise PluginError(f"unknown protocol {head!r}; known: {names}")
        proto, rest, source, identity = (
            match[0].protocol,
            parts[1:],
            match[0].source,
            match[0].identity,
        )
    if len(rest) > 1:
        raise PluginError(f"protocol spec {spec!r} has too many ':' parts")
    params = proto.resolve(parse_params(rest[0], proto.name) if rest else {})
    digests = _path_digests(proto, params)
    pin_content(proto, params, digests)
    files = "".join(f" + file {name} {digest}" for name, digest in digests)
    return Resolved(proto, params, source, identity + files)


def pin_content(proto: Protocol, params: dict, digests: list[tuple[str, str]]) -> None:
    """Fill a protocol's ``sha256`` parameter (the ``trained`` protocol's) with the content
    of its one file as :func:`resolve` read it, when not given: every later load of the
    file in the run (each ``K`` of a frontier, each chunk) is those bytes or refused, so
    one run measures one model even if the file is replaced while it runs (#60)."""
    pin = next((p for p in proto.params if p.name == "sha256"), None)
    if pin is None or pin.type != "str" or len(digests) != 1:
        return
    digest = digests[0][1]
    have = digest[len("sha256:") :] if digest.startswith("sha256:") else None
    given = str(params.get("sha256") or "").strip().lower()
    if given and (len(given) != 64 or any(c not in "0123456789abcdef" for c in given)):
        raise PluginError(f"protocol {proto.name}: sha256 must be 64 hex digits, got "
                          f"{ascii(params['sha256'])[:80]}", param="sha256")  # fmt: skip
    if given and have is not None and given != have:
        raise PluginError(
            f"protocol {proto.name}: the spec names sha256 {given[:16]}..., and the file "
            f"{digests[0][0]} holds {have[:16]}...: another file than the one named",
            param="sha256",
        )
    if have is not None:
        params["sha256"] = have


def _path_digests(proto: Protocol, params: dict) -> list[tuple[str, str]]:
    """``(parameter, "sha256:<hex>" or "missing")`` for every ``path`` parameter given."""
    out = []
    for p in proto.params:
        value = params.get(p.name)
        if p.type != "path" or not value:
            continue
        try:
            digest = file_identity(Path(value)) if Path(value).is_file() else "missing"
        except OSError:
            digest = "missing"
        out.append((p.name, digest))
    return out


def read_files_identity(proto: Protocol, params: dict) -> str:
    """`` + file NAME sha256:<hex>`` for every ``path`` parameter naming a file, in order.

    A resumed result keyed by this identity is measured again when a file the
    protocol reads (a weights file) changed under the same path.  A path that
    is not a readable file adds ``missing``: ``setup`` reports it.
    """
    return "".join(f" + file {name} {digest}" for name, digest in _path_digests(proto, params))


def module_identity(module) -> str:
    """The module file's hash; else its name and its distribution's version."""
    path = getattr(module, "__file__", None)
    if path and Path(path).is_file():
        return file_identity(Path(path))
    from importlib.metadata import PackageNotFoundError, version

    top = module.__name__.split(".")[0]
    try:
        return f"module {module.__name__} {version(top)}"
    except PackageNotFoundError:
        return f"module {module.__name__}"
