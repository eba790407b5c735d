"""The memory a cluster transcript task plans with stays above what it measurably holds."""

import pytest

from sketchsim.cluster.layout import MAP_BYTES_PER_INPUT, REDUCE_BYTES_PER_INPUT
from sketchsim.cluster.memory import measure_task_memory

pytest.importorskip("pandas")  # the cluster extra is part of dev: CI runs these

#: Fixed bytes a task holds whatever its size (pandas and NumPy headers, the
#: per-entry counts of a small run), spread over the measured inputs.
SLACK = 1 << 20


@pytest.mark.parametrize(
    "q, s, mode, spec",
    [
        (8, 7, "exhaustive", "clipped-counts"),  # groups: the reduce's longest path
        (16, 1, "exhaustive", "block-counts"),  # every transcript distinct
        (6, 3, "sampled", "clipped-counts"),  # answers repeat: hashes compared
        (64, 7, "sampled", "block-counts"),
    ],
)
def test_planned_bytes_per_input_cover_the_measured_peak(q, s, mode, spec):
    n = 1 << 16
    got = measure_task_memory(q, s, mode, n, spec)
    plan_map = (got["answer_bytes_per_input"] + MAP_BYTES_PER_INPUT[mode]) * n
    assert got["map_bytes_per_input"] * n <= plan_map + SLACK
    assert got["reduce_bytes_per_input"] * n <= REDUCE_BYTES_PER_INPUT[mode] * n + SLACK
    # the rows shuffled: the first fingerprint word as key, the second, index (and a hash)
    assert got["table_bytes_per_input"] == pytest.approx(24 + 16 * (mode == "sampled"), abs=0.1)
    # and the plan is not wildly loose either: within 3x of the measured figure
    assert plan_map <= 3 * got["map_bytes_per_input"] * n + SLACK
