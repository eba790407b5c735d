"""Bit audit of trained heads: the state formula, quantization, and the CLI round trip."""

import json

import pytest

torch = pytest.importorskip("torch", reason="the torch extra is not installed")
torch.set_num_threads(1)

from click.testing import CliRunner  # noqa: E402
from cliutil import assert_error_line  # noqa: E402

from sketchsim import api  # noqa: E402
from sketchsim.cli import main  # noqa: E402
from sketchsim.experiments.audit import _quantize, state_outputs  # noqa: E402
from sketchsim.experiments.models import make_head  # noqa: E402
from sketchsim.experiments.plan import default_plan  # noqa: E402


@pytest.mark.parametrize(
    ("kind", "heads", "encoding", "causal"),
    [("elu1", 1, "01", False), ("relu", 2, "pm1", False), ("signed", 1, "pm1", True)],
)
def test_the_state_formula_is_the_heads_own_output(kind, heads, encoding, causal):
    """``<a, phi_Q^T S> / (phi_Q^T z + eps) + b`` is the head's forward, re-associated."""
    model = "signed" if kind == "signed" else "kernel"
    head = make_head(model, 6, 5, kind, heads=heads, seed=2, encoding=encoding, causal=causal)
    head = head.double()
    x = torch.randint(0, 2, (30, 3, 6), generator=torch.Generator().manual_seed(1)).double()
    with torch.no_grad():
        y, ranges = state_outputs(head, x, None)
        torch.testing.assert_close(y, head(x), rtol=1e-9, atol=1e-9)
    assert len(ranges) == heads


def test_k_bit_quantization_keeps_at_most_2_to_the_k_levels_in_range():
    t = torch.linspace(-3, 5, 1001)
    for k in (1, 2, 3, 8):
        q = _quantize(t, k, -3.0, 5.0)
        assert q.unique().numel() <= 2**k
        assert float((q - t).abs().max()) <= (8.0 / (2**k - 1)) / 2 + 1e-6
    assert torch.equal(_quantize(t, None, -3.0, 5.0), t)


@pytest.fixture(scope="module")
def audited(tmp_path_factory, tiny_path_module):
    folder = tmp_path_factory.mktemp("weights")
    plan = default_plan("witness").with_(
        ranks=(1, 8), seeds=1, softmax_seeds=1, steps=300, triples=60, family_path=tiny_path_module
    )
    result = api.sweep(plan, save_weights=folder)
    return folder, result, api.audit(folder)


@pytest.fixture(scope="module")
def tiny_path_module(tmp_path_factory):
    import numpy as np

    from sketchsim.certify import WitnessFamily, save_family
    from sketchsim.minip.kernel import minip_targets

    c1, c2 = [1, 1, 1, 0, 0, 0], [0, 0, 0, 1, 1, 1]
    t = []
    for x, c, d in ((c2, c1, c2), (c1, c2, c1)):
        t += [(x, c, c), (x, d, d), (x, c, d), (x, d, c)]
    tokens = np.array(t, dtype=np.uint8)
    path = tmp_path_factory.mktemp("fam") / "t.npz"
    return str(save_family(WitnessFamily(tokens, 1, minip_targets(tokens)[:, 0], {}), path))


def test_the_float32_row_is_the_accuracy_the_sweep_reported(audited):
    _, result, heads = audited
    kernels = [h for h in heads if "rows" in h]
    assert len(kernels) == 2 and len(heads) == 3  # r = 1, 8 and the softmax head
    reported = {r["spec"]["rank"]: 1 - r["sequence_error"] for r in result.runs}
    for h in kernels:
        r = h["spec"]["rank"]
        assert h["float32_matches"] and h["rows"][0]["bits"] == 32
        assert h["rows"][0]["accuracy"] == pytest.approx(reported[r])
        assert [row["bits"] for row in h["rows"]] == [32, *range(1, 17)]
        coords = r * 6 + r  # value dimension d = m = 6
        assert h["state_floats"] == coords
        assert all(row["state_bits"] == row["bits"] * coords for row in h["rows"])
        floor = h["certified"]  # the witness family's certificate, as a state size
        assert floor["min_state_bits"] == floor["certified_rank"] * 7 >= 7
    softmax = next(h for h in heads if "rows" not in h)
    assert softmax["state"].startswith("none")


def test_failing_heads_are_classified_in_float64(audited):
    _, _, heads = audited
    for h in heads:
        if "rows" in h and h["rows"][0]["accuracy"] < 1:
            assert h["failure"] in ("numerical", "representational")
            assert (h["failure"] == "numerical") == (h["float64_accuracy"] == 1.0)


def test_the_cli_audits_a_folder_and_refuses_an_empty_one(audited, tmp_path):
    folder, _, _ = audited
    out, png = tmp_path / "a.json", tmp_path / "a.png"
    res = CliRunner().invoke(main, ["audit", str(folder), "--json", str(out), "--plot", str(png)])
    assert res.exit_code == 0, res.output
    data = json.loads(out.read_text())
    assert len(data["heads"]) == 3 and png.stat().st_size > 1000
    empty = tmp_path / "empty"
    empty.mkdir()
    assert_error_line(CliRunner().invoke(main, ["audit", str(empty)]), "no weights files")


def test_save_weights_is_refused_on_a_cluster(tmp_path):
    res = CliRunner().invoke(
        main,
        ["sweep", "--steps", "5", "--seeds", "1", "--save-weights", str(tmp_path),
         "--cluster", "tcp://127.0.0.1:9"],
    )  # fmt: skip
    assert_error_line(res, "--save-weights keeps heads trained in this process, not --cluster")


def test_broken_weights_files_are_one_line(audited, tmp_path):
    folder, _, _ = audited
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "run-garbage.pt").write_bytes(b"not a torch file")
    assert_error_line(CliRunner().invoke(main, ["audit", str(bad)]), "not a sketchsim weights file")
    run = torch.load(next(folder.glob("run-kernel-r8-*.pt")), weights_only=True)
    run["spec"]["rank"] = 3  # the weights are a rank-8 head's
    (bad / "run-garbage.pt").unlink()
    torch.save(run, bad / "run-mismatch.pt")
    assert_error_line(
        CliRunner().invoke(main, ["audit", str(bad)]), "do not fit the head they name"
    )


def test_the_api_and_the_cli_write_the_same_audit_file(audited, tmp_path):
    """``audit`` as a library run (#46): the same result file from the API and the CLI."""
    folder, _, _ = audited
    api_file, cli_file = tmp_path / "api.json", tmp_path / "cli.json"
    heads = api.audit(folder, json_path=api_file)
    res = CliRunner().invoke(main, ["audit", str(folder), "--json", str(cli_file)])
    assert res.exit_code == 0, res.output
    assert api_file.read_bytes() == cli_file.read_bytes()  # one process: the same argv too
    assert json.loads(api_file.read_text())["heads"] == heads
