"""Command-line interface: thin click commands that parse, call the library, render.

One module per command group, each building its own rich tables; ``render`` holds
the shared consoles, progress bars and verdict colours, ``app`` the group, its
lazily loaded command table and its one-line error contract.
"""

from sketchsim.cli.app import main  # commands load on first use (see app.COMMANDS)

__all__ = ["main"]
