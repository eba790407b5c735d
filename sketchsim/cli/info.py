"""``sketchsim info``: what a user pastes into a bug report."""

from __future__ import annotations

from sketchsim.cli.app import main
from sketchsim.cli.options import json_option


def _cluster_facts() -> dict:
    from importlib.util import find_spec

    from sketchsim.machine import versions

    out = {"importable": find_spec("distributed") is not None and find_spec("dask") is not None}
    if out["importable"]:
        from importlib.metadata import version

        out["dask"] = version("dask")
        out["distributed"] = version("distributed")
        out["bokeh"] = find_spec("bokeh") is not None
    return {**out, "sketchsim": versions()["sketchsim"]}


@main.command()
@json_option("Write the same facts here.")
def info(json_path):
    """Versions, CPU kernels, numba cache and devices: paste this into a bug report.

    Imports torch and numba (a few seconds) to ask them which kernels they chose
    on this CPU: torch's CPU capability (``ATEN_CPU_CAPABILITY`` lowers it),
    numba's target CPU (``NUMBA_CPU_NAME``), and where numba caches compiled
    kernels (``NUMBA_CACHE_DIR``) and whether that folder is writable.
    """
    from rich.table import Table

    from sketchsim.cli import render
    from sketchsim.machine import machine_facts, versions
    from sketchsim.sketch.engine_cache import cache_dir

    facts = {
        "versions": versions(loaded_only=False),
        "machine": machine_facts(loaded_only=False, paths=True),
        "engine_cache_dir": str(engines) if (engines := cache_dir()) else None,
        "cluster": _cluster_facts(),
    }
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
    render.console.print(table)
    if json_path:
        from sketchsim.results import write_json_atomic

        write_json_atomic(json_path, facts)
