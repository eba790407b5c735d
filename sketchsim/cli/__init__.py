"""Command-line interface: thin click commands that parse, call the library, render.

One module per command group; ``render`` holds every rich call, ``app`` the group
and its one-line error contract.
"""

from sketchsim.cli import (  # noqa: F401,E402  (register)
    certify,
    experiments,
    frontier,
    minrank,
    transcript,
    verify,
)
from sketchsim.cli.app import main

__all__ = ["main"]
