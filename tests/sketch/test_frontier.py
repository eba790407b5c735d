"""The bits frontier: bisection agrees with a scan and with direct measurement."""

import json

import pytest
from click.testing import CliRunner
from cliutil import assert_error_line

from sketchsim.cli import main
from sketchsim.errors import SketchsimError
from sketchsim.sketch import HardFamily, Param, Protocol
from sketchsim.sketch.block_counts import block_counts_plan
from sketchsim.sketch.frontier import Vary, frontier_cell, is_monotone, parse_vary
from sketchsim.sketch.measure import measure
from sketchsim.sketch.plugins import resolve_spec


def run(*args):
    return CliRunner().invoke(main, list(args))


def test_parse_vary():
    assert parse_vary("bits=1..16") == Vary("bits", 1, 16)
    assert parse_vary(" r = 2 .. 2 ") == Vary("r", 2, 2)
    for bad in ("bits", "bits=1-16", "bits=5..1", "=1..2", "bits=1..99999999"):
        with pytest.raises(SketchsimError):
            parse_vary(bad)


@pytest.mark.slow
def test_bisection_matches_direct_measurement():
    fam = HardFamily(3, 3, seed=1)
    proto, params, source = resolve_spec("kernel")
    assert is_monotone(proto, "bits", source)
    cell = frontier_cell(fam, proto, params, Vary("bits", 1, 12), "kernel", source)
    assert cell.search == "bisection" and cell.found and cell.mode == "exhaustive"
    T = fam.all_answers()
    correct = {
        b: measure(fam, T, proto, {**params, "bits": b}).wrong_inputs == 0 for b in range(1, 7)
    }
    smallest = min(b for b, ok in correct.items() if ok)
    assert cell.value == smallest
    assert all(correct[b] == (b >= smallest) for b in correct)
    # N = 4 tokens: the register counting every token needs 3 bits (values 0..4)
    assert smallest == 3
    assert cell.declared_bits == pytest.approx(
        proto.plan(fam.context(), {**params, "bits": 3}).layers[0].symbols * 3
    )
    assert cell.declared_ratio == pytest.approx(cell.declared_bits / fam.bound_bits)
    scan = frontier_cell(fam, proto, params, Vary("bits", 1, 6), "kernel", source, search="scan")
    assert scan.value == cell.value and scan.monotone is True
    assert len(scan.evaluated) == 6


def test_not_found_and_fixed():
    fam = HardFamily(3, 3)
    proto, params, source = resolve_spec("kernel")
    cell = frontier_cell(fam, proto, params, Vary("bits", 1, 2), "kernel", source)
    assert not cell.found and cell.value is None and cell.declared_bits is None
    proto, params, source = resolve_spec("block-counts")
    # alone, a parameter it does not have is refused (issue #33), naming its parameters
    with pytest.raises(SketchsimError, match="no protocol has a parameter 'bits'.*block-counts"):
        frontier_cell(fam, proto, params, Vary("bits", 1, 8), "block-counts", source)
    # beside a protocol that has it (fixed=True): measured once
    cell = frontier_cell(fam, proto, params, Vary("bits", 1, 8), "block-counts", source, fixed=True)
    assert cell.search == "fixed" and cell.found and cell.declared_ratio == pytest.approx(1.0)
    assert cell.decodable is True and cell.decodable_reason.startswith("proved: exhaustive")


def test_a_parameter_no_protocol_has_is_refused():
    """`frontier --protocol kernel --vary nope=1..3` ran and printed a row (issue #33)."""
    res = run("frontier", "--protocol", "kernel", "--vary", "nope=1..3", "--q", "4", "--s", "3")
    assert_error_line(res, "--vary: no protocol has a parameter 'nope' (parameters of kernel: ")
    assert "bits" in res.output
    res = run(
        "frontier", "--protocol", "block-counts", "--protocol", "clipped-counts",
        "--vary", "bits=1..2", "--q", "2", "--s", "1",
    )  # fmt: skip
    assert_error_line(res, "block-counts: no parameters; clipped-counts: levels")


