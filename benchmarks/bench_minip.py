"""Min-IP target throughput (jitted vs NumPy reference) and exhaustive verify wall time.

Run: python benchmarks/bench_minip.py [--quick]
Prints inputs/s of both paths measured in this run and their ratio.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from sketchsim import minip_targets, pack_bits
from sketchsim.minip import minip_targets_packed
from sketchsim.verify import verify


def numpy_reference(X: np.ndarray) -> np.ndarray:
    """The plain NumPy reference: an integer Gram matrix per sequence, min over keys."""
    X = X.astype(np.int32)
    return np.einsum("bim,bjm->bij", X, X).min(axis=-1)


def best_of(fn, repeat=3):
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="smaller batches")
    args = ap.parse_args()
    scale = 10 if args.quick else 1
    rng = np.random.default_rng(0)
    print("Min-IP targets: jitted popcount kernel vs NumPy einsum reference")
    for B, N, m in [(200_000 // scale, 3, 24), (20_000 // scale, 16, 456)]:
        X = rng.integers(0, 2, (B, N, m), dtype=np.uint8)
        W = pack_bits(X)
        minip_targets(X[:2])  # compile / load cache outside the timing
        assert np.array_equal(minip_targets_packed(W), numpy_reference(X))
        t_jit = best_of(lambda W=W: minip_targets_packed(W))
        t_jit_all = best_of(lambda X=X: minip_targets(X))
        t_np = best_of(lambda X=X: numpy_reference(X))
        print(
            f"  B={B:>7,} N={N:>2} m={m:>3}: jitted {B / t_jit:>12,.0f} inputs/s "
            f"(with packing {B / t_jit_all:>11,.0f}), numpy {B / t_np:>11,.0f} inputs/s, "
            f"ratio {t_np / t_jit:6.1f}x (with packing {t_np / t_jit_all:5.1f}x)"
        )
    verify(2, 3, "rank1")  # compile / load cache
    for construction in ("rank1", "softmax"):
        t = time.perf_counter()
        res = verify(8, 3, construction)
        dt = time.perf_counter() - t
        print(
            f"verify --m 8 --n 3 --construction {construction}: {res.inputs:,} inputs in "
            f"{dt:.2f} s ({res.inputs / dt:,.0f} inputs/s)"
        )


if __name__ == "__main__":
    main()
