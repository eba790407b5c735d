"""The feature-map registry: one class per map, the numbers of the string dispatch it replaced."""

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the torch extra is not installed")
torch.set_num_threads(1)

from numerics import assert_close_as_rounding  # noqa: E402

from sketchsim.experiments import feature_maps as fm  # noqa: E402
from sketchsim.experiments.models import FEATURE_MAPS, head_parameters, make_head  # noqa: E402
from sketchsim.experiments.train import fit  # noqa: E402

#: Outputs of every map, of a two-head model built on it, of that model after five Adam
#: steps, and its parameter count, made with the string-dispatch ``models.py`` of commit
#: 6e87541 (before the registry) by the loop of :func:`_outputs` run against that module.
BEFORE = Path(__file__).parent / "data" / "feature_maps_before_registry.npz"

OLD_NAMES = ("table", "mlp", "elu1", "relu", "relu2", "favor", "hedgehog", "expmap", "signed")


def _inputs():
    g = torch.Generator().manual_seed(11)
    x = torch.randint(0, 2, (6, 3, 7), generator=g).float()
    ids = torch.randint(0, 10, (6, 3), generator=g)
    t = torch.randint(0, 4, (6, 3), generator=g).float()
    return x, ids, t


def _outputs(kind, r, dtype=torch.float32):
    x, ids, t = _inputs()
    x, t = x.to(dtype), t.to(dtype)
    torch.manual_seed(5)
    phi = fm.make_feature_map(kind, 7, r, vocab=10, seed=3).to(dtype)(x, ids).detach().numpy()
    model = "signed" if kind == "signed" else "kernel"
    head = make_head(model, 7, r, kind, vocab=10, seed=3, encoding="pm1", heads=2).to(dtype)
    before = head(x, ids).detach().numpy()
    fit(head, x, ids, t, steps=5, lr=0.01, seed=3, stop_below=1e-9)
    after = head(x, ids).detach().numpy()
    return {"phi": phi, "head": before, "trained": after}, head_parameters(
        model, 7, r, kind, 10, heads=2
    )


def test_registry_holds_every_map_once_in_the_old_order():
    assert tuple(fm.REGISTRY) == OLD_NAMES == FEATURE_MAPS
    for name, cls in fm.REGISTRY.items():
        assert cls.name == name and issubclass(cls, fm.FeatureMap)
    assert [n for n, c in fm.REGISTRY.items() if not c.nonnegative] == ["signed"]
    assert [n for n, c in fm.REGISTRY.items() if c.reads_ids] == ["table"]


def test_unknown_or_duplicate_names_are_refused():
    with pytest.raises(ValueError, match="unknown feature map 'nope'"):
        fm.make_feature_map("nope", 4, 2)
    with pytest.raises(ValueError, match="taken"):
        fm.register(type("Again", (fm.LinearMap,), {"name": "relu"}))
    with pytest.raises(ValueError, match="empty"):
        fm.register(type("Nameless", (fm.LinearMap,), {}))
    assert fm.REGISTRY["relu"] is fm.ReluMap


@pytest.mark.parametrize("kind", OLD_NAMES)
def test_same_numbers_as_the_string_dispatch_for_fixed_seeds(kind):
    """The recorded numbers, up to the float32 rounding of this very computation.

    The file was recorded on another CPU: torch picks other kernels on another
    instruction set, and the last bits differ (training amplifies them), so the
    comparison is not bit for bit.  The tolerance is derived here from the same
    computation run in float64 (``tests/numerics.py``); a changed map, initialiser
    or optimizer step moves the numbers by far more than that.
    """
    old = np.load(BEFORE)
    for r in (5, 6):
        new, params = _outputs(kind, r)
        shadow, _ = _outputs(kind, r, torch.float64)
        assert params == int(old[f"params/{kind}/{r}"][0])
        for what, value in new.items():
            ref = old[f"{what}/{kind}/{r}"]
            assert value.dtype == ref.dtype == np.float32
            assert_close_as_rounding(value, ref, value, shadow[what], f"{what}/{kind}/{r}")


def test_the_recorded_comparison_catches_a_change_of_the_last_significant_digits():
    """The derived tolerance is tight: one part in 10^4 of a trained output is caught."""
    old = np.load(BEFORE)
    new, _ = _outputs("elu1", 5)
    shadow, _ = _outputs("elu1", 5, torch.float64)
    ref = old["trained/elu1/5"]
    moved = new["trained"] * np.float32(1 + 1e-4)
    with pytest.raises(AssertionError, match="rounding allows"):
        assert_close_as_rounding(moved, ref, new["trained"], shadow["trained"], "trained")


@pytest.mark.parametrize("kind", OLD_NAMES)
@pytest.mark.parametrize(("m", "r", "vocab"), [(3, 1, 0), (7, 5, 10), (12, 16, 40)])
def test_parameter_count_is_that_of_the_built_map(kind, m, r, vocab):
    built = fm.make_feature_map(kind, m, r, vocab=vocab, seed=0)
    assert fm.REGISTRY[kind].parameter_count(m, r, vocab) == sum(
        p.numel() for p in built.parameters()
    )


def test_the_table_kernel_is_the_gathered_vocabulary_kernel():
    torch.manual_seed(0)
    q, k = fm.make_feature_map("table", 4, 3, vocab=6), fm.make_feature_map("table", 4, 3, vocab=6)
    iq, ids = torch.randint(0, 6, (5, 1)), torch.randint(0, 6, (5, 3))
    direct = fm.pair_scores(q(None, iq), k(None, ids))
    torch.testing.assert_close(q.kernel(k, None, None, iq, ids), direct)


def test_a_registered_map_is_usable_by_name_in_a_head():
    class HalfSquare(fm.LinearMap):
        name = "test-halfsquare"

        def activate(self, z):
            return 0.5 * z * z

    fm.register(HalfSquare)
    try:
        head = make_head("kernel", 5, 4, "test-halfsquare", seed=0)
        x = torch.randint(0, 2, (3, 3, 5)).float()
        assert head(x).shape == (3, 3)
        assert isinstance(head.phi_q, HalfSquare)
        assert head_parameters("kernel", 5, 4, "test-halfsquare", 0) == sum(
            p.numel() for p in head.parameters()
        )
    finally:
        del fm.REGISTRY["test-halfsquare"]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--feature-map", "signed"], "--feature-map must list names from table, mlp"),
        (["--suite", "ood", "--feature-map", "elu1,table"], "use a parametric feature map"),
    ],
)
def test_the_cli_asks_the_registry_which_maps_it_accepts(args, needle):
    """``signed`` is not nonnegative (the ``signed`` model uses it); ``table`` reads ids."""
    from click.testing import CliRunner
    from cliutil import assert_error_line

    from sketchsim.cli import main

    res = CliRunner().invoke(main, ["sweep", "--steps", "5", "--seeds", "1", *args])
    assert_error_line(res, needle)
