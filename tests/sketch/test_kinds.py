"""The kind registry (#62): every per-kind table of the package is read from its records."""

import importlib
from pathlib import Path

import pytest

from sketchsim.sketch import causal, causal_kernel
from sketchsim.sketch.kinds import KINDS, RECORDS, arch_help, kind

ROOT = Path(__file__).resolve().parents[2]


def test_the_tables_are_the_records():
    assert causal.KINDS == KINDS == tuple(k.name for k in RECORDS)
    assert causal.FIXED_MAPS == {k.name: k.feature_map for k in RECORDS if k.feature_map}
    assert causal.GATE_ARRAYS == {k.name: k.gates for k in RECORDS}
    codes = (causal_kernel.LINEAR, causal_kernel.BASED, causal_kernel.GLA, causal_kernel.DELTA,
             causal_kernel.GATED_DELTA, causal_kernel.MAMBA, causal_kernel.WINDOW,
             causal_kernel.RETENTION)  # fmt: skip
    assert codes == tuple(range(len(KINDS)))


def test_the_torch_flags_are_the_records():
    pytest.importorskip("torch")
    from sketchsim.experiments.causal_models import AFFINE_KINDS
    from sketchsim.experiments.state_basis import REBASE_KINDS

    assert AFFINE_KINDS == tuple(k.name for k in RECORDS if k.affine)
    assert REBASE_KINDS == tuple(k.name for k in RECORDS if k.rebase)
    assert "mamba" not in REBASE_KINDS  # dt and dskip act per value channel


@pytest.mark.parametrize("name", KINDS)
def test_entries_match_theory(name):
    """docs/theory.md 5.3's entry counts, written out once more here."""
    r, d, w = 3, 5, 4
    want = {"linear": r * (d + 1), "based": (1 + r + r * r) * (d + 1), "window": w * (r + d)}
    arch = {"kind": name, "rank": r, "value_width": d, "window": w, "feature_map": "elu1"}
    assert causal.causal_entries(arch) == want.get(name, r * d)
    if name == "linear":
        assert causal.causal_entries({**arch, "feature_map": "elu1sum"}) == r * d
    assert kind(name).name == name


def test_the_arch_help_lists_the_registry():
    text = (ROOT / "sketchsim" / "cli" / "experiments.py").read_text()
    flat = " ".join(text.split()).replace('" "', "")
    assert arch_help() in flat, arch_help()


@pytest.mark.parametrize("record", [k for k in RECORDS if k.fla], ids=lambda k: k.name)
def test_each_kind_names_its_fla_reference_and_the_test_uses_it(record):
    module, func = record.fla.rsplit(".", 1)
    assert func in (ROOT / "tests" / "sketch" / "test_causal_fla.py").read_text()
    pytest.importorskip("fla")
    assert callable(getattr(importlib.import_module(module), func))
