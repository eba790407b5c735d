"""``sketchsim info``: the machine's facts as one two-column table."""

from __future__ import annotations

from rich.table import Table

__all__ = ["show_info"]


def show_info(console, facts: dict) -> None:
    """The facts of :func:`sketchsim.runs.info.facts`, one row each."""
    m, nb, tc = facts["machine"], facts["machine"]["numba"], facts["machine"]["torch"]
    table = Table(title="sketchsim info", show_header=False)
    table.add_column("what", style="bold")
    table.add_column("value")
    for name, value in facts["versions"].items():
        table.add_row(name, str(value or "not installed"))
    table.add_row(
        "cpu", f"{m['cpu']} ({m['machine']}, {m.get('usable_cpus', m['cpu_count'])} usable)"
    )
    table.add_row("numba target cpu", f"{nb['target_cpu']}, {nb['threads']} threads")
    writable = "writable" if nb["cache_writable"] else "[red]not writable[/red]"
    table.add_row("numba cache", f"{nb['cache_dir'] or 'off'} ({nb['cache_source']}, {writable})")
    table.add_row("engine cache", str(facts["engine_cache_dir"] or "off (not writable)"))
    if tc["installed"]:
        device = f"cuda: {tc['cuda_device']}" if tc["cuda"] else "cpu (no CUDA)"
        table.add_row("torch cpu capability", f"{tc['cpu_capability']}, {tc['threads']} threads")
        table.add_row("torch device", device)
    else:
        table.add_row("torch", "not installed (pip install 'sketchsim[torch]')")
    cl = facts["cluster"]
    table.add_row(
        "cluster extra",
        f"dask {cl['dask']}, distributed {cl['distributed']}"
        if cl["importable"]
        else "not installed",
    )
    for key, value in m["env"].items():
        table.add_row(f"${key}", value)
    console.print(table)
