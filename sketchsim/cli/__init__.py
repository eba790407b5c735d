"""Command-line interface: thin click commands that parse, call the library, render.

One module per command group; ``render`` holds every rich call, ``app`` the group,
its lazily loaded command table and its one-line error contract.
"""

from sketchsim.cli.app import main  # commands load on first use (see app.COMMANDS)

__all__ = ["main"]
