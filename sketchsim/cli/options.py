"""Options that a run would not use are refused, not ignored (issue #33).

A command calls :func:`refuse_unused` with the parameters its chosen path
reads; any other option given on the command line is one error line (exit 2)
saying when it applies.  Comma-separated option values are split by
:func:`split_list` and :func:`parse_list`, which refuse an empty item (#47).
"""

from __future__ import annotations

import dataclasses

import click

from sketchsim.errors import SketchsimError

__all__ = ["given", "refuse_unused", "split_list", "parse_list"]


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


def split_list(text: str, flag: str) -> list[str]:
    """The items of a comma-separated option value, stripped; none may be empty.

    Parameters
    ----------
    text : str
        The value given (``"4,8,16"``).
    flag : str
        The option, for the message (``"--q"``).

    Raises
    ------
    SketchsimError
        For an empty value or an empty item (``4,,8``, ``4,``, ``,4``).
    """
    items = [item.strip() for item in text.split(",")]
    if not all(items):
        what = "is empty" if len(items) == 1 else f"has an empty item in {text!r}"
        raise SketchsimError(f"{flag} {what}: give comma-separated values")
    return items


def split_specs(text: str, flag: str) -> list[str]:
    """The specs of a comma-separated list whose specs may hold ``name=value`` parameters
    after a colon: ``hard,mqar:pairs=8,keys=16`` -> ``["hard", "mqar:pairs=8,keys=16"]``
    (an item ``name=value`` continues the spec before it).

    Raises
    ------
    SketchsimError
        As :func:`split_list`, or for a parameter with no spec before it.
    """
    specs: list[str] = []
    for item in split_list(text, flag):
        continues = "=" in item and ":" not in item
        if continues and not (specs and ":" in specs[-1]):
            raise SketchsimError(f"{flag}: {item!r} is a parameter with no NAME: before it")
        if continues:
            specs[-1] += "," + item
        else:
            specs.append(item)
    return specs


def parse_list(text: str, convert, flag: str, what: str) -> list:
    """:func:`split_list`'s items converted by ``convert`` (``int``, ``float``).

    Raises
    ------
    SketchsimError
        For an empty item, or one ``convert`` refuses (the message names
        ``flag``, the values expected, ``what``, and ``text``).
    """
    items = split_list(text, flag)
    try:
        return [convert(item) for item in items]
    except (ValueError, OverflowError):
        raise SketchsimError(f"{flag} must be comma-separated {what}, got {text!r}") from None


def json_option(help: str = "Write the result here.", suffixes: tuple[str, ...] = ()):
    """``--json PATH`` (``json_path``), checked writable before the run (one declaration)."""
    from sketchsim.cli.paths import OutputPath

    return click.option("--json", "json_path", type=OutputPath(suffixes), help=help)


def resume_option(help: str = "Keep what --json already holds; measure the rest."):
    """``--resume``: a flag, checked with :func:`check_resume` (it needs ``--json``)."""
    return click.option("--resume", is_flag=True, help=help)


def quiet_option(func):
    """``--quiet``: no progress bar."""
    return click.option("--quiet", is_flag=True, help="No progress bar.")(func)


def protocol_option(default: tuple[str, ...] = (), more: str = ""):
    """``--protocol`` (``specs``), repeatable: built-in, file or module protocols."""
    return click.option(
        "--protocol",
        "specs",
        multiple=True,
        default=default,
        show_default=bool(default),
        help="NAME[:k=v,...], path/file.py:NAME[:...] or pkg.module:NAME[:...]; repeatable." + more,
    )


def family_option(func):
    """``--family`` (``family_spec``): the input family, built-in or a plug-in."""
    return click.option(
        "--family",
        "family_spec",
        default="hard",
        show_default=True,
        help="Input family: NAME[:k=v,...], path/file.py:NAME or pkg.module:NAME "
        "(see `sketchsim families`).",
    )(func)


def samples_option(default: int, help: str):
    """``--samples``: inputs drawn when the family is too large to enumerate."""
    return click.option("--samples", type=int, default=default, show_default=True, help=help)


def seed_option(func):
    """``--seed``: the family's bit layout and the sample (every random choice)."""
    return click.option(
        "--seed", type=int, default=0, show_default=True, help="Bit layout and sampling."
    )(func)


def plan_default(plan_type, name: str, joined: bool = False):
    """The default of field ``name`` of the run object ``plan_type`` (``TranscriptPlan``...):
    defaults are written once, there, and read by the CLI and the API; ``joined``: a
    sequence as the comma list its option parses."""
    value = next(f.default for f in dataclasses.fields(plan_type) if f.name == name)
    return ",".join(map(str, value)) if joined else value


def check_resume(resume: bool, json_path) -> None:
    """The one refusal of ``--resume`` without ``--json`` (the file it resumes from)."""
    if resume and not json_path:
        raise click.UsageError("--resume needs --json PATH (the file to resume from)")
