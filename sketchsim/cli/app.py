"""The ``sketchsim`` click group and its error contract: one line on stderr, exit 2.

Commands are loaded lazily: :data:`COMMANDS` names the module under
``sketchsim.cli`` that defines each one, and ``sketchsim --help`` prints their
one-line help from :data:`SHORT_HELP` without importing any of them (nor rich,
NumPy or numba); ``tests/cli/test_cli.py`` checks both tables against the
commands the modules define.
"""

from __future__ import annotations

import importlib
import sys

import click

import sketchsim
from sketchsim.errors import SketchsimError, one_line, printable

#: Command name -> module of ``sketchsim.cli`` that registers it on :data:`main`.
COMMANDS = {
    "ablation": "ablation",
    "audit": "experiments",
    "bound": "certify",
    "capacity": "capacity",
    "certify": "certify",
    "check-certificate": "certify",
    "codes": "certify",
    "families": "frontier",
    "frontier": "frontier",
    "info": "info",
    "minrank": "minrank",
    "protocols": "transcript",
    "prove": "prove",
    "check-proof": "prove",
    "reproduce": "experiments",
    "sweep": "experiments",
    "transcript": "transcript",
    "verify": "verify",
    "witness": "certify",
}

#: The first paragraph of each command's help, for the command list of ``--help``.
SHORT_HELP = {
    "ablation": "The softmax ablation on the witness family, or a validation screen (torch extra).",
    "audit": "Bits of attention state each trained head uses (heads kept by sweep --save-weights).",
    "bound": "Best certified rank bound per m, its growth, the 2^m endpoint and softmax "
    "temperatures.",
    "capacity": "Smallest bits per state coordinate at which each saved model decodes every input.",
    "certify": "Certified lower bound on the feature rank r for a length-3 family file.",
    "check-certificate": "Re-verify a certificate file with exact rationals; print the bound it "
    "proves.",
    "codes": "Build a constant-weight code and print its size, weight and minimum distance.",
    "families": "List every input family found: built-ins, installed plug-ins.",
    "frontier": "Smallest parameter value decoded and decodable per (q, s), against the bound.",
    "info": "Versions, CPU kernels, numba cache and devices: paste this into a bug report.",
    "minrank": "Bracket the smallest feature rank of one table head on all of ({0,1}^m)^3.",
    "protocols": "List every protocol found: built-ins, installed plug-ins.",
    "prove": "Prove or refute that a causal weights file answers every input of its family right.",
    "check-proof": "Re-verify a proof file leaf by leaf with the standard library; exit 2 when "
    "invalid.",
    "reproduce": "Run the whole story and put the paper's numbers beside ours.",
    "sweep": "Train heads over feature ranks and seeds; compare with the certified bound.",
    "transcript": "Measure transcript bits of sketch protocols against the bound q*log2(s+1).",
    "verify": "Check a construction on every one of the 2^(m*n) inputs.",
    "witness": "Build a length-3 witness family from a code and certify it.",
}


def load_all_commands() -> None:
    """Import every command module (registers all commands on :data:`main`)."""
    for module in sorted(set(COMMANDS.values())):
        importlib.import_module(f"sketchsim.cli.{module}")


class SketchsimGroup(click.Group):
    """A click group whose errors are one line on stderr with exit code 2."""

    @property
    def command_class(self):  # commands check their output paths (imported when defined)
        from sketchsim.cli.paths import CheckedCommand

        return CheckedCommand

    def list_commands(self, ctx):
        return sorted(set(COMMANDS) | set(self.commands))

    def get_command(self, ctx, cmd_name):
        if cmd_name not in self.commands:
            if cmd_name in COMMANDS:
                importlib.import_module(f"sketchsim.cli.{COMMANDS[cmd_name]}")
            else:  # a command added to a module but not to COMMANDS yet
                load_all_commands()
        return self.commands.get(cmd_name)

    def format_commands(self, ctx, formatter):
        """The command list; commands not loaded yet are described from SHORT_HELP."""
        names = self.list_commands(ctx)
        if not names:
            return
        limit = formatter.width - 6 - max(len(n) for n in names)
        rows = []
        for name in names:
            cmd = self.commands.get(name)
            if cmd is None and name not in SHORT_HELP:
                cmd = self.get_command(ctx, name)
            if cmd is not None and cmd.hidden:
                continue
            if cmd is not None:
                text = cmd.get_short_help_str(limit)
            else:
                text = click.utils.make_default_short_help(SHORT_HELP[name], limit)
            rows.append((name, text))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def main(self, args=None, prog_name=None, **extra):
        extra.pop("standalone_mode", None)
        try:
            rv = super().main(args=args, prog_name=prog_name, standalone_mode=False, **extra)
        except click.exceptions.Exit as exc:
            sys.exit(exc.exit_code)
        except click.exceptions.Abort:
            from sketchsim.cli import render

            render.err_console.print("aborted")
            sys.exit(1)
        except click.ClickException as exc:
            _fail(exc.format_message())
        except SketchsimError as exc:
            _fail(flag_message(exc))
        except OverflowError as exc:
            _fail(f"a size is too large for this machine's integers ({exc})")
        except MemoryError:
            _fail("out of memory; choose smaller sizes (the size checks did not foresee this)")
        except OSError as exc:
            where = f" ({printable(exc.filename)})" if getattr(exc, "filename", None) else ""
            _fail(f"{exc.strerror or exc}{where}")
        sys.exit(rv if isinstance(rv, int) else 0)


def flag_message(exc: SketchsimError) -> str:
    """The error's message with its library parameter named as the flag that sets it."""
    message, param = str(exc), getattr(exc, "param", None)
    message = message.replace("pass allow_large", "pass --allow-large")
    if not param:
        return message
    flag = getattr(exc, "flag", "--" + param.replace("_", "-"))
    if flag is None:  # a parameter of a plug-in or of a file, not an option of the command
        return message
    if message.startswith(param + " ") or message.startswith(param + ":"):
        return flag + message[len(param) :]
    return f"{message} ({flag})"


def _fail(message: str) -> None:
    # one line: line breaks joined, control characters (a file name's ESC, NUL) escaped
    click.echo(f"error: {one_line(message)}", err=True)
    sys.exit(2)


@click.group(cls=SketchsimGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(sketchsim.__version__, prog_name="sketchsim")
def main():
    """Sketch simulator for kernel attention on Boolean Min-IP.

    Exhaustive checks of attention constructions, transcript-bit measurements of
    multilayer sketch protocols, and certified feature-rank bounds.
    """
