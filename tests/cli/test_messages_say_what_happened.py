"""Issue #60 case 6, "misleading words": every message says what actually happened.

One test per finding of the audit: the frontier's notes claimed "decoded" for a cell
that was only decodable; a range below a parameter's minimum was clipped silently;
``--train-noise`` blamed a ``--train-bits`` nobody gave; ``mqar:pairs=HUGE`` spoke of
keys; a symlink loop was "no such file"; a file name's line break split a message.
"""

import json
import os
import types

import pytest
from click.testing import CliRunner
from cliutil import assert_error_line
from rich.console import Console

from sketchsim.cli import main
from sketchsim.errors import FamilyError, SketchsimError, one_line, printable
from sketchsim.sketch import HardFamily, Param
from sketchsim.sketch.frontier import Vary, check_range, frontier_cell
from sketchsim.sketch.mqar import MQARFamily
from sketchsim.sketch.plugins import resolve_spec


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def _words(text: str) -> str:
    return " ".join(text.split())


# 1 -------------------------------------------------------------------------------------


def test_a_cell_decodable_but_never_decoded_is_not_called_decoded(tmp_path):
    """kernel at q = 4, s = 1: 2 bits make the transcripts decodable, but its readout
    needs 3 (the count register holds 0..5); the note said "the decoded value is correct
    on every input" under a decoded "none"."""
    out = tmp_path / "f.json"
    res = run("frontier", "--protocol", "kernel", "--vary", "bits=1..2", "--q", 4, "--s", 1,
              "--quiet", "--json", out)  # fmt: skip
    assert res.exit_code == 0, res.output
    (cell,) = json.loads(out.read_text())["cells"]
    assert (cell["found"], cell["decodable_value"], cell["mode"]) == (False, 2, "exhaustive")
    words = _words(res.output)
    assert "proved: decodable" in words and "proved: decodable: every input" in words
    assert "the decodable value's transcripts separate every two answer vectors" in words
    assert "no value in the range is decoded" in words
    # nothing claims the readout right on every input: no value was decoded
    assert "right on every input, and" not in words and "correct on every input" not in words

    from sketchsim.runs.frontier import FrontierRun
    from sketchsim.sketch.frontier import parse_vary

    run_ = FrontierRun(parse_vary("bits=1..2"), [cell])
    (verdict,) = run_.verdicts()
    assert (verdict.verdict, verdict.shows) == ("proved", "decodable")
    assert run_.notes().kinds == {("proved", "decodable")}
    decoded = {**cell, "found": True, "value": 2}
    assert FrontierRun(None, [decoded]).verdicts()[0].shows == "decoded"
    neither = {**cell, "decodable_found": False, "decodable_value": None}
    (none,) = FrontierRun(None, [neither]).verdicts()
    assert (none.verdict, none.shows) == ("none", "neither")

    # sampled alike, and each row stays one line at 120 columns with a long spec
    from sketchsim.tables.frontier import show_frontier

    sampled = {**cell, "mode": "sampled", "inputs": 400, "spec": "kernel:values=blocks,r=2"}
    console = Console(width=120, record=True, force_terminal=False, color_system=None)
    show_frontier(console, FrontierRun(parse_vary("bits=1..2"), [cell, sampled]))
    text = console.export_text()
    rows = [ln.rstrip() for ln in text.splitlines() if ln.startswith(" 4 1 kernel")]
    assert len(rows) == 2, text
    assert rows[0].endswith(" proved: decodable") and rows[1].endswith(" not refuted: decodable")
    words = _words(text)
    assert "not refuted: decodable: the decodable value shows no collision" in words
    assert "a decoded value is correct on the 400 sampled inputs" in words


# 2 -------------------------------------------------------------------------------------


