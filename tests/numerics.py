"""Tolerances for float32 results that another CPU computes with other kernels.

torch, oneDNN and MKL pick kernels per CPU (AVX-512, AVX2, baseline SSE), so the
same float32 computation rounds differently from one machine to the next, and
training amplifies the difference.  Recorded float32 numbers are therefore
compared with a tolerance derived from the computation itself: the same code is
run in float64 in the same process, and ``|f32 - f64|`` measures how far this
computation's float32 rounding moves its result at these inputs (it is large
where sums cancel, as in signed heads whose normalizer nearly vanishes).  Two
float32 evaluations on two CPUs are each that far from the exact value, so they
differ by at most about twice that; :data:`MARGIN` leaves room for the one
sample ``|f32 - f64|`` being smaller than the rounding another machine meets.
"""

import numpy as np

#: Multiple of the measured rounding scale that two CPUs may differ by.  The
#: largest ratio seen (this repo's recorded feature-map file against an AMD
#: AVX-512 machine and against forced baseline kernels) was 3.7.
MARGIN = 8.0

EPS32 = float(np.finfo(np.float32).eps)


def rounding_scale(f32, f64) -> float:
    """How far float32 rounding moved this computation: ``max|f32 - f64| + eps32 max|f64|``."""
    f32 = np.asarray(f32, dtype=np.float64)
    f64 = np.asarray(f64, dtype=np.float64)
    return float(np.abs(f32 - f64).max(initial=0.0) + EPS32 * np.abs(f64).max(initial=0.0))


def assert_close_as_rounding(value, expected, f32, f64, what="") -> None:
    """``value`` and ``expected`` (two float32 results) agree up to rounding of this computation.

    Parameters
    ----------
    value, expected : array_like
        The two float32 results to compare (computed here; recorded or computed elsewhere).
    f32, f64 : array_like
        This computation run here in float32 and in float64, for the rounding scale.
    """
    tol = MARGIN * rounding_scale(f32, f64)
    diff = float(np.abs(np.asarray(value, np.float64) - np.asarray(expected, np.float64)).max())
    assert diff <= tol, f"{what}: differ by {diff:.3g}, rounding allows {tol:.3g}"
