"""The capacity suite's memory is estimated before anything is allocated (#47).

Was: ``sweep --suite capacity --q 64 --s 7 --ranks 4096 --value-widths 4096``
(inside the documented limits) made torch try to allocate 2.2 TB, and ended in
a traceback.
"""

import time

import pytest

pytest.importorskip("torch")

from click.testing import CliRunner  # noqa: E402
from cliutil import assert_error_line  # noqa: E402

from sketchsim.cli import main  # noqa: E402
from sketchsim.errors import SketchsimError  # noqa: E402
from sketchsim.experiments import capacity_suite, memory  # noqa: E402
from sketchsim.experiments.capacity_suite import CapacitySpec  # noqa: E402
from sketchsim.experiments.plan import default_plan  # noqa: E402
from sketchsim.experiments.suite_runs import capacity_specs  # noqa: E402
from sketchsim.sketch.family_plugins import make_family  # noqa: E402

ISSUE = ["sweep", "--suite", "capacity", "--q", "64", "--s", "7", "--ranks", "4096",
         "--value-widths", "4096"]  # fmt: skip
TINY = ["sweep", "--suite", "capacity", "--q", "2", "--s", "1", "--seeds", "1", "--steps", "1",
        "--layers", "1", "--model", "kernel"]  # fmt: skip


@pytest.fixture
def no_training(monkeypatch):
    """Any training run fails the test: a refusal must come before it."""

    def train(*args, **kwargs):
        raise AssertionError("a run was trained")

    monkeypatch.setattr(capacity_suite, "train_capacity", train)


def test_the_issue_command_is_refused_in_one_line_before_anything_is_allocated(no_training):
    start = time.perf_counter()
    res = CliRunner().invoke(main, ISSUE)
    took = time.perf_counter() - start
    assert_error_line(res, "the capacity run elu1 L1 H1 r4096 d4096 on hard q=64 s=7 needs about")
    line = res.output.strip()
    assert "TiB of memory" in line and "available" in line and "pass --allow-large" in line
    assert took < 10, took  # an estimate, not an allocation


def test_the_estimate_and_the_memory_are_the_ones_named(monkeypatch, no_training):
    monkeypatch.setattr(memory, "available_memory", lambda: 3 << 30)
    spec = CapacitySpec("hard", 64, 7, "kernel", 1, 1, 4096, 4096, "elu1", 0)
    est = memory.capacity_memory(spec)
    res = CliRunner().invoke(main, [*ISSUE, "--seeds", "1", "--model", "kernel"])
    assert_error_line(res, f"needs about {est.peak / 2**40:,.1f} TiB of memory")
    assert "more than the 3.0 GiB available" in res.output


def test_allow_large_goes_past_the_estimate(monkeypatch):
    monkeypatch.setattr(memory, "available_memory", lambda: 1000)
    res = CliRunner().invoke(main, TINY)
    assert_error_line(res, "more than the 1,000 bytes available")
    res = CliRunner().invoke(main, [*TINY, "--allow-large"])
    assert res.exit_code == 0, res.output


def test_a_tiny_plan_and_the_default_plan_are_not_refused():
    tiny = capacity_specs(
        default_plan("capacity").with_(qs=(2,), ss=(1,), seeds=1, layer_counts=(1,))
    )
    assert memory.check_capacity_memory(tiny, "cpu", save_weights=True) < 64 << 20
    full = capacity_specs(default_plan("capacity"))
    # the documented plan (docs/capacity.md) on a 4 GiB machine, weights kept
    assert memory.check_capacity_memory(full, "cpu", save_weights=True, available=4 << 30) < 2 << 30


def test_the_estimate_covers_the_largest_tensor_training_builds():
    """Conservative: at least the contributions ``[B, N, H, E]`` float32 training keeps per
    layer, and the inputs ``[B, N, m]``; more with every layer and with the weights file."""
    for q, s, L, H, r, d in [(64, 7, 1, 1, 4096, 4096), (4, 1, 2, 2, 3, 5), (16, 3, 1, 1, 1, 16)]:
        spec = CapacitySpec("hard", q, s, "kernel", L, H, r, d, "elu1", 0)
        fam = make_family("hard", q, s)
        B, N, E = min(512, fam.size), fam.n_tokens, r * (d + 1)
        est = memory.capacity_memory(spec)
        assert est.train >= L * B * N * H * E * 4
        assert est.inputs >= B * N * fam.m * 4
        deeper = memory.capacity_memory(CapacitySpec("hard", q, s, "kernel", L + 1, H, r, d,
                                                     "elu1", 0))  # fmt: skip
        assert deeper.peak > est.peak
        assert memory.capacity_memory(spec, save_weights=True).peak > est.peak
    # the issue's run: torch's first training allocation alone was 2.2 TB
    issue = memory.capacity_memory(CapacitySpec("hard", 64, 7, "kernel", 1, 1, 4096, 4096,
                                                "elu1", 0))  # fmt: skip
    assert issue.train > 2.2e12


def test_softmax_runs_are_estimated_too():
    spec = CapacitySpec("hard", 512, 1, "softmax", 1, 1, 0, 4096, "-", 0)
    est = memory.capacity_memory(spec)
    B, N = 512, make_family("hard", 512, 1).n_tokens
    assert est.train >= B * N * N * 4  # the attention weights [B, H, N, N]
    with pytest.raises(SketchsimError, match="softmax L1 H1 d4096 on hard q=512 s=1 needs"):
        memory.check_capacity_memory([spec], "cpu", available=1 << 30)


def test_on_cuda_training_is_compared_with_the_gpu(monkeypatch):
    monkeypatch.setattr(memory, "_gpu_free", lambda device: 1 << 20)
    spec = CapacitySpec("hard", 16, 3, "kernel", 1, 1, 64, 64, "elu1", 0)
    assert memory.capacity_memory(spec).device_peak > 1 << 20
    memory.check_capacity_memory([spec], "cpu", available=1 << 40)  # fits the machine
    with pytest.raises(SketchsimError, match=r"needs about .* of GPU memory .* 1\.0 MiB"):
        memory.check_capacity_memory([spec], "cuda", available=1 << 40)


def test_available_memory_is_this_machines():
    import os

    got = memory.available_memory()
    assert 0 < got <= os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def test_training_at_k_bits_is_estimated_with_the_quantizer():
    from dataclasses import replace

    from sketchsim.experiments.capacity_suite import CapacitySpec
    from sketchsim.experiments.memory import capacity_memory

    spec = CapacitySpec("hard", 8, 3, "kernel", 2, 1, 4, 16, "elu1", 0)
    plain, qat = capacity_memory(spec), capacity_memory(replace(spec, train_bits=4))
    # three [B, N, H, E] float32 tensors per layer: B = 512 inputs, N = 9 tokens, E = 68
    assert qat.train - plain.train == 3 * 2 * 512 * 9 * 1 * 68 * 4
