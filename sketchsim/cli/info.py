"""``sketchsim info``: what a user pastes into a bug report."""

from __future__ import annotations

from sketchsim.cli.app import main
from sketchsim.cli.options import json_option


@main.command()
@json_option("Write the same facts here.")
def info(json_path):
    """Versions, CPU kernels, numba cache and devices: paste this into a bug report.

    Imports torch and numba (a few seconds) to ask them which kernels they chose
    on this CPU: torch's CPU capability (``ATEN_CPU_CAPABILITY`` lowers it),
    numba's target CPU (``NUMBA_CPU_NAME``), and where numba caches compiled
    kernels (``NUMBA_CACHE_DIR``) and whether that folder is writable.
    """
    from sketchsim.cli import render
    from sketchsim.runs.info import run
    from sketchsim.tables.info import show_info

    show_info(render.console, run(json_path))