def test_a_range_is_searched_as_given_or_refused():
    """``--vary bits=0..4`` started at 1 while the title and the file said 0..4."""
    res = run("frontier", "--vary", "bits=0..4", "--q", 2, "--s", 1)
    assert_error_line(res, "bits must be 1..62; the range bits=0..4 holds 0")
    assert "--vary" in res.output
    res = run("frontier", "--vary", "bits=60..63", "--q", 2, "--s", 1)
    assert_error_line(res, "bits must be 1..62; the range bits=60..63 holds 63")
    res = run("frontier", "--protocol", "kv-sum", "--family", "mqar", "--vary", "drop=-1..2",
              "--q", 2, "--s", 1)  # fmt: skip
    assert_error_line(res, "drop must be >= 0; the range drop=-1..2 holds -1")

    fam = HardFamily(2, 1)
    proto, params, source = resolve_spec("kernel")
    with pytest.raises(SketchsimError, match="bits must be 1..62"):
        frontier_cell(fam, proto, params, Vary("bits", 0, 4), "kernel", source)
    cell = frontier_cell(fam, proto, params, Vary("bits", 3, 4), "kernel", source, search="scan")
    assert sorted(cell.evaluated) == ["3", "4"]  # the range as given, nothing else

    # an integer parameter with choices: every value of the range must be one of them
    k = Param("k", "int", 2, "a power of two", choices=(1, 2, 4))
    proto = types.SimpleNamespace(name="pow2", params=(k,))
    check_range(Vary("k", 1, 2), proto)
    with pytest.raises(SketchsimError, match="k must be one of 1, 2, 4; the range k=1..4 holds 3"):
        check_range(Vary("k", 1, 4), proto)
    with pytest.raises(SketchsimError, match="above its maximum"):
        Param("b", "int", 9, maximum=8)


# 3 -------------------------------------------------------------------------------------


def test_train_noise_says_what_is_wrong():
    """``sweep --suite witness --train-noise 4`` said "not with train_bits" when no
    --train-bits was given."""
    res = run("sweep", "--suite", "witness", "--train-noise", 4)
    assert_error_line(res, "capacity suite's one-layer causal models")
    assert "train_bits" not in res.output and "train-bits" not in res.output
    res = run("sweep", "--suite", "capacity", "--arch", "gla", "--train-noise", 4,
              "--train-bits", 3)  # fmt: skip
    assert_error_line(res, "does not combine with train_bits")
    res = run("sweep", "--suite", "capacity", "--train-noise", 4)
    assert_error_line(res, "one-layer causal architectures")
    assert "train_bits" not in res.output


# 4 -------------------------------------------------------------------------------------


def test_mqar_pairs_too_large_names_pairs_and_its_limit():
    """``mqar:pairs=1000000000`` was refused as "keys=1000000000 exceeds the limit"."""
    res = run("frontier", "--family", "mqar:pairs=1000000000", "--protocol", "kv-sum",
              "--vary", "drop=0..1", "--q", 2, "--s", 1)  # fmt: skip
    assert_error_line(res, "pairs must be <= 65536, got 1000000000")
    assert "keys" not in res.output
    with pytest.raises(FamilyError, match=r"mqar pairs=1000000000 is too large: at most 65536"):
        MQARFamily(2, 1, pairs=10**9)
    with pytest.raises(FamilyError, match=r"mqar keys=70000 is too large: at most 65536"):
        MQARFamily(2, 1, keys=70_000)
    with pytest.raises(FamilyError, match=r"mqar q=70000 is too large"):
        MQARFamily(70_000, 1)
    assert MQARFamily(2, 1, pairs=3).keys == 3  # within the limit: as before


# 5 -------------------------------------------------------------------------------------


