"""``sketchsim protocols`` and ``sketchsim families``: every plug-in found, and why one
that failed to load did."""

from __future__ import annotations

from rich.table import Table

__all__ = ["show_protocols", "show_families"]


def show_protocols(console, found) -> None:
    """Protocols of :func:`sketchsim.sketch.plugins.discover`: name, source, parameters."""
    table = Table(title="sketch protocols")
    for col in ("name", "source", "description", "parameters"):
        table.add_column(col)
    for item in found:
        if item.protocol is None:
            table.add_row(item.name, item.source, f"[red]{item.error}[/red]", "")
            continue
        params = ", ".join(p.describe() for p in item.protocol.params) or "-"
        table.add_row(item.name, item.source, item.protocol.description, params)
    console.print(table)


def show_families(console, found) -> None:
    """Families of :func:`sketchsim.sketch.family_plugins.discover_families`."""
    table = Table(title="input families")
    for col in ("name", "source", "description", "parameters", "default protocols"):
        table.add_column(col)
    for item in found:
        if item.family is None:
            table.add_row(item.name, item.source, f"[red]{item.error}[/red]", "", "")
            continue
        fam = item.family
        params = ", ".join(p.describe() for p in fam.params) or "-"
        table.add_row(
            item.name, item.source, fam.description, params, ", ".join(fam.default_protocols)
        )
    console.print(table)
