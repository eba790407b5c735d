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
