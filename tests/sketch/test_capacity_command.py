"""``capacity`` as a library run (#46, #45): the API and the CLI write the same file, and a
cluster measures the same rows as this process."""

import json

import pytest
from click.testing import CliRunner
from weights_files import random_weights

from sketchsim import api
from sketchsim.cli import main
from sketchsim.sketch.family import HardFamily


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("weights")
    for seed in range(2):
        random_weights(tmp / f"m{seed}.npz", HardFamily(3, 1), 1, 1, 1, 2, "elu1", seed=seed)
    (tmp / "zz-broken.npz").write_bytes(b"not a weights file")
    return tmp


def _result(path) -> dict:
    data = json.loads(path.read_text())
    return {k: v for k, v in data.items() if k not in ("argv", "machine")}


@pytest.mark.slow  # with cold caches it compiles the trained and reference engines
def test_the_api_and_the_cli_write_the_same_file(folder, tmp_path):
    api_file, cli_file = tmp_path / "api.json", tmp_path / "cli.json"
    got = api.capacity(folder, samples=64, json_path=api_file)
    res = CliRunner().invoke(main, ["capacity", str(folder), "--samples", "64", "--json",
                                    str(cli_file)])  # fmt: skip
    assert res.exit_code == 2  # the broken file, reported after the others were measured
    assert "1 of 3 weights files could not be measured" in res.output
    assert _result(api_file) == _result(cli_file)
    assert [r["weights"] for r in got["rows"]] == ["m0.npz", "m1.npz"]
    assert got["unreadable"][0]["weights"] == "zz-broken.npz"


def test_a_cluster_measures_the_same_rows(folder):
    pytest.importorskip("distributed")
    here = api.capacity(folder, samples=64)
    there = api.capacity(folder, samples=64, cluster="local:2")
    assert there == here


def _row(arch, bits, k, decoded=True, **extra):
    r = int(arch.split(" r")[1].split()[0])
    d = int(arch.split(" d")[1])
    return {"family": "hard", "q": 4, "s": 3, "architecture": arch, "weights": f"{arch}-{bits}.npz",
            "rank": r, "value_width": d, "seed": 0, "bits_per_coordinate": k if decoded else None,
            "transcript_bits": bits if decoded else None, "decoded": decoded, "bound_bits": 8.0,
            "ratio": bits / 8 if decoded else None, "mode": "exhaustive", "inputs": 256,
            "error_rate_upper95": 0.0, **extra}  # fmt: skip


def test_the_frontier_keeps_the_smallest_decoding_state_per_kind():
    from sketchsim.runs.capacity import frontier_rows

    rows = [
        _row("elu1 L1 H1 r1 d16", 170, 10),
        _row("elu1 L1 H1 r1 d4", 25, 5),
        _row("elu1 L1 H1 r1 d2", 12, 4, decoded=False),  # smaller, but never decoded
        _row("elu1 L2 H1 r1 d4", 40, 4),
        _row("signed L1 H1 r1 d4", 20, 5, decoded=False),
    ]
    got = {f["kind"]: f for f in frontier_rows(rows)}
    assert set(got) == {"elu1 L1 H1", "elu1 L2 H1", "signed L1 H1"}
    one = got["elu1 L1 H1"]
    assert (one["models"], one["decoded_models"]) == (3, 2)
    assert one["best"]["architecture"] == "elu1 L1 H1 r1 d4" and one["best"]["ratio"] == 25 / 8
    assert (
        got["signed L1 H1"]["best"] is None and got["elu1 L2 H1"]["best"]["transcript_bits"] == 40
    )


def test_the_frontier_table_says_what_decoded_covered():
    from sketchsim.tables.capacity import _mode

    assert _mode({"mode": "exhaustive", "inputs": 256}) == "every input"
    sampled = {"mode": "sampled", "inputs": 20_000, "error_rate_upper95": 1.5e-4}
    assert _mode(sampled) == "20,000 sampled, error < 0.00015 at 95%"
    assert _mode({}) == "-"
