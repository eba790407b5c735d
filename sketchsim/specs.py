"""Plug-in specs shared by protocols and families: ``NAME[:k=v,...]`` parameters, lookup."""

from __future__ import annotations

from sketchsim.errors import SketchsimError

__all__ = ["parse_params", "pick"]


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
