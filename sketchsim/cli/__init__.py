"""Command-line interface: thin click commands that parse, call the library, render.

One module per command group; ``render`` holds every rich call, ``app`` the group
and its one-line error contract.
"""

from sketchsim.cli import certify, experiments, frontier, transcript, verify  # noqa: F401,E402  (register)
from sketchsim.cli import minrank  # noqa: F401,E402  (register)
from sketchsim.cli.app import main

__all__ = ["main"]
