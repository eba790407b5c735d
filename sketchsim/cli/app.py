"""The ``sketchsim`` click group and its error contract: one line on stderr, exit 2."""

from __future__ import annotations

import sys

import click

import sketchsim
from sketchsim.cli import render
from sketchsim.cli.paths import CheckedCommand
from sketchsim.errors import SketchsimError


class SketchsimGroup(click.Group):
    """A click group whose errors are one line on stderr with exit code 2."""

    command_class = CheckedCommand

    def main(self, args=None, prog_name=None, **extra):
        extra.pop("standalone_mode", None)
        try:
            rv = super().main(args=args, prog_name=prog_name, standalone_mode=False, **extra)
        except click.exceptions.Exit as exc:
            sys.exit(exc.exit_code)
        except click.exceptions.Abort:
            render.err_console.print("aborted")
            sys.exit(1)
        except click.ClickException as exc:
            _fail(exc.format_message())
        except SketchsimError as exc:
            _fail(str(exc))
        except OverflowError as exc:
            _fail(f"a size is too large for this machine's integers ({exc})")
        except MemoryError:
            _fail("out of memory; choose smaller sizes (the size checks did not foresee this)")
        except OSError as exc:
            where = f" ({exc.filename})" if getattr(exc, "filename", None) else ""
            _fail(f"{exc.strerror or exc}{where}")
        sys.exit(rv if isinstance(rv, int) else 0)


def _fail(message: str) -> None:
    message = " ".join(str(message).split())
    click.echo(f"error: {message}", err=True)
    sys.exit(2)


@click.group(cls=SketchsimGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(sketchsim.__version__, prog_name="sketchsim")
def main():
    """Sketch simulator for kernel attention on Boolean Min-IP.

    Exhaustive checks of attention constructions, transcript-bit measurements of
    multilayer sketch protocols, and certified feature-rank bounds.
    """


def _positive(name):
    def check(ctx, param, value):
        if value is not None and value <= 0:
            raise click.BadParameter(f"{name} must be > 0, got {value}", param_hint=f"--{name}")
        return value

    return check
