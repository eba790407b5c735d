"""Every ``sketchsim ...`` command quoted in docs/*.md parses with today's CLI, and every
command that names a committed ``--json`` file is exactly the command that wrote it.

Running each documented command is what tests/test_readme_examples.py does for the
README (at small sizes); the docs quote about a hundred commands, many of them runs of
minutes, so here each is parsed by click (unknown commands, removed or renamed options
and bad values fail) and, where it names its result file, compared with that file's
recorded ``argv``, so a doc command cannot drift from the run behind its numbers.
Synopses with placeholders (``--m M``, ``[--seed N]``, ``{a,b}``, ``...``) are not
commands and are skipped by :func:`is_command`.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import click
import pytest

from sketchsim.cli import main

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]


def quoted_commands(page: Path) -> set[str]:
    text = page.read_text()
    found = set(re.findall(r"`(sketchsim [^`]*)`", text.replace("\n", " ")))
    found |= {ln.strip() for ln in text.splitlines() if ln.startswith("    sketchsim ")}
    return {" ".join(c.split()) for c in found}


def is_command(cmd: str) -> bool:
    """A runnable command, not a synopsis with placeholders."""
    return not re.search(r"[\[\]{}|]|\.\.\.|\b[A-Z][A-Z0-9_]*\b", cmd)


COMMANDS = sorted(
    {
        (p.relative_to(ROOT).as_posix(), c)
        for p in PAGES
        for c in quoted_commands(p)
        if is_command(c)
    }
)


def test_the_docs_quote_commands():
    assert len(COMMANDS) > 50
    assert any("--json docs/" in c for _, c in COMMANDS)


@pytest.mark.parametrize("page, cmd", COMMANDS, ids=[f"{p}:{c[:60]}" for p, c in COMMANDS])
def test_documented_command_parses(page, cmd, monkeypatch):
    monkeypatch.chdir(ROOT)  # relative paths in the docs are from the repository root
    args = shlex.split(cmd)[1:]
    if args[0] in ("--help", "--version"):
        return
    # the group's own settings: click caches each command's help option, built with the
    # first context's help_option_names (a bare Context would leave later --help output
    # without -h for the rest of the process)
    ctx = click.Context(main, **main.context_settings)
    sub = main.get_command(ctx, args[0])
    assert sub is not None, f"{page}: no command {args[0]!r}"
    rest = args[1:]
    names = {o for p in sub.params for o in getattr(p, "opts", [])}
    if len(rest) <= 1 and all(a.startswith("--") for a in rest):
        # prose naming a command or one of its options (`sketchsim ablation --screen-stop`)
        assert set(rest) <= names, f"{page}: {cmd}: unknown option"
        return
    sub.make_context(args[0], rest, parent=ctx)  # raises on any option click refuses


def _json_argv_pairs():
    for page, cmd in COMMANDS:
        args = shlex.split(cmd)
        if "--json" in args[:-1]:
            path = args[args.index("--json") + 1]
            if path.startswith("docs/") and (ROOT / path).exists():
                if "argv" in json.loads((ROOT / path).read_text()):
                    yield page, cmd, path


PAIRS = sorted(_json_argv_pairs())


def test_some_doc_commands_name_their_result_files():
    assert len(PAIRS) >= 8


#: Result files the docs cite with their command whose format records no ``argv``
#: (sweep files: a code change, reported in issue #33's follow-up).
NO_ARGV = {"docs/witness/softmax_lr_grid.json"}


def test_cited_files_without_argv_are_the_known_ones():
    cited = set()
    for _, cmd in COMMANDS:
        args = shlex.split(cmd)
        if "--json" in args[:-1] and args[args.index("--json") + 1].startswith("docs/"):
            cited.add(args[args.index("--json") + 1])
    missing = {
        p for p in cited if (ROOT / p).exists() and "argv" not in json.loads((ROOT / p).read_text())
    }
    assert missing == NO_ARGV


def _same(doc_arg: str, recorded: str) -> bool:
    # a run that wrote outside the repository records '<outside>/name'; its files were copied in
    return doc_arg == recorded or recorded.startswith("<outside>/")


@pytest.mark.parametrize("page, cmd, path", PAIRS, ids=[p for _, _, p in PAIRS])
def test_documented_command_is_the_one_that_wrote_its_file(page, cmd, path):
    argv = json.loads((ROOT / path).read_text())["argv"]
    assert argv[0] == "sketchsim"
    # --quiet only hides the progress bar
    doc = [a for a in shlex.split(cmd)[1:] if a != "--quiet"]
    rec = [a for a in argv[1:] if a != "--quiet"]
    assert len(doc) == len(rec) and all(map(_same, doc, rec)), (
        f"{page} quotes {cmd!r}; {path} was written by {argv}"
    )
