"""Family discovery: built-ins, installed entry points, files and modules.

- Built-ins: ``hard`` (F(q, s), :mod:`sketchsim.sketch.family`) and ``mqar``
  (:mod:`sketchsim.sketch.mqar`).
- Installed plug-ins: entry points in the group ``sketchsim.families`` whose
  value is a :class:`~sketchsim.sketch.family.FamilyType`.
- Explicit specs: ``path/to/file.py:NAME`` or ``package.module:NAME``, where
  ``NAME`` is an attribute holding a FamilyType (or a family's name).

Any spec may end with ``:key=value,key=value`` parameters.
"""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path

from sketchsim.errors import FamilyError, SketchsimError
from sketchsim.sketch import specs
from sketchsim.sketch.family import HARD, FamilyType
from sketchsim.sketch.mqar import MQAR
from sketchsim.sketch.specs import Found

__all__ = [
    "make_family",
    "ENTRY_POINT_GROUP",
    "discover_families",
    "resolve_family",
    "family_identity",
    "family_label",
    "supports",
]

ENTRY_POINT_GROUP = "sketchsim.families"
BUILTINS = (HARD, MQAR)


def _load_file(path: Path):
    return specs.load_file(path, "family", "sketchsim_family", FamilyError)


def _families_in(module) -> dict[str, FamilyType]:
    return specs.instances_in(module, FamilyType)


def discover_families() -> list[Found]:
    """Every family found: built-ins first, then installed entry points.

    An entry point that fails to load, is not a FamilyType or reuses a name
    already taken is listed with its error instead of stopping discovery.
    """
    out = [Found(f.name, "built-in", f) for f in BUILTINS]
    taken = {f.name: "built-in" for f in BUILTINS}
    for d in specs.discover_entry_points(ENTRY_POINT_GROUP, FamilyType, "FamilyType", taken):
        out.append(d)
    return out


def _parse_params(text: str, family: str) -> dict[str, str]:
    return specs.parse_params(text, f"family {family}", FamilyError)


def _pick(found: dict[str, FamilyType], name: str, where: str) -> FamilyType:
    return specs.pick(found, name, where, "family", FamilyError)


def resolve_family(spec: str) -> tuple[FamilyType, dict, str]:
    """Turn a ``--family`` spec into ``(family type, parameters, source)``.

    ``NAME[:k=v,...]``, ``path/file.py:NAME[:k=v,...]`` or ``pkg.mod:NAME[:k=v,...]``.
    """
    parts = spec.split(":")
    head = parts[0].strip()
    if not head:
        raise FamilyError(f"empty family spec {spec!r}")
    if head.endswith(".py"):
        if len(parts) < 2 or not parts[1]:
            raise FamilyError(f"family spec {spec!r} needs a name: path/to/file.py:NAME")
        fam = _pick(_families_in(_load_file(Path(head))), parts[1], head)
        rest, source = parts[2:], f"file {head}"
    elif len(parts) >= 2 and parts[1] and "=" not in parts[1]:
        module = specs.import_module(head, "family", FamilyError)
        fam = _pick(_families_in(module), parts[1], f"module {head}")
        rest, source = parts[2:], f"module {head}"
    else:
        found = discover_families()
        match = [f for f in found if f.name == head and f.family is not None]
        if not match:
            names = ", ".join(sorted(f.name for f in found if f.family))
            raise FamilyError(f"unknown family {head!r}; known: {names}")
        fam, rest, source = match[0].family, parts[1:], match[0].source
    if len(rest) > 1:
        raise FamilyError(f"family spec {spec!r} has too many ':' parts")
    params = fam.resolve(_parse_params(rest[0], fam.name) if rest else {})
    return fam, params, source


def family_identity(spec: str, family) -> str:
    """What a result measured on ``family`` (built from ``spec``) depends on, for resume keys.

    The source of the family type (a file's sha256, a module's file hash or
    version, an installed distribution's version, or sketchsim's version for the
    built-ins) and a digest of the tokens the family builds
    (:meth:`~sketchsim.sketch.family.Family.digest`).
    """
    from sketchsim.sketch.plugins import file_identity, module_identity

    parts = spec.split(":")
    head = parts[0].strip()
    if head.endswith(".py"):
        source = file_identity(Path(head))
    elif len(parts) >= 2 and parts[1] and "=" not in parts[1]:
        source = module_identity(importlib.import_module(head))
    else:
        match = [f for f in discover_families() if f.name == head and f.family is not None]
        source = match[0].identity if match and match[0].identity else _builtin_identity()
    try:
        tokens = family.digest()[:32]
    except FamilyError:  # the run reports the plug-in's bad tokens itself, on its inputs
        tokens = "unbuildable"
    return f"{source} tokens:{tokens}"


def _builtin_identity() -> str:
    from sketchsim import __version__

    return f"sketchsim {__version__}"


def supports(protocol, family_name: str) -> bool:
    """Whether ``protocol`` declares ``family_name`` (protocols default to ``hard``)."""
    return family_name in tuple(getattr(protocol, "families", ("hard",)))


def plain_options(options: dict | None) -> dict:
    """A family's options as JSON records them (keys sorted, values JSON types)."""
    import json

    return json.loads(json.dumps(options or {}, sort_keys=True, default=str))


def family_label(family) -> str:
    """A family as results name it: its name, the options that differ from its defaults at
    its size (``mqar:pairs=6``; ``mqar`` with every option at its default) and a seed
    other than 0 (``hard seed 3``).  Two families with one label build the same inputs;
    summaries group rows by it."""
    plain = plain_options
    opts = plain(family.options())
    try:
        default = plain(make_family(family.name, family.q, family.s, family.seed).options())
    except SketchsimError:
        default = {}
    differ = {k: v for k, v in sorted(opts.items()) if default.get(k, object()) != v}
    text = family.name
    if differ:
        text += ":" + ",".join(
            f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in differ.items()
        )
    return text + (f" seed {family.seed}" if family.seed else "")


def make_family(name: str, q: int, s: int, seed: int = 0, options: dict | None = None):
    """The family ``name`` (``hard``, ``mqar``, a plug-in) of size ``(q, s)``."""
    ftype, params, _ = resolve_family(name)
    return ftype.make(q, s, seed, {**params, **(options or {})})