def test_a_symlink_loop_is_not_called_missing(tmp_path, monkeypatch):
    """``trained:weights=loop.npz`` with loop.npz -> loop.npz was "no such file"."""
    monkeypatch.chdir(tmp_path)
    for name in ("loop.npz", "loop.py", "loop.json"):
        os.symlink(name, name)
    os.symlink("gone.npz", "dangling.npz")
    loop = "is a symlink loop, or goes through one: it cannot be resolved"
    res = run("transcript", "--q", 2, "--s", 1, "--quiet", "--protocol", "trained:weights=loop.npz")
    assert_error_line(res, f"weights file loop.npz: {loop}", only_line=False)
    assert "no such file" not in res.output
    res = run("transcript", "--q", 2, "--s", 1, "--quiet", "--protocol",
              "trained:weights=dangling.npz")  # fmt: skip
    assert_error_line(res, "is a symlink to gone.npz, which does not exist", only_line=False)
    res = run("transcript", "--q", 2, "--s", 1, "--quiet", "--protocol", "trained:weights=no.npz")
    assert_error_line(res, "weights file no.npz: no such file", only_line=False)
    # the other readers of a user's file: a plug-in file, a family file, a resumed result
    res = run("transcript", "--q", 2, "--s", 1, "--quiet", "--protocol", "loop.py:X")
    assert_error_line(res, f"protocol file loop.py {loop}", only_line=False)
    assert_error_line(run("certify", "loop.npz"), f"family file loop.npz {loop}")
    res = run("frontier", "--vary", "bits=2..3", "--q", 2, "--s", 1, "--quiet",
              "--json", "loop.json", "--resume")  # fmt: skip
    assert_error_line(res, f"cannot resume from loop.json: it {loop}")
    assert os.path.islink("loop.json")  # not replaced by a new result file


# 6 -------------------------------------------------------------------------------------


def test_names_with_control_characters_stay_on_one_line(tmp_path):
    """A weights file named ``a<newline>b.npz`` split the "unreadable" line in two; an
    ESC in a name went to the terminal as it is."""
    assert printable("a\nb\r\t\x1b[31m\x00\x7f\u2028\u202e\udcff.npz") == (
        "a\\nb\\r\\t\\x1b[31m\\x00\\x7f\\u2028\\u202e\\udcff.npz"
    )
    assert printable("café w.npz") == "café w.npz"
    assert one_line("one\n  two\tthree \x1b[2J") == "one two three \\x1b[2J"

    from sketchsim.tables.capacity import show_capacity

    names = ["a\nb.npz", "c\x1b[31md.npz", "[red]e.npz"]
    result = {
        "rows": [],
        "frontier": [],
        "references": [],
        "unreadable": [
            {"weights": n, "reason": f"weights file w/{n}: not a readable .npz (BadZipFile)"}
            for n in names
        ],
    }
    console = Console(record=True, width=200, force_terminal=False)
    show_capacity(console, result)
    text = console.export_text()
    lines = [ln for ln in text.splitlines() if ln.startswith("unreadable:")]
    assert lines == [
        "unreadable: a\\nb.npz: weights file w/a\\nb.npz: not a readable .npz (BadZipFile)",
        "unreadable: c\\x1b[31md.npz: weights file w/c\\x1b[31md.npz: not a readable .npz "
        "(BadZipFile)",
        "unreadable: [red]e.npz: weights file w/[red]e.npz: not a readable .npz (BadZipFile)",
    ]
    assert "\x1b" not in text
    rows = [ln for ln in text.splitlines() if "unreadable" in ln and not ln.startswith("unr")]
    assert len(rows) == 3 and "a\\nb.npz" in rows[0]  # one table line per file

    # the CLI's error line: one line, the ESC escaped, whatever built the message
    folder = tmp_path / "w"
    folder.mkdir()
    (folder / "c\x1b[31md\n.npz").write_bytes(b"not a weights file")
    res = run("capacity", folder)
    assert_error_line(res, "c\\x1b[31md")
    assert "\x1b" not in res.output
    # a name a message puts through printable shows its line break as \n
    res = run("transcript", "--q", 2, "--s", 1, "--quiet", "--protocol",
              f"trained:weights={tmp_path}/x\ny.npz")  # fmt: skip
    assert_error_line(res, "x\\ny.npz: no such file", only_line=False)