def test_sampled_cells_are_not_refuted_not_proved():
    cell = frontier_cell(
        HardFamily(8, 7), *resolve_spec("kernel")[:2], Vary("bits", 1, 4), "kernel", samples=500
    )
    assert cell.mode == "sampled" and cell.decodable is None
    assert cell.decodable_reason.startswith("not refuted (500 sampled inputs, collision check")
    assert (
        None in cell.evaluated_decodable.values() and True not in cell.evaluated_decodable.values()
    )


def _setup_even(ctx, params):
    # correct exactly when k is even: a non-monotone parameter
    return block_counts_plan(ctx, ctx.s + 1 if params["k"] % 2 == 0 else ctx.s)


EVEN = Protocol(
    "even",
    "block counts, clipped when k is odd",
    _setup_even,
    params=(Param("k", "int", 0, "parity decides"),),
)


@pytest.mark.slow
def test_non_monotone_parameter_is_scanned():
    fam = HardFamily(2, 3)
    cell = frontier_cell(fam, EVEN, EVEN.defaults(), Vary("k", 1, 5), "even")
    assert cell.search == "scan" and cell.value == 2 and cell.monotone is False
    assert cell.evaluated == {
        "1": pytest.approx(cell.evaluated["1"]),
        "2": 1.0,
        "3": cell.evaluated["3"],
        "4": 1.0,
        "5": cell.evaluated["5"],
    }
    assert cell.evaluated["1"] < 1.0


def test_cli_frontier_table_json_plot_resume(tmp_path):
    out, png = tmp_path / "f.json", tmp_path / "f.png"
    args = [
        "frontier",
        "--protocol",
        "kernel",
        "--protocol",
        "block-counts",
        "--vary",
        "bits=1..8",
        "--q",
        "2,3",
        "--s",
        "1,3",
        "--quiet",
        "--json",
        str(out),
        "--plot",
        str(png),
    ]
    res = run(*args)
    assert res.exit_code == 0, res.output
    assert "bits frontier" in res.output and png.stat().st_size > 1000
    data = json.loads(out.read_text())
    assert data["complete"] and len(data["cells"]) == 8
    kernel = [c for c in data["cells"] if c["spec"] == "kernel"]
    # identity values, r = 1: the count register holds N = q + 1, so bits = ceil(log2(q + 2))
    assert {(c["q"], c["s"]): c["value"] for c in kernel} == {
        (2, 1): 2,
        (2, 3): 2,
        (3, 1): 3,
        (3, 3): 3,
    }
    res = run(*args, "--resume")
    assert res.exit_code == 0, res.output
    assert json.loads(out.read_text())["cells"] == data["cells"]


def test_cli_frontier_errors(tmp_path):
    assert_error_line(run("frontier", "--vary", "bits"), "NAME=LO..HI")
    assert_error_line(run("frontier", "--vary", "bits=1..4", "--q", "a"), "--q must be")
    assert_error_line(run("frontier", "--vary", "bits=1..4", "--s", "0"), "--s must be >= 1")
    res = run("frontier", "--vary", "drop=0..2", "--protocol", "kv-sum", "--q", "2", "--s", "3")
    assert_error_line(res, "kv-sum does not support family hard")
    res = run("frontier", "--vary", "values=1..2", "--q", "2", "--s", "3")
    assert_error_line(res, "parameter values is str, not int")


def test_gallop_bisect_finds_every_threshold():
    from sketchsim.sketch.frontier import _bisect

    for lo in range(-2, 3):
        for hi in range(lo, lo + 20):
            for thr in range(lo - 1, hi + 2):
                seen = []

                def ok(v, thr=thr, seen=seen, lo=lo, hi=hi):
                    assert lo <= v <= hi
                    seen.append(v)
                    return v >= thr

                want = max(lo, thr) if thr <= hi else None
                assert _bisect(ok, lo, hi) == want
                assert len(seen) <= 2 * (hi - lo + 1).bit_length() + 2
