"""Options that a run would not use are refused, not ignored (issue #33).

A command calls :func:`refuse_unused` with the parameters its chosen path
reads; any other option given on the command line is one error line (exit 2)
saying when it applies.
"""

from __future__ import annotations

import click

from sketchsim.errors import SketchsimError

__all__ = ["given", "refuse_unused"]


def given(name: str, ctx: click.Context | None = None) -> bool:
    """Whether parameter ``name`` was set on the command line (or the environment)."""
    ctx = ctx or click.get_current_context()
    source = ctx.get_parameter_source(name)
    return source in (
        click.core.ParameterSource.COMMANDLINE,
        click.core.ParameterSource.ENVIRONMENT,
    )


def refuse_unused(used, when: dict[str, str], ctx: click.Context | None = None) -> None:
    """Refuse every option given but not in ``used``.

    Parameters
    ----------
    used : iterable of str
        Parameter names (click's) the chosen path reads.
    when : dict
        Parameter name -> when it applies ("with --screen-maps"), for the message.
    """
    ctx = ctx or click.get_current_context()
    used = set(used)
    for param in ctx.command.params:
        if param.name in used or param.name not in when or not given(param.name, ctx):
            continue
        flag = max(param.opts, key=len)
        raise SketchsimError(f"{flag} applies only {when[param.name]}; this run would ignore it")
