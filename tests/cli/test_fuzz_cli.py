"""Hostile command lines never end in a traceback (issue 9): hypothesis over CLI arguments.

Each command gets a grammar of flags whose values mix valid small sizes with
hostile ones (negative, zero, huge, NaN, inf, 1e400, fractions, text), and, for
the commands that read files, malformed files.  Whatever is drawn, the command
either succeeds quickly, or says one line and exits 2.  Huge values must be
refused before any allocation, so no draw may run long; a result file written
by a successful draw is strict JSON (no NaN, no Infinity).
"""

import json
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sketchsim.cli import main
from sketchsim.results import read_json

HOSTILE = ["-1", "0", "nan", "inf", "-inf", "1e9", "1e400", "abc", "", "1.5", str(2**70)]

#: Longest a single draw may take (seconds): sizes are refused before work starts.
DRAW_LIMIT_S = 60


def _flag(name, small):
    """``(name, value)``: a valid small value three times in four, else a hostile one
    (so that draws get past the first check and reach the deeper paths too)."""
    valid = st.sampled_from(small)
    return st.tuples(st.just(name), st.one_of(valid, valid, valid, st.sampled_from(HOSTILE)))


def _switch(name):
    return st.just((name,))


def _command(name, flags, fixed=(), max_flags=4):
    return st.lists(st.one_of(*flags), max_size=max_flags).map(
        lambda parts: [name, *fixed] + [tok for part in parts for tok in part]
    )


# Family files for certify and sweep --family: one good, the rest malformed.
FAMILY_FILES = [
    "good", "nan_position", "str_position", "float_tokens", "twos", "no_inputs",
    "m0", "length4", "no_keys", "wrong_targets", "list_meta", "deep_meta",
    "truncated", "text", "empty", "directory", "missing",
]  # fmt: skip


