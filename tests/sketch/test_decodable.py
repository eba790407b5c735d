"""Two verdicts per run: decodable (what the transcript carries) and decoded (its readout)."""

import math

import pytest

from sketchsim import api
from sketchsim.sketch.measure import collision_power, error_rate_upper

SPECS = [
    "raw", "block-counts", "clipped-counts", "kernel", "kernel:bits=1", "kernel:bits=2",
    "kernel:bits=3", "kernel:values=blocks,bits=7", "multihead:heads=2", "multihead:bits=2",
]  # fmt: skip


@pytest.mark.parametrize(("q", "s"), [(2, 1), (3, 3), (4, 2)])
def test_a_decodable_protocol_has_at_least_s_plus_1_to_the_q_transcripts(q, s):
    """Exhaustively, decodable means the transcript determines the answer vector, so the
    (s+1)^q answer vectors need that many distinct transcripts (THEORY section 5)."""
    run = api.transcript(q=q, s=s, protocols=SPECS, exhaustive=True)
    verdicts = set()
    for rep in run.reports:
        if rep.decodable:
            assert rep.distinct_transcripts >= (s + 1) ** q, rep.spec
            assert rep.log2_distinct >= run.family.bound_bits - 1e-9, rep.spec
        if rep.decoded:  # a right readout needs a decodable transcript
            assert rep.decodable, rep.spec
        assert rep.decodable == (rep.collision is None), rep.spec
        verdicts.add((rep.decodable, rep.decoded))
    assert (False, False) in verdicts and (True, True) in verdicts


def test_a_narrow_kernel_register_is_decodable_but_not_decoded():
    """bits=2 saturates the normalizer the readout divides by; the transcripts still
    separate every answer vector."""
    (rep,) = api.transcript(q=3, s=3, protocols=["kernel:bits=2"], exhaustive=True).reports
    assert rep.decodable and not rep.decoded
    assert rep.distinct_transcripts == 4**3
    assert rep.verdict_text() == "wrong on some input"


def test_sampled_verdicts_state_their_reach():
    run = api.transcript(q=8, s=7, protocols=["block-counts"], exhaustive=False, samples=3000)
    (rep,) = run.reports
    # sampled: right on every sampled input and no collision is no proof of either verdict
    # (this asserted decoded and decodable true before issue #33)
    assert rep.capped and rep.decoded is None and rep.decodable is None
    assert rep.decodable_reason == (
        "not refuted (3,000 sampled inputs, collision check reach 6.7e-07)"
    )
    assert rep.error_rate_upper95 == pytest.approx(1 - 0.05 ** (1 / 3000))
    assert rep.verdict_text() == ("correct on 3,000 sampled inputs (error rate < 0.001 at 95%)")
    assert rep.to_dict()["decoded_reason"] == rep.verdict_text()  # said in the JSON too
    assert rep.collision_check_power == pytest.approx(3 / (3000 * 2999 / 2))
    exhaustive = api.transcript(q=2, s=1, protocols=["block-counts"]).reports[0]
    assert exhaustive.verdict_text() == "correct on every input"
    assert exhaustive.error_rate_upper95 is None


def test_error_rate_bound_is_clopper_pearson():
    assert error_rate_upper(0, 100) == pytest.approx(1 - 0.05**0.01)
    assert error_rate_upper(0, 100) < 3 / 100  # the rule of three, slightly above
    from scipy.stats import binom

    ub = error_rate_upper(5, 1000)
    assert binom.cdf(5, 1000, ub) == pytest.approx(0.05, abs=1e-6)
    assert error_rate_upper(7, 7) == 1.0
    from scipy.stats import beta

    # the same number scipy.stats gives, bit for bit (the main job avoids importing it)
    for n in (2, 10, 999, 100_000, 1_000_000):
        for wrong in sorted({1, 2, 3, n // 7, n // 2, n - 2, n - 1} & set(range(1, n))):
            assert error_rate_upper(wrong, n) == float(beta.ppf(0.95, wrong + 1, n - wrong))
    assert collision_power(1) is None and math.isclose(collision_power(3), 1.0)


def test_the_frontier_reports_both_minimum_sizes():
    cell = api.frontier("kernel", "bits=1..8", q=4, s=3).to_dict()
    assert cell["mode"] == "exhaustive" and cell["verdict"] == "correct on every input"
    assert cell["decodable_found"] and cell["found"]
    assert cell["decodable_value"] < cell["value"]  # the decoder, not the sketch, needs more
    assert cell["decodable_declared_bits"] >= cell["bound_bits"]
    assert cell["evaluated_decodable"][str(cell["decodable_value"])] is True
    assert cell["evaluated_decodable"][str(cell["decodable_value"] - 1)] is False
    sampled = api.frontier("kernel", "bits=1..8", q=8, s=7, samples=2000).to_dict()
    assert sampled["verdict"].startswith("correct on 2,000 sampled inputs (error rate < ")


def test_sampled_refutations_are_named_and_undersampled_entries_refute_nothing():
    from sketchsim.sketch.measure import decodability

    # the entropy argument names itself, with the interval's end it used
    value, reason = decodability(False, None, 22.16, 24.0, 2000)
    assert value is False
    assert reason.startswith("refuted by the entropy argument: entry entropy (upper end of its")
    # undersampled entries are biased low: the same numbers refute nothing
    value, reason = decodability(False, None, 22.16, 24.0, 2000, undersampled=2)
    assert value is None and "2 undersampled entries" in reason
    # a verified collision refutes in any mode; exhaustively, no candidate proves it
    collision = {"inputs": [6, 7], "position": 6}
    assert decodability(False, collision, 99.0, 24.0, 10)[0] is False
    assert decodability(True, None, 24.0, 24.0, 64)[0] is True
    # candidates that were 128-bit fingerprint collisions leave it unproved
    assert decodability(True, None, 24.0, 24.0, 64, unresolved=True)[0] is None


def test_an_entry_from_before_the_three_valued_verdict_is_not_resumed(tmp_path):
    import json

    from click.testing import CliRunner
    from cliutil import assert_error_line

    from sketchsim.cli import main

    path = tmp_path / "t.json"
    args = ["transcript", "--q", "8", "--s", "7", "--samples", "300", "--quiet"]
    args += ["--protocol", "block-counts", "--json", str(path)]
    assert CliRunner().invoke(main, args).exit_code == 0
    data = json.loads(path.read_text())
    (entry,) = data["protocols"]
    assert entry["decodable"] is None and entry["decoded"] is None  # sampled, all right
    entry["decodable"] = True  # what sketchsim wrote before issue #33
    del entry["decodable_reason"]
    path.write_text(json.dumps(data))
    assert_error_line(CliRunner().invoke(main, [*args, "--resume"]), "decodable_reason")
