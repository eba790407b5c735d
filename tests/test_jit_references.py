"""Every numba-jitted function of sketchsim has a reference test, or a reasoned exemption.

The project's rule (every jitted kernel has a plain, obviously-correct reference,
compared on random and edge inputs) as a test.  The package and its built-in
protocol files (``protocols/``, installed as ``sketchsim/builtin_protocols``) are
read as source (their AST): nothing is imported or compiled.  A function is jitted when one of its
decorators mentions ``njit``, ``jit``, ``vectorize``, ``guvectorize`` or ``cfunc``
(``numba.njit(...)`` included, and functions defined inside a factory).

Each jitted function needs an entry under its module path and name:

- in ``REFERENCES``, a :class:`Ref`: the test that compares it with a plain NumPy
  or pure-Python reference, that reference, and ``via``: the call chain from the
  function the test calls down to the kernel (empty when the test calls the
  kernel itself);
- or in ``EXEMPT``: why a reference test could say nothing more, naming the test
  (``tests/...py::test_...``) that exercises it.

What an entry must satisfy: the test file defines the test; the test (its
decorators and body, and the helper functions of its file it calls) names the
kernel, or the first function of ``via`` (or ``hook`` where the test reaches the
kernel through a protocol spec); every function of ``via`` exists and names the
next, the last names the kernel; the reference exists (``naive.f``: tests/naive.py,
``f``: the test's file, ``sketchsim....f``: a plain, not jitted, function of the
package) and the test names it, or an ``inline:`` expression appears in the test
as written (whitespace aside).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "sketchsim"
#: Where jitted functions are looked for: the package and the built-in protocol files.
SOURCES = (PACKAGE, ROOT / "protocols")
JIT_DECORATORS = frozenset({"njit", "jit", "vectorize", "guvectorize", "cfunc"})
DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
TEST_ID = re.compile(r"tests/[\w/]+\.py::\w+(?:::\w+)?")


@dataclass(frozen=True)
class Ref:
    """A reference test of one jitted function (see the module docstring)."""

    test: str
    reference: str
    via: tuple[str, ...] = ()
    hook: str | None = None


# ---- the table -------------------------------------------------------------------------

_LANES = "tests/minip/test_minip_lanes.py"
_BITS = "tests/minip/test_bits.py"
_TALLY = "tests/sketch/test_entry_tally.py"
_KREF = "tests/sketch/test_kernel_references.py"
_PACKED = "tests/sketch/test_packed_tokens.py::test_token_helpers_match_plain_python"
_VERIFY = "tests/heads/test_verify.py::test_both_paths_bit_identical_to_naive"
_VERIFY_VIA = (
    "sketchsim.heads.exhaustive.check_range",
    "sketchsim.heads.exhaustive_kernel.check_range",
    "sketchsim.heads.exhaustive_kernel._verify_range",
)
_SOFTMAX = (
    "tests/experiments/test_softmax_kernel.py::test_values_and_gradients_match_the_torch_formula"
)
_SOFTMAX_VIA = (
    "sketchsim.experiments.softmax_kernel.softmax_readout",
    "sketchsim.experiments.softmax_kernel._SoftmaxReadout",
)
_VOCAB = (
    "tests/experiments/test_vocab_readout.py::test_values_and_gradients_match_the_torch_formula"
)
_VOCAB_REF = "sketchsim.experiments.vocab_readout.readout_reference"
_KERNEL_VIA = "sketchsim.experiments.vocab_readout.kernel_readout"
_VSOFTMAX_VIA = "sketchsim.experiments.vocab_readout.softmax_readout_vocab"
_HEADS = "tests/sketch/test_builtin_protocols.py::test_kernel_heads_match_dense_reference"
_HEAD_PLAN = "sketchsim.sketch.kernel_head.kernel_plan"
_TRAINED = (
    "tests/sketch/test_trained_protocol.py::test_engine_equals_numpy_reference_on_every_input"
)
_TRAINED_REF = "naive.trained_outputs"
_CAUSAL = "tests/sketch/test_causal.py::test_runner_matches_reference"
_CAUSAL_REF = "naive.causal_outputs"
_CAUSAL_VIA = (
    "sketchsim.sketch.trained.trained_engine",
    "sketchsim.sketch.trained.trained_plan",
    "sketchsim.sketch.causal.causal_plan",
    "sketchsim.sketch.causal_kernel.run_batch",
)
_CAUSAL_HEAD = (*_CAUSAL_VIA, "sketchsim.sketch.causal_kernel._loop")
_CAUSAL_PARTS = (*_CAUSAL_HEAD, "sketchsim.sketch.causal_kernel._head")
_TRAINED_PLAN = "sketchsim.sketch.trained.trained_plan"
_TRAINED_ANSWER = "sketchsim.sketch.trained.answer"
_TRAINED_INIT = (_TRAINED_PLAN, "sketchsim.sketch.trained.init")
_TRAINED_QUERY = "sketchsim.sketch.trained._query_side"
_MINIP_BYTES = f"{_BITS}::test_minip_bytes_and_packed_match_naive"
_RAW = "tests/sketch/test_builtin_protocols.py::test_raw_matches_dense_min_ip"
_KV = f"{_KREF}::test_kv_sum_matches_dense_reference"
#: From the engine to its compiled loop.
_ENGINE_LOOP = (
    "sketchsim.sketch.engine.Engine",
    "sketchsim.sketch.engine._jitted_loop",
    "sketchsim.sketch.loop.compiled",
    "sketchsim.sketch.loop.loop",
)

REFERENCES: dict[str, Ref] = {
    # certify
    "sketchsim.certify.certificate._chain_dp": Ref(
        "tests/certify/test_certify.py::test_chain_dp_matches_bellman_ford", "naive.chain_dp"
    ),
    "sketchsim.certify.codes._greedy": Ref(
        "tests/certify/test_codes.py::test_greedy_matches_naive_lexicode",
        "naive_greedy",
        via=("sketchsim.certify.codes.greedy_code",),
    ),
    "sketchsim.certify.codes._ctz": Ref(
        "tests/certify/test_codes.py::test_ctz_matches_the_lowest_set_bit",
        "inline: (v & -v).bit_length() - 1",
    ),
    "sketchsim.certify.codes._greedy_filter": Ref(
        "tests/certify/test_codes.py::test_greedy_filter_matches_naive",
        "naive.greedy_filter",
        via=("sketchsim.certify.codes.greedy_filter",),
    ),
    "sketchsim.certify.streamed._gap_histogram": Ref(
        "tests/certify/test_streamed.py::test_gap_histogram_random_codes",
        "naive.gap_histogram",
        via=("sketchsim.certify.streamed.gap_histogram",),
    ),
    "sketchsim.certify.streamed._common_histogram64": Ref(
        "tests/certify/test_streamed.py::test_gap_histogram_random_codes",
        "naive.gap_histogram",
        via=("sketchsim.certify.streamed.gap_histogram",),
    ),
    "sketchsim.certify.streamed._greedy_gap_code": Ref(
        "tests/certify/test_streamed.py::test_greedy_gap_code_matches_naive",
        "naive.greedy_gap_code",
        via=("sketchsim.certify.streamed.greedy_gap_code",),
    ),
    "sketchsim.certify.streamed._greedy_common64": Ref(
        "tests/certify/test_streamed.py::test_greedy_gap_code_matches_naive",
        "naive.greedy_gap_code",
        via=("sketchsim.certify.streamed.greedy_gap_code",),
    ),
    # experiments (the references are the torch formulas, also the library's path off the CPU)
    "sketchsim.experiments.softmax_kernel.softmax_in_place": Ref(
        "tests/experiments/test_softmax_kernel.py::test_softmax_in_place_matches_numpy",
        "inline: np.exp(head) / np.exp(head).sum(axis=-1, keepdims=True)",
    ),
    "sketchsim.experiments.softmax_kernel._forward": Ref(
        _SOFTMAX,
        "sketchsim.experiments.softmax_kernel.softmax_readout_reference",
        via=_SOFTMAX_VIA,
    ),
    "sketchsim.experiments.softmax_kernel._backward": Ref(
        _SOFTMAX,
        "sketchsim.experiments.softmax_kernel.softmax_readout_reference",
        via=_SOFTMAX_VIA,
    ),
    "sketchsim.experiments.vocab_readout._kernel_forward": Ref(
        _VOCAB, _VOCAB_REF, via=(_KERNEL_VIA, "sketchsim.experiments.vocab_readout._KernelReadout")
    ),
    "sketchsim.experiments.vocab_readout._kernel_backward": Ref(
        _VOCAB, _VOCAB_REF, via=(_KERNEL_VIA, "sketchsim.experiments.vocab_readout._KernelReadout")
    ),
    "sketchsim.experiments.vocab_readout._softmax_forward": Ref(
        _VOCAB,
        _VOCAB_REF,
        via=(_VSOFTMAX_VIA, "sketchsim.experiments.vocab_readout._VocabSoftmaxReadout"),
    ),
    "sketchsim.experiments.vocab_readout._softmax_backward": Ref(
        _VOCAB,
        _VOCAB_REF,
        via=(_VSOFTMAX_VIA, "sketchsim.experiments.vocab_readout._VocabSoftmaxReadout"),
    ),
    # heads: the exhaustive verify kernel, bit for bit against the plain enumeration
    "sketchsim.heads.exhaustive_kernel._check_blocks": Ref(
        _VERIFY, "naive.verify_enumeration", via=_VERIFY_VIA
    ),
    "sketchsim.heads.exhaustive_kernel._check_block": Ref(
        _VERIFY,
        "naive.verify_enumeration",
        via=(*_VERIFY_VIA, "sketchsim.heads.exhaustive_kernel._check_blocks"),
    ),
    "sketchsim.heads.exhaustive_kernel._last_token_n3": Ref(  # N = 3 cases of that test
        _VERIFY,
        "naive.verify_enumeration",
        via=(
            *_VERIFY_VIA,
            "sketchsim.heads.exhaustive_kernel._check_blocks",
            "sketchsim.heads.exhaustive_kernel._check_block",
        ),
    ),
    # minip
    "sketchsim.minip.bits.popcount64": Ref(
        f"{_BITS}::test_popcount_random_words", "inline: int(w).bit_count()"
    ),
    "sketchsim.minip.bits.trailing_zeros64": Ref(
        f"{_BITS}::test_trailing_zeros_is_the_lowest_set_bit",
        "inline: (x & -x).bit_length() - 1 if x else 64",
    ),
    "sketchsim.minip.bits.load_u64": Ref(
        f"{_BITS}::test_gather8_is_the_byte_gather",
        'inline: int.from_bytes(b[3:11].tobytes(), "little")',
    ),
    "sketchsim.minip.bits.gather8": Ref(
        f"{_BITS}::test_gather8_is_the_byte_gather",
        "inline: sum(int(b[3 + i]) << i for i in range(8))",
    ),
    "sketchsim.minip.kernel._pack_range": Ref(
        _MINIP_BYTES, "naive.minip_targets", via=("sketchsim.minip.kernel.minip_targets",)
    ),
    "sketchsim.minip.kernel._row_minima": Ref(
        _MINIP_BYTES, "naive.minip_targets", via=("sketchsim.minip.kernel.minip_targets_packed",)
    ),
    "sketchsim.minip.kernel._minip_packed": Ref(  # the parallel path: kernel_path fixture
        _MINIP_BYTES, "naive.minip_targets", via=("sketchsim.minip.kernel.minip_targets_packed",)
    ),
    "sketchsim.minip.kernel._minip_bytes": Ref(  # the parallel path: kernel_path fixture
        _MINIP_BYTES, "naive.minip_targets", via=("sketchsim.minip.kernel.minip_targets",)
    ),
    "sketchsim.minip.kernel._lane_blocks": Ref(
        f"{_LANES}::test_lane_path_matches_naive",
        "naive.minip_targets",
        via=("sketchsim.minip.kernel.minip_targets", "sketchsim.minip.kernel._row_minima"),
    ),
    "sketchsim.minip.lanes.transpose_lanes": Ref(
        f"{_LANES}::test_transpose_lanes_matches_numpy",
        "inline: W[2:10].reshape(LANES, K).T.reshape(-1)",
    ),
    # sketch: protocols
    "sketchsim.sketch.block_counts.emit": Ref(
        f"{_KREF}::test_block_counts_match_dense_reference",
        "block_counts_reference",
        via=("sketchsim.sketch.block_counts.block_counts_plan",),
        hook="block_counts.emit",
    ),
    "sketchsim.sketch.block_counts.update": Ref(
        f"{_KREF}::test_block_counts_match_dense_reference",
        "block_counts_reference",
        via=("sketchsim.sketch.block_counts.block_counts_plan",),
        hook='"block-counts"',
    ),
    "sketchsim.sketch.block_counts.answer": Ref(
        f"{_KREF}::test_block_counts_match_dense_reference",
        "block_counts_reference",
        via=("sketchsim.sketch.block_counts.block_counts_plan",),
        hook='"block-counts"',
    ),
    "sketchsim.sketch.loop.channel_write": Ref(
        "tests/sketch/test_sketch_engine.py::test_jitted_engine_matches_naive",
        "naive.run_protocol",
        via=_ENGINE_LOOP,
    ),
    "sketchsim.sketch.loop.copy_start": Ref(
        "tests/sketch/test_sketch_engine.py::test_random_protocols_match_naive",
        "naive.run_protocol",
        via=_ENGINE_LOOP,
    ),
    "sketchsim.sketch.loop.no_init": Ref(
        "tests/sketch/test_sketch_engine.py::test_jitted_engine_matches_naive",
        "naive.run_protocol",
        via=("sketchsim.sketch.engine.Engine",),
    ),
    "sketchsim.sketch.kernel_head._value_sum": Ref(
        _HEADS,
        "kernel_reference",
        via=(_HEAD_PLAN, "sketchsim.sketch.kernel_head.update"),
        hook='"kernel',
    ),
    **{  # the readout's inline helpers, each reached through update
        f"sketchsim.sketch.kernel_head.{name}": Ref(
            _HEADS,
            "kernel_reference",
            via=(_HEAD_PLAN, "sketchsim.sketch.kernel_head.update"),
            hook='"kernel',
        )
        for name in ("_one_feature_sum", "_features_sum", "_head_sums", "_feature_sum")
    },
    "sketchsim.sketch.kernel_head._word_below": Ref(
        f"{_KREF}::test_word_below_clears_elements_from_d",
        "inline: int(bits[w]) & ((1 << keep) - 1)",
    ),
    "sketchsim.sketch.kernel_head._entry": Ref(
        _HEADS,
        "kernel_reference",
        via=(_HEAD_PLAN, "sketchsim.sketch.kernel_head.emit"),
        hook='"kernel',
    ),
    "sketchsim.sketch.kernel_head.emit": Ref(
        _HEADS, "kernel_reference", via=(_HEAD_PLAN,), hook='"kernel'
    ),
    "sketchsim.sketch.kernel_head.update": Ref(
        _HEADS, "kernel_reference", via=(_HEAD_PLAN,), hook='"kernel'
    ),
    "sketchsim.sketch.kernel_head.answer": Ref(
        _HEADS, "kernel_reference", via=(_HEAD_PLAN,), hook='"kernel'
    ),
    "sketchsim.sketch.causal_kernel._loop": Ref(_CAUSAL, _CAUSAL_REF, _CAUSAL_VIA),
    "sketchsim.sketch.causal_kernel._head": Ref(_CAUSAL, _CAUSAL_REF, _CAUSAL_HEAD),
    **{
        f"sketchsim.sketch.causal_kernel.{name}": Ref(
            _CAUSAL, "naive.causal_outputs", _CAUSAL_PARTS
        )
        for name in ("_layout", "_project", "_sigmoid")
    },
    **{
        f"sketchsim.sketch.causal_kernel.{name}": Ref(_CAUSAL, _CAUSAL_REF, _CAUSAL_HEAD)
        for name in ("_scratch_size", "_unpack")
    },
    "sketchsim.sketch.causal_kernel._affine": Ref(
        _CAUSAL, _CAUSAL_REF, (*_CAUSAL_PARTS, "sketchsim.sketch.causal_kernel._project")
    ),
    "sketchsim.sketch.activations.feature": Ref(
        _TRAINED,
        _TRAINED_REF,
        via=(*_TRAINED_INIT, _TRAINED_QUERY, "sketchsim.sketch.trained._affine"),
    ),
    "sketchsim.sketch.activations.softplus": Ref(_CAUSAL, _CAUSAL_REF, _CAUSAL_PARTS),
    "sketchsim.sketch.registers.register": Ref(
        "tests/sketch/test_registers.py::test_jitted_register_is_the_reference", "reference_code"
    ),
    "sketchsim.sketch.registers.answer_of": Ref(
        "tests/sketch/test_registers.py::test_answer_rounding", "reference_answer"
    ),
    "sketchsim.sketch.trained._dims": Ref(
        _TRAINED,
        _TRAINED_REF,
        via=(_TRAINED_PLAN, _TRAINED_ANSWER, "sketchsim.sketch.trained._forward"),
    ),
    "sketchsim.sketch.trained._affine": Ref(
        _TRAINED, _TRAINED_REF, via=(*_TRAINED_INIT, _TRAINED_QUERY)
    ),
    "sketchsim.sketch.trained._query_side": Ref(_TRAINED, _TRAINED_REF, via=_TRAINED_INIT),
    "sketchsim.sketch.trained._bias": Ref(_TRAINED, _TRAINED_REF, via=_TRAINED_INIT),
    "sketchsim.sketch.trained._unpack": Ref(_TRAINED, _TRAINED_REF, via=_TRAINED_INIT),
    "sketchsim.sketch.trained._cache": Ref(_TRAINED, _TRAINED_REF, via=_TRAINED_INIT),
    "sketchsim.sketch.trained._cached": Ref(_TRAINED, _TRAINED_REF, via=_TRAINED_INIT),
    "sketchsim.sketch.trained.init": Ref(_TRAINED, _TRAINED_REF, via=(_TRAINED_PLAN,)),
    "sketchsim.sketch.trained._scratch": Ref(
        _TRAINED, _TRAINED_REF, via=(_TRAINED_PLAN, _TRAINED_ANSWER)
    ),
    "sketchsim.sketch.trained._forward": Ref(
        _TRAINED, _TRAINED_REF, via=(_TRAINED_PLAN, _TRAINED_ANSWER)
    ),
    "sketchsim.sketch.trained._cached_output": Ref(  # one layer (the test runs one and two)
        _TRAINED, _TRAINED_REF, via=(_TRAINED_PLAN, _TRAINED_ANSWER)
    ),
    "sketchsim.sketch.trained._head_readout": Ref(
        _TRAINED,
        _TRAINED_REF,
        via=(_TRAINED_PLAN, _TRAINED_ANSWER, "sketchsim.sketch.trained._cached_output"),
    ),
    "sketchsim.sketch.trained.emit": Ref(_TRAINED, _TRAINED_REF, via=(_TRAINED_PLAN,)),
    "sketchsim.sketch.trained.update": Ref(_TRAINED, _TRAINED_REF, via=(_TRAINED_PLAN,)),
    "sketchsim.sketch.trained.answer": Ref(_TRAINED, _TRAINED_REF, via=(_TRAINED_PLAN,)),
    # sketch: measuring
    "sketchsim.sketch.entry_counts._merge_two": Ref(
        f"{_TALLY}::test_merge_two_matches_reference", "inline: expect[int(v)] += int(c)"
    ),
    "sketchsim.sketch.entry_counts._merge_parts": Ref(
        f"{_TALLY}::test_merge_parts_matches_reference", "ref_triples"
    ),
    "sketchsim.sketch.entry_counts._runs_of_keys": Ref(
        f"{_TALLY}::test_runs_of_keys_matches_reference", "inline: sums[k] += c"
    ),
    "sketchsim.sketch.entry_tally._count_dense": Ref(
        f"{_KREF}::test_count_dense_matches_a_histogram",
        "inline: want[offsets[j] + tr[r, c]] += 1",
    ),
    "sketchsim.sketch.entry_tally._drop_varying": Ref(
        f"{_TALLY}::test_drop_varying_matches_reference", "ref_first_change"
    ),
    "sketchsim.sketch.entry_tally._gather_varying": Ref(
        f"{_TALLY}::test_gather_varying_matches_reference",
        "inline: counted[k, v - lo[k]] += 1",
    ),
    "sketchsim.sketch.entry_tally._count_or_append": Ref(  # inlined; windows open and closed
        f"{_TALLY}::test_gather_varying_matches_reference",
        "inline: counted[k, v - lo[k]] += 1",
        via=("sketchsim.sketch.entry_tally._gather_varying",),
    ),
    "sketchsim.sketch.entry_tally._small_runs": Ref(
        f"{_TALLY}::test_small_runs_matches_reference",
        "inline: [(int(lo[k]) + d, int(c)) for d, c in enumerate(before[k]) if c]",
    ),
    "sketchsim.sketch.entry_tally._run_end": Ref(
        f"{_TALLY}::test_run_end_matches_reference",
        "inline: next((e for e in range(i + 1, length) if row[e] != row[i]), length)",
    ),
    "sketchsim.sketch.entry_tally._sorted_runs": Ref(
        f"{_TALLY}::test_sorted_runs_matches_reference",
        "inline: sorted(Counter(pend[k, : fill[k]].tolist()).items())",
    ),
    "sketchsim.sketch.estimators._match_rows": Ref(
        f"{_KREF}::test_match_answers_matches_numpy",
        "inline: (answers[:rows] == T[lo : lo + rows]).all(axis=1)",
        via=("sketchsim.sketch.estimators.match_answers",),
    ),
    "sketchsim.sketch.estimators._entr": Ref(
        "tests/sketch/test_measure_pipeline.py::test_entry_bits_helpers_equal_scipy_bit_for_bit",
        "inline: entr(p)",  # scipy.special.entr
    ),
    "sketchsim.sketch.family._build_tokens": Ref(
        f"{_KREF}::test_hard_family_tokens_match_naive",
        "family_tokens_reference",
        via=("sketchsim.sketch.family.HardFamily.tokens",),
    ),
    "sketchsim.sketch.family._build_data_masked": Ref(
        f"{_KREF}::test_hard_family_tokens_match_naive",
        "family_tokens_reference",
        via=("sketchsim.sketch.family.HardFamily.variable_tokens",),
    ),
    "sketchsim.sketch.family._build_data_tokens": Ref(  # with the mask tables switched off
        f"{_KREF}::test_hard_family_tokens_match_naive",
        "family_tokens_reference",
        via=("sketchsim.sketch.family.HardFamily.variable_tokens",),
    ),
    "sketchsim.sketch.fingerprint.fold": Ref(
        f"{_KREF}::test_fold_matches_fold_py", "sketchsim.sketch.fingerprint.fold_py"
    ),
    "sketchsim.sketch.grouping._bucket_sort": Ref(
        "tests/sketch/test_grouping.py::test_bucket_order_is_numpys_stable_argsort",
        'inline: np.argsort(keys, kind="stable")',
        via=("sketchsim.sketch.grouping.bucket_order",),
    ),
    "sketchsim.sketch.grouping._number_groups": Ref(
        "tests/sketch/test_grouping.py::test_group_transcripts_equals_python_sorting",
        "_python_groups",
        via=("sketchsim.sketch.grouping.group_transcripts",),
    ),
    "sketchsim.sketch.grouping._collision_pairs": Ref(
        "tests/sketch/test_measure.py::test_collision_candidates_match_numpy_on_a_large_input",
        "inline: np.minimum.at(first, inverse, np.arange(B))",
        via=("sketchsim.sketch.grouping.find_collision_candidates",),
    ),
    "sketchsim.sketch.packed_tokens.bit": Ref(
        _PACKED, "inline: [bit(bx, k) for k in range(m)] == x.tolist()"
    ),
    "sketchsim.sketch.packed_tokens.count_ones": Ref(_PACKED, "inline: int(x[lo:hi].sum())"),
    "sketchsim.sketch.packed_tokens.field": Ref(
        _PACKED, "inline: sum(int(v) << t for t, v in enumerate(x[lo : lo + width]))"
    ),
    "sketchsim.sketch.packed_tokens.inner_product": Ref(_PACKED, "inline: int(x @ y)"),
    # built-in protocol files
    "protocols.raw.emit": Ref(
        _RAW, "inline: ip.min(axis=2)", via=("protocols.raw.setup",), hook='"raw"'
    ),
    "protocols.raw.update": Ref(
        _RAW, "inline: ip.min(axis=2)", via=("protocols.raw.setup",), hook='"raw"'
    ),
    "protocols.raw.answer": Ref(
        _RAW, "inline: ip.min(axis=2)", via=("protocols.raw.setup",), hook='"raw"'
    ),
    "protocols.kv_sum.emit": Ref(
        _KV, "kv_sum_reference", via=("protocols.kv_sum.setup",), hook="kv-sum"
    ),
    "protocols.kv_sum.update": Ref(
        _KV, "kv_sum_reference", via=("protocols.kv_sum.setup",), hook="kv-sum"
    ),
    "protocols.kv_sum.answer": Ref(
        _KV, "kv_sum_reference", via=("protocols.kv_sum.setup",), hook="kv-sum"
    ),
}

EXEMPT: dict[str, str] = {
    "sketchsim.minip.kernel.uses_lanes": (
        "a one-line predicate choosing the eight-lane path, no value to compare; both outcomes "
        "run against naive.minip_targets in tests/minip/test_minip_lanes.py::"
        "test_lane_path_matches_naive (asserts it true) and tests/minip/test_minip_lanes.py::"
        "test_fallback_beyond_the_lane_scratch (asserts it false)"
    ),
    "sketchsim.minip.kernel._scratch": (
        "allocates uninitialised, 64-byte aligned scratch: nothing to compare with a "
        "reference; its sizes and alignment are asserted by tests/minip/test_minip_lanes.py::"
        "test_scratch_is_aligned_for_512_bit_vectors"
    ),
    "sketchsim.sketch.loop.unowned": (
        "a view of an array without a reference count (memory lifetime, no arithmetic); every "
        "engine run goes through it, compared with the plain-Python engine naive.run_protocol "
        "in tests/sketch/test_sketch_engine.py::test_jitted_engine_matches_naive, and its "
        "lifetime in tests/sketch/test_engine_lifetime.py::"
        "test_large_raw_sketch_runs_in_a_fresh_process"
    ),
}


# ---- reading the source ------------------------------------------------------------------


@cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


@cache
def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def _source(path: Path, node: ast.AST) -> str:
    """The text of a definition, its decorators included."""
    start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    return "\n".join(_lines(path)[start - 1 : node.end_lineno])


def _is_jitted(node: ast.AST) -> bool:
    for decorator in node.decorator_list:
        for sub in ast.walk(decorator):
            name = getattr(sub, "id", None) or getattr(sub, "attr", None)
            if name in JIT_DECORATORS:
                return True
    return False


def jitted_functions(package: Path = PACKAGE) -> dict[str, str]:
    """Every jitted function under ``package``: ``module.function`` -> ``path:line``."""
    found: dict[str, str] = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and _is_jitted(node):
                where = f"{path.relative_to(package.parent)}:{node.lineno}"
                found.setdefault(f"{module}.{node.name}", where)
    return found


def find_definition(qualname: str, root: Path = ROOT) -> tuple[Path, ast.AST] | None:
    """``(file, node)`` of ``package.module.name`` or ``package.module.Class.method``.

    The first name is looked up anywhere in the module (functions a factory defines
    included), the rest as members of the class before them.
    """
    parts = qualname.split(".")
    for k in range(len(parts) - 1, 0, -1):
        base = root.joinpath(*parts[:k])
        path = (
            base.with_suffix(".py") if base.with_suffix(".py").is_file() else base / "__init__.py"
        )
        if not path.is_file():
            continue
        first, *members = parts[k:]
        node = next(
            (n for n in ast.walk(_tree(path)) if isinstance(n, DEFS) and n.name == first), None
        )
        for name in members:
            if node is None:
                break
            node = next((n for n in node.body if isinstance(n, DEFS) and n.name == name), None)
        return (path, node) if node is not None else None
    return None


def source_of_test(test_id: str, root: Path = ROOT) -> str | None:
    """The source of a test (decorators included) and of the helper functions of its file
    that it calls, transitively; None if the file or the test does not exist."""
    file, _, names = test_id.partition("::")
    path = root / file
    if not names or not path.is_file() or not names.split("::")[-1].startswith("test"):
        return None
    tree = _tree(path)
    node: ast.AST | None = tree
    for name in names.split("::"):
        node = next((n for n in node.body if isinstance(n, DEFS) and n.name == name), None)
        if node is None:
            return None
    helpers = {n.name: n for n in tree.body if isinstance(n, DEFS)}
    seen, todo, parts = {node.name}, [node], []
    while todo:
        current = todo.pop()
        parts.append(_source(path, current))
        for sub in ast.walk(current):
            if isinstance(sub, ast.Name) and sub.id in helpers and sub.id not in seen:
                seen.add(sub.id)
                todo.append(helpers[sub.id])
    return "\n".join(parts)


def _names(text: str, name: str) -> bool:
    if name.isidentifier():
        return re.search(rf"(?<![\w]){re.escape(name)}(?!\w)", text) is not None
    return name in text


def _squash(text: str) -> str:
    return re.sub(r"\s+", "", text)


def _top_level(path: Path, name: str) -> bool:
    return path.is_file() and any(isinstance(n, DEFS) and n.name == name for n in _tree(path).body)


def _short(qualname: str) -> str:
    return qualname.rsplit(".", 1)[-1]


# ---- the checks ------------------------------------------------------------------------


def _entry_template(name: str, where: str) -> str:
    return (
        f'    "{name}": Ref("tests/<area>/test_<file>.py::test_<name>", "naive.<reference>"),'
        f"  # {where}"
    )


def table_problems(jitted: dict, references: dict, exempt: dict) -> list[str]:
    """Jitted functions without an entry, entries of functions that do not exist, both kinds."""
    problems = []
    missing = sorted(set(jitted) - set(references) - set(exempt))
    if missing:
        problems.append(
            f"{len(missing)} jitted function(s) without a reference test: write a test comparing "
            "each with a plain NumPy/Python reference (tests/naive.py or beside the test; random "
            "and edge inputs), then add to REFERENCES in tests/test_jit_references.py (via=(...) "
            "when the test calls it through a public function), or add a reasoned EXEMPT entry "
            "naming the test that exercises it:\n"
            + "\n".join(_entry_template(name, jitted[name]) for name in missing)
        )
    stale = sorted((set(references) | set(exempt)) - set(jitted))
    if stale:
        problems.append(
            "entries name functions that are not jitted functions of sketchsim or protocols/ "
            "(renamed, moved or removed? update or delete them): " + ", ".join(stale)
        )
    both = sorted(set(references) & set(exempt))
    if both:
        problems.append("both a reference and an exemption (keep one): " + ", ".join(both))
    return problems


def reference_problems(kernel: str, ref: Ref, jitted: dict, root: Path = ROOT) -> list[str]:
    """What is wrong with one REFERENCES entry (empty when nothing)."""
    text = source_of_test(ref.test, root)
    if text is None:
        return [f"{kernel}: test {ref.test} does not exist (no such file or test function)"]
    problems = []
    chain = [*ref.via, kernel]
    for caller, callee in zip(chain, chain[1:], strict=False):
        found = find_definition(caller, root)
        if found is None:
            problems.append(f"{kernel}: via {caller}: no such function")
        elif not _names(_source(*found), _short(callee)):
            problems.append(f"{kernel}: via {caller} does not call {_short(callee)}")
    hook = ref.hook or _short(chain[0])
    if not _names(text, hook):
        problems.append(f"{kernel}: {ref.test} does not name {hook!r}")
    reference = ref.reference
    if reference.startswith("inline:"):
        expression = reference.removeprefix("inline:").strip()
        if not expression or _squash(expression) not in _squash(text):
            problems.append(f"{kernel}: {ref.test} does not contain the reference {expression!r}")
        return problems
    if reference.startswith("naive."):
        defined = _top_level(root / "tests" / "naive.py", reference.removeprefix("naive."))
    elif reference.startswith("sketchsim."):
        defined = find_definition(reference, root) is not None
        if reference in jitted:
            problems.append(f"{kernel}: the reference {reference} is itself jitted")
    else:
        defined = _top_level(root / ref.test.partition("::")[0], reference)
    if not defined:
        problems.append(f"{kernel}: the reference {reference} is not defined")
    if not _names(text, reference if reference.startswith("naive.") else _short(reference)):
        problems.append(f"{kernel}: {ref.test} does not use the reference {reference}")
    return problems


def exemption_problems(kernel: str, why: str, root: Path = ROOT) -> list[str]:
    tests = TEST_ID.findall(why)
    if len(why) < 60 or not tests:
        return [
            f"{kernel}: an exemption gives its reason and the test that exercises the function "
            "(tests/<file>.py::test_<name>)"
        ]
    return [f"{kernel}: {t} does not exist" for t in tests if source_of_test(t, root) is None]


# ---- the tests ---------------------------------------------------------------------------


@cache
def _jitted() -> dict:
    found: dict = {}
    for source in SOURCES:
        found |= jitted_functions(source)
    return found


def test_every_jitted_function_has_an_entry_and_every_entry_a_function():
    assert {"sketchsim.minip.kernel._row_minima", "protocols.raw.emit"} <= set(_jitted())
    problems = table_problems(_jitted(), REFERENCES, EXEMPT)
    assert not problems, "\n\n".join(problems)


@pytest.mark.parametrize("kernel", sorted(REFERENCES))
def test_reference_entry(kernel):
    problems = reference_problems(kernel, REFERENCES[kernel], _jitted())
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("kernel", sorted(EXEMPT))
def test_exemption_entry(kernel):
    problems = exemption_problems(kernel, EXEMPT[kernel])
    assert not problems, "\n".join(problems)


# ---- the checks themselves fail on bad tables ----------------------------------------------


def test_the_walk_finds_every_decorator_form(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from numba import njit\n\n@njit\ndef top(x):\n    return x\n")
    (pkg / "sub" / "kernels.py").write_text(
        "import numba\nimport numba as nb\nfrom numba import jit, njit, vectorize\n"
        "from numba.extending import intrinsic\n\n"
        "@numba.njit(cache=True)\ndef a(x):\n    return x\n\n"
        "@jit(nopython=True)\ndef b(x):\n    return x\n\n"
        '@nb.vectorize(["f8(f8)"])\ndef c(x):\n    return x\n\n'
        "def factory():\n    @njit(inline='always')\n    def d(x):\n        return x\n"
        "    return d\n\n"
        "@intrinsic\ndef not_jitted(typingctx, x):\n    return None\n\n"
        "def plain(x):\n    return x\n"
    )
    found = jitted_functions(pkg)
    assert set(found) == {"pkg.top", "pkg.sub.kernels.a", "pkg.sub.kernels.b"} | {
        "pkg.sub.kernels.c",
        "pkg.sub.kernels.d",
    }
    assert found["pkg.sub.kernels.a"] == "pkg/sub/kernels.py:7"


def test_a_new_kernel_without_an_entry_fails_saying_what_to_add():
    jitted = {"sketchsim.new.kernel": "sketchsim/new.py:3", "sketchsim.old.k": "sketchsim/old.py:1"}
    (problem,) = table_problems(jitted, {"sketchsim.old.k": Ref("t", "r")}, {})
    assert "sketchsim.new.kernel" in problem and "sketchsim/new.py:3" in problem
    assert '"sketchsim.new.kernel": Ref("tests/' in problem and "EXEMPT" in problem


def test_entries_of_functions_that_no_longer_exist_fail():
    jitted = {"sketchsim.a.k": "sketchsim/a.py:1"}
    problems = table_problems(
        jitted, {"sketchsim.a.k": Ref("t", "r"), "sketchsim.a.gone": Ref("t", "r")}, {}
    )
    assert len(problems) == 1 and "sketchsim.a.gone" in problems[0]
    problems = table_problems(jitted, {"sketchsim.a.k": Ref("t", "r")}, {"sketchsim.a.k": "x"})
    assert len(problems) == 1 and "both" in problems[0]


def test_bad_reference_entries_fail():
    kernel = "sketchsim.certify.codes._greedy_filter"
    good = REFERENCES[kernel]
    assert reference_problems(kernel, good, _jitted()) == []
    test = good.test
    bad = {
        "does not exist": Ref(test + "_gone", good.reference, good.via),
        "no such function": Ref(test, good.reference, ("sketchsim.certify.codes.gone",)),
        "does not call": Ref(test, good.reference, ("sketchsim.certify.codes.greedy_code",)),
        "does not name": Ref(
            "tests/certify/test_codes.py::test_hadamard_bad_order", "inline: 16", good.via
        ),
        "is not defined": Ref(test, "naive.no_such_reference", good.via),
        "does not use": Ref(test, "naive.chain_dp", good.via),
        "does not contain": Ref(test, "inline: np.sort(masks)", good.via),
        "itself jitted": Ref(test, "sketchsim.certify.codes._greedy_filter", good.via),
    }
    for needle, ref in bad.items():
        problems = reference_problems(kernel, ref, _jitted())
        assert any(needle in p for p in problems), (needle, problems)
    assert "does not exist" in reference_problems(kernel, Ref("tests/nope.py::test_x", "r"), {})[0]


def test_bad_exemptions_fail():
    reason = "a long enough reason, but it names no test that exercises the function at all"
    assert exemption_problems("k", reason)
    assert exemption_problems("k", "tests/certify/test_codes.py::test_make_code_errors")  # short
    missing = reason + " tests/certify/test_codes.py::test_no_such_test"
    assert "does not exist" in exemption_problems("k", missing)[0]
    assert (
        exemption_problems("k", reason + " tests/certify/test_codes.py::test_make_code_errors")
        == []
    )