def _write_families(folder: Path) -> None:
    from sketchsim.certify import build_witness, save_family
    from sketchsim.certify.codes import hadamard_code

    fam = build_witness(hadamard_code(8), "hadamard", codewords=4)
    save_family(fam, folder / "good.npz")
    good = {
        "tokens": fam.tokens,
        "position": np.int64(1),
        "targets": fam.targets,
        "meta": np.array(json.dumps(fam.meta)),
    }
    bad = {
        "nan_position": {"position": np.float64("nan")},
        "str_position": {"position": np.array("1")},
        "float_tokens": {"tokens": fam.tokens * 0.5},
        "twos": {"tokens": fam.tokens * 2},
        "no_inputs": {"tokens": fam.tokens[:0], "targets": fam.targets[:0]},
        "m0": {"tokens": fam.tokens[:, :, :0]},
        "length4": {"tokens": np.zeros((4, 4, 8), np.uint8)},
        "wrong_targets": {"targets": fam.targets + 1},
        "list_meta": {"meta": np.array("[1, 2]")},
        "deep_meta": {"meta": np.array("[" * 50_000 + "]" * 50_000)},
    }
    for name, override in bad.items():
        np.savez(folder / f"{name}.npz", **{**good, **override})
    np.savez(folder / "no_keys.npz", a=np.zeros(3))
    data = (folder / "good.npz").read_bytes()
    (folder / "truncated.npz").write_bytes(data[: len(data) // 2])
    (folder / "text.npz").write_text("hello")
    (folder / "empty.npz").write_bytes(b"")
    (folder / "directory.npz").mkdir()


def _files(folder: Path):
    return st.sampled_from(FAMILY_FILES).map(lambda name: str(folder / f"{name}.npz"))


def _commands(tmp: Path) -> dict:
    out = str(tmp / "out")
    families = _files(tmp / "families")
    return {
        "verify": _command(
            "verify",
            [
                _flag("--m", ["1", "2", "3", "342"]),
                _flag("--n", ["1", "2", "3"]),
                _flag("--beta", ["0.5", "2"]),
                _flag("--construction", ["rank1", "softmax", "onehot"]),
            ],
            fixed=("--m", "2", "--n", "2", "--quiet", "--json", f"{out}/v.json"),
        ),
        "transcript": _command(
            "transcript",
            [
                _flag("--q", ["1", "2", "3", "342", "400", "2000"]),
                _flag("--s", ["1", "2", "7"]),
                _flag("--samples", ["10", "100", "60000000"]),
                _flag("--seed", ["1", "7"]),
                _flag(
                    "--protocol",
                    ["raw", "kernel:r=1e8", "multihead:heads=1e9", "nope", "kernel:r=2"],
                ),
            ],
            fixed=("--q", "2", "--s", "1", "--protocol", "block-counts", "--quiet"),
        ),
        "codes": _command(
            "codes",
            [
                _flag("--m", ["8", "24", "63", "10008"]),
                _flag("--kind", ["greedy", "hadamard", "golay-octads", "random"]),
                _flag("--d", ["2", "4", "40"]),
                _flag("--w", ["2", "4", "31"]),
                _flag("--seed", ["1"]),
                _flag("--out", [f"{out}/c.npy", f"{out}/c.txt", f"{out}/c.csv", "/proc/c.npy"]),
            ],
            fixed=("--m", "8", "--kind", "greedy"),
        ),
        "bound": _command(
            "bound",
            [
                _flag("--m", ["8", "9", "1"]),
                _flag("--to", ["8", "9", "1e6"]),
                _flag("--step", ["1", "2"]),
                _flag("--seed", ["1"]),
            ],
            ("--m", "8", "--json", f"{out}/b.json"),
        ),
        "witness": _command(
            "witness",
            [
                _flag("--m", ["8", "12", "24", "63", "10008"]),
                _flag(
                    "--code",
                    ["hadamard", "golay-octads", "golay-dodecads", "greedy", "random"],
                ),
                _flag("--codewords", ["2", "4", "1"]),
                _flag("--seed", ["1"]),
                _switch("--chains"),
                _switch("--complements"),
                _switch("--no-both-orders"),
            ],
            fixed=("--m", "8", "--out", f"{out}/w.npz", "--json", f"{out}/w.json"),
        ),
        "certify": st.tuples(
            families,
            st.lists(
                st.one_of(
                    _flag("--eps", ["0.1", "0.49", "0.5", "1e-300"]),
                    _switch("--position-independent"),
                ),
                max_size=3,
            ),
        ).map(
            lambda d: (
                ["certify", d[0], "--json", f"{out}/c.json"]
                + [tok for part in d[1] for tok in part]
            )
        ),
        "sweep": _command(
            "sweep",
            [
                _flag("--ranks", ["1", "2", "1,2"]),
                _flag("--seeds", ["1", "2"]),
                _flag("--steps", ["1", "2"]),
                _flag("--lr", ["0.03", "1e300", "1e6"]),
                _flag("--eps", ["1e-6", "0"]),
                _flag("--stop-below", ["0.5", "0.25"]),
                _flag("--heads", ["1", "2"]),
                _flag("--accuracy", ["0.95"]),
                _flag("--feature-map", ["table", "favor", "relu", "nope"]),
                _flag("--scales", ["8:64:10", "8:1:10", "70:64:10", "8:64"]),
                _flag("--triples", ["10"]),
                _flag("--suite", ["witness", "ood"]),
                st.tuples(st.just("--family"), families),
            ],
            fixed=(
                "--ranks",
                "1",
                "--seeds",
                "1",
                "--steps",
                "1",
                "--model",
                "kernel",
                "--scales",
                "8:64:10",
                "--json",
                f"{out}/s.json",
            ),  # fmt: skip
        ),
        "minrank": _command(
            "minrank",
            [
                _flag("--m", ["1", "2", "1,2", "2..1", "9"]),
                _flag("--n", ["3", "4"]),
                _flag("--seeds", ["1"]),
                _flag("--steps", ["1"]),
                _switch("--causal"),
            ],
            fixed=(
                "--m",
                "1",
                "--train-max-m",
                "0",
                "--out-dir",
                f"{out}/mr",
                "--json",
                f"{out}/mr.json",
            ),  # fmt: skip
        ),
        "frontier": _command(
            "frontier",
            [
                _flag("--vary", ["bits=1..4", "r=1..2", "bits=-3..0", "nope=1..2", "bits"]),
                _flag("--q", ["2", "3", "2,3"]),
                _flag("--s", ["1", "2"]),
                _flag("--samples", ["10", "20000"]),
                _flag("--seed", ["1"]),
                _flag("--search", ["scan", "bisect"]),
                _flag("--protocol", ["kernel", "raw", "kernel:r=1e8", "nope"]),
            ],
            fixed=(
                "--vary",
                "bits=1..3",
                "--q",
                "2",
                "--s",
                "1",
                "--quiet",
                "--json",
                f"{out}/f.json",
            ),  # fmt: skip
        ),
    }


EXAMPLES = {"minrank": 12, "sweep": 25, "frontier": 25}
DEFAULT_EXAMPLES = 40


@pytest.fixture(scope="module")
def grammar(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fuzz")
    (tmp / "families").mkdir()
    (tmp / "out").mkdir()
    _write_families(tmp / "families")
    return tmp, _commands(tmp)


@pytest.mark.slow
@pytest.mark.parametrize(
    "command",
    [
        "bound",
        "certify",
        "codes",
        "frontier",
        "minrank",
        "sweep",
        "transcript",
        "verify",
        "witness",
    ],
)
def test_no_traceback(command, grammar):
    tmp, commands = grammar
    runner = CliRunner()

    @settings(
        max_examples=EXAMPLES.get(command, DEFAULT_EXAMPLES),
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(commands[command])
    def check(argv):
        for old in (tmp / "out").glob("*.json"):
            old.unlink()  # each draw starts without earlier results (no accidental resume)
        start = time.perf_counter()
        res = runner.invoke(main, argv)
        took = time.perf_counter() - start
        if res.exception is not None and not isinstance(res.exception, SystemExit):
            raise AssertionError(f"{argv}: {type(res.exception).__name__}: {res.exception}")
        assert res.exit_code in (0, 2), (argv, res.output)
        assert "Traceback" not in res.output, argv
        assert took < DRAW_LIMIT_S, (argv, took)
        if res.exit_code == 2:
            lines = [ln for ln in res.output.splitlines() if ln.strip()]
            assert lines and lines[-1].startswith("error:"), (argv, res.output)
        else:
            for written in (tmp / "out").glob("*.json"):
                read_json(written)  # strict JSON: NaN or Infinity would fail here

    check()
