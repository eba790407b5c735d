"""Peak memory per input of a cluster ``transcript`` map and reduce task.

Run: python benchmarks/bench_cluster_memory.py [--inputs 1048576]

Each case runs one map task and one reduce task in this process under
``tracemalloc`` (``sketchsim.cluster.memory.measure_task_memory``) and prints
bytes per input beside the sizing constants ``layout`` plans with
(``MAP_BYTES_PER_INPUT`` on top of the answer vectors, ``REDUCE_BYTES_PER_INPUT``).
The protocols group inputs (collisions) where the reduce takes its longest path.
"""

from __future__ import annotations

import argparse

from sketchsim.cluster.layout import MAP_BYTES_PER_INPUT, REDUCE_BYTES_PER_INPUT
from sketchsim.cluster.memory import measure_task_memory

CASES = [  # (q, s, mode, protocol)
    (20, 1, "exhaustive", "block-counts"),  # every transcript distinct
    (8, 7, "exhaustive", "clipped-counts"),  # groups: the sort's longest path
    (64, 7, "sampled", "block-counts"),  # 64-byte answers
    (6, 3, "sampled", "clipped-counts"),  # answers repeat: hashes compared
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--inputs", type=int, default=1 << 20)
    args = ap.parse_args()
    head = (
        f"{'case':<34} {'map B/in':>9} {'(answers)':>9} {'plan':>5} {'reduce B/in':>11} {'plan':>5}"
    )
    print(head)
    for q, s, mode, spec in CASES:
        r = measure_task_memory(q, s, mode, args.inputs, spec)
        plan_map = r["answer_bytes_per_input"] + MAP_BYTES_PER_INPUT[mode]
        print(
            f"{f'F({q},{s}) {mode} {spec}':<34} {r['map_bytes_per_input']:>9.1f} "
            f"{r['answer_bytes_per_input']:>9} {plan_map:>5} "
            f"{r['reduce_bytes_per_input']:>11.1f} {REDUCE_BYTES_PER_INPUT[mode]:>5}"
        )


if __name__ == "__main__":
    main()
