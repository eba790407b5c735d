"""The main tables stay readable at 120 columns: one line per row (issue #33).

Short verdicts go in the cells and their explanation once under the table; the
frontier's verdict cell used to wrap into 10 lines at 200 columns.
"""

from __future__ import annotations

import pytest
from rich.console import Console

from sketchsim import api
from sketchsim.cli import render

WIDTH = 120


@pytest.fixture
def narrow(monkeypatch):
    """A console at 120 columns, recording what it prints (also the CLI's)."""
    console = Console(width=WIDTH, record=True, force_terminal=False, color_system=None)
    monkeypatch.setattr(render, "console", console)
    return console


def _body(text: str) -> list[str]:
    """The table's row lines: after the header rule, up to the first blank line."""
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if set(ln.strip()) == {"─"})
    body = []
    for ln in lines[start + 1 :]:
        if not ln.strip():
            break
        body.append(ln)
    return body


def _check(text: str, names: list[str]) -> None:
    assert max(map(len, text.splitlines())) <= WIDTH
    body = _body(text)
    assert len(body) == len(names), "\n".join(body)  # one line per row
    for line, name in zip(body, names, strict=True):
        assert name in line, line


# the widest numbers (raw's 29,640 declared bits at q = 64) and the longest default name
SPECS = ["raw", "clipped-counts", "kernel:values=blocks,bits=7", "block-counts"]


@pytest.mark.parametrize(
    ("q", "s", "exhaustive", "samples"), [(64, 7, False, 300), (3, 3, True, 0)]
)
def test_the_transcript_table_has_one_line_per_protocol(narrow, q, s, exhaustive, samples):
    from sketchsim.tables.transcript import show_transcript

    run = api.transcript(q=q, s=s, protocols=SPECS, exhaustive=exhaustive, samples=samples or 1)
    show_transcript(narrow, run)
    text = narrow.export_text()
    _check(text, SPECS)
    if not exhaustive:  # the long explanation once, under the table
        words = " ".join(text.split())
        assert words.count("collision check reach") == 1
        assert "not refuted" in words and "cannot be correct on this distribution" in words


def test_the_frontier_table_has_one_line_per_cell(narrow):
    from sketchsim.runs.frontier import FrontierRun
    from sketchsim.sketch.frontier import parse_vary
    from sketchsim.tables.frontier import show_frontier

    vary = parse_vary("bits=1..8")
    cells = [
        api.frontier("kernel", "bits=1..8", q=2, s=3).to_dict(),
        api.frontier("kernel:values=blocks,r=2", "bits=1..8", q=8, s=7, samples=400).to_dict(),
    ]
    assert [c["mode"] for c in cells] == ["exhaustive", "sampled"]
    show_frontier(narrow, FrontierRun(vary, cells))
    text = narrow.export_text()
    _check(text, ["kernel", "kernel:values=blocks,r=2"])
    body = _body(text)
    assert body[0].rstrip().endswith("proved") and body[1].rstrip().endswith("not refuted")
    assert " ".join(text.split()).count("error rate <") == 1  # explained once, not per cell
