"""Names a package re-exports from its modules, imported on first use (PEP 562)."""

from __future__ import annotations

import importlib

__all__ = ["lazy_exports"]


def lazy_exports(package: str, namespace: dict, table: dict[str, str]):
    """``(__getattr__, __dir__)`` for a package that re-exports ``table``'s names lazily.

    ``table`` maps a name to the module that defines it; the first access imports
    that module and caches the value in ``namespace`` (the package's globals).
    """

    def __getattr__(name):
        if name in table:
            value = getattr(importlib.import_module(table[name]), name)
            namespace[name] = value
            return value
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__():
        return sorted(set(namespace) | set(table))

    return __getattr__, __dir__
