"""The guard of issue #31: speed work changes no result.

Committed reference files (``tests/data/results_unchanged/``) hold, for the main
job at a small sample (``sketchsim transcript --q 64 --s 7 --samples 2000``) and
for exhaustive runs at F(4, 2) and F(6, 2), every protocol of the default set:

- ``<name>.json``: the ``--json`` result file, without timing and provenance
  (``seconds``, source identities, versions, machine, argv);
- ``<name>_transcripts.json``: per protocol, sha256 digests of every input's
  exact transcript, fingerprint and answers from the engine, and of the
  fingerprints and correctness that ``run_all`` (the measuring loop) returns.

The test reruns each and requires every field of the reference to be there and
equal (fields added to the report later are not compared): counts, strings,
booleans and every transcript digest exactly; floats (entropies, bits) exactly
or within 4 units in the last place, the most that different CPUs' libm
(NumPy's log2 has per-ISA SIMD versions) may differ by.  A change of summation
order or of any count fails it.

Regenerate (only for a deliberate result change, with the reason in the
commit): ``python tests/sketch/test_results_unchanged.py --write``.
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

DATA = Path(__file__).parents[1] / "data" / "results_unchanged"

#: name -> CLI arguments of ``sketchsim transcript`` (the default protocol set)
CASES = {
    "main_q64_s7_samples2000": ["--q", "64", "--s", "7", "--samples", "2000"],
    "exhaustive_q4_s2": ["--q", "4", "--s", "2", "--exhaustive"],
    "exhaustive_q6_s2": ["--q", "6", "--s", "2", "--exhaustive"],
}

#: Timing and provenance: not results.
EXCLUDED = {"seconds", "identity", "family_identity", "versions", "machine", "argv"}


def strip(obj):
    """``obj`` without the timing and provenance fields, at any depth."""
    if isinstance(obj, dict):
        return {k: strip(v) for k, v in obj.items() if k not in EXCLUDED}
    if isinstance(obj, list):
        return [strip(v) for v in obj]
    return obj


def run_cli(args, tmp: Path) -> dict:
    from click.testing import CliRunner

    from sketchsim.cli import main

    path = tmp / "out.json"
    res = CliRunner().invoke(main, ["transcript", *args, "--quiet", "--json", str(path)])
    assert res.exit_code == 0, res.output
    return strip(json.loads(path.read_text()))


def _digest(*arrays) -> str:
    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(repr((a.shape, str(a.dtype))).encode())
        h.update(a.tobytes())
    return h.hexdigest()


def transcript_digests(args) -> dict:
    """Per protocol: digests of the engine's exact outputs and of ``run_all``'s."""
    from sketchsim.sketch.engine import Engine
    from sketchsim.sketch.family import HARD, HardFamily
    from sketchsim.sketch.measure import choose_answers, run_all
    from sketchsim.sketch.plugins import resolve_spec

    opts = dict(zip(args[::2], args[1::2], strict=False))
    fam = HardFamily(int(opts["--q"]), int(opts["--s"]), 0)
    exhaustive = True if "--exhaustive" in args else None
    _, T = choose_answers(fam, exhaustive, int(opts.get("--samples", 100_000)))
    out = {}
    for spec in HARD.default_protocols:
        proto, params, _ = resolve_spec(spec)
        ctx = fam.context()
        engine = Engine(proto.plan(ctx, params), ctx, proto.name)
        res = engine.run(fam.tokens(T), store=True)
        fp, correct, counts, failure = run_all(fam, engine, T, None)
        out[spec] = {
            "transcripts": _digest(res.transcripts),
            "fingerprints": _digest(res.fingerprints),
            "answers": _digest(res.answers),
            "run_all": _digest(fp, correct),
            "entry_counts": _digest(counts.entry, counts.value, counts.count),
            "first_failure": failure,
        }
    return out


def assert_same(ref, got, where="$"):
    """``got`` equals ``ref``: exactly, floats to 4 ulp (see the module docstring)."""
    if isinstance(ref, float) or isinstance(got, float):
        assert isinstance(got, int | float) and isinstance(ref, int | float), where
        ok = ref == got or (
            math.isfinite(ref) and abs(ref - got) <= 4 * math.ulp(max(abs(ref), abs(got)))
        )
        assert ok, f"{where}: {got!r} != reference {ref!r}"
    elif isinstance(ref, dict):  # fields added since (new report fields) are not compared
        missing = sorted(set(ref) - set(got)) if isinstance(got, dict) else got
        assert isinstance(got, dict) and not missing, f"{where}: missing {missing}"
        for k in ref:
            assert_same(ref[k], got[k], f"{where}.{k}")
    elif isinstance(ref, list):
        assert isinstance(got, list) and len(got) == len(ref), f"{where}: length differs"
        for i, (a, b) in enumerate(zip(ref, got, strict=True)):
            assert_same(a, b, f"{where}[{i}]")
    else:
        assert type(got) is type(ref) and got == ref, f"{where}: {got!r} != reference {ref!r}"


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CASES))
def test_results_unchanged(name, tmp_path):
    ref = json.loads((DATA / f"{name}.json").read_text())
    got = run_cli(CASES[name], tmp_path)
    assert len(ref["protocols"]) == 7  # every protocol of the default set
    assert_same(ref, got)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CASES))
def test_transcripts_unchanged(name):
    ref = json.loads((DATA / f"{name}_transcripts.json").read_text())
    assert_same(ref, transcript_digests(CASES[name]))


def test_guard_sees_a_change():
    ref = {"a": [1, {"h": 2.5}], "b": "x"}
    assert_same(ref, {"a": [1, {"h": 2.5}], "b": "x"})
    assert_same(ref, {"a": [1, {"h": 2.5 + math.ulp(2.5)}], "b": "x"})  # libm noise
    for bad in (
        {"a": [1, {"h": 2.5 + 1e-9}], "b": "x"},
        {"a": [2, {"h": 2.5}], "b": "x"},
        {"a": [1, {"h": 2.5}], "b": "y"},
        {"a": [1, {"h": 2.5}]},
        {"a": [1, {"g": 2.5}], "b": "x"},
        {"a": [True, {"h": 2.5}], "b": "x"},
    ):
        with pytest.raises(AssertionError):
            assert_same(ref, bad)
    assert strip({"seconds": 1.0, "p": [{"identity": "z", "n": 3}]}) == {"p": [{"n": 3}]}


def _write() -> None:  # pragma: no cover - regenerates the references
    import tempfile

    DATA.mkdir(parents=True, exist_ok=True)
    for name, args in CASES.items():
        with tempfile.TemporaryDirectory() as tmp:
            data = run_cli(args, Path(tmp))
        (DATA / f"{name}.json").write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
        digests = transcript_digests(args)
        text = json.dumps(digests, indent=1, sort_keys=True) + "\n"
        (DATA / f"{name}_transcripts.json").write_text(text)
        print(f"wrote {name}")


if __name__ == "__main__":  # pragma: no cover
    if "--write" in sys.argv:
        _write()
