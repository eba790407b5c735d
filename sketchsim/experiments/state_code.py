"""How a trained causal model's cut state codes the answers, and how much rounding it bears.

``sketchsim capacity`` finds the smallest register width ``K`` at which a saved
model is right; this module says *why* that ``K`` and not a smaller one.  On a
seeded sample of its family's inputs the state at the cut (after the last data
token; docs/theory.md 5.3) is read in float64, and the answers are fitted as an
affine function of it, ``t ~ A S + c`` (least squares).  Rounding entry ``j`` to
its ``K``-bit register moves it by at most half a step, ``span_j / (2^K - 1) / 2``;
with independent uniform rounding errors, answer ``i`` moves by

- at most ``sum_j |A_ij| step_j / 2`` (``worst``), and
- ``sqrt(sum_j (A_ij step_j)^2 / 12)`` in root mean square (``rms``),

so an answer stays right while ``rms`` is well under the margin ``1/2`` minus the
fit's residual; treating the errors as normal, all ``q`` answers stay right with
probability about ``prod_i erf(1 / (2 sqrt(2) rms_i))`` (``all_right_normal``).
``readers`` (the participation ratio of ``|A_i|``:
``(sum_j |A_ij|)^2 / sum_j A_ij^2``) counts the entries an answer is read from:
1 for a register-aligned code (the block-counts construction), up to ``E`` for a
code spread over every entry, whose rounding errors add up.  The affine fit is
exact for a one-data-token model whose readout is affine in the state; its
residual says how far a model is from that (``residual_p99``: the 99th percentile
over inputs of an input's largest residual; the few inputs a model gets wrong
dominate ``residual_max``).

Torch (the optional extra); one layer and one head (the capacity plan's models).
"""

from __future__ import annotations

import numpy as np

from sketchsim.errors import SketchsimError

__all__ = ["state_code"]


def state_code(path, inputs: int = 4096, seed: int = 0, bits=range(1, 13)) -> dict:
    """The cut state's code of the answers and its rounding budget per ``K``.

    Parameters
    ----------
    path : path-like
        A causal weights file (``sweep --suite capacity --save-weights``).
    inputs : int
        Sampled inputs of the model's family (all of them when it has fewer).
    seed : int
        Seed of the sample.
    bits : iterable of int
        Register widths ``K`` to report.

    Returns
    -------
    dict
        ``entries``, ``inputs``, ``float_accuracy`` (all answers right, float64),
        ``residual_max`` and ``residual_p99`` (the affine fit's, see above),
        ``readers_median``, ``cut_over_span_median`` (the cut's range over the
        register's calibrated span, per entry), and ``per_bits``: per ``K``,
        ``rms_median``, ``rms_max``, ``worst_max`` over the answers and
        ``all_right_normal``.
    """
    import math

    import torch

    from sketchsim.experiments.capacity_suite import family_answers, input_tensor
    from sketchsim.experiments.causal_models import causal_from_weights
    from sketchsim.sketch.weights_file import load_weights, weights_family

    w = load_weights(path)
    if not w.causal or w.arch["layers"] != 1 or w.arch["heads"] != 1:
        raise SketchsimError(f"{path}: state_code reads one-layer, one-head causal models")
    fam = weights_family(w)
    q = fam.q
    T = family_answers(fam, inputs, seed, 13)
    X = input_tensor(fam, T, dtype=torch.float64)
    model = causal_from_weights(w)
    states: list = []
    with torch.no_grad():
        y = model(X, states=states)[:, :q].numpy()
    n_data = X.shape[1] - q
    (cut,) = [s for lay, t, s in states if lay == 0 and t == n_data - 1]
    cut = cut[:, 0, :].numpy()
    span = w.arrays["L0.H0.span"].ravel()
    fit = np.c_[cut, np.ones(len(cut))]
    coef, *_ = np.linalg.lstsq(fit, T.astype(np.float64), rcond=None)
    A = coef[:-1].T  # [q, E]: answer i = A[i] . state + c[i]
    residual = np.abs(T - fit @ coef).max(1)  # per input: its largest
    weight = np.abs(A)
    readers = weight.sum(1) ** 2 / np.maximum((A**2).sum(1), np.finfo(float).tiny)
    per_bits = []
    for k in bits:
        step = span / (2.0**k - 1)
        rms = np.sqrt(((A * step) ** 2).sum(1) / 12)
        per_bits.append({
            "bits": int(k),
            "rms_median": float(np.median(rms)),
            "rms_max": float(rms.max()),
            "worst_max": float((weight * step / 2).sum(1).max()),
            "all_right_normal": math.prod(math.erf(0.5 / (math.sqrt(2) * v)) if v > 0 else 1.0
                                          for v in rms),
        })  # fmt: skip
    spread = cut.max(0) - cut.min(0)
    return {
        "weights": str(getattr(path, "name", path)).rsplit("/", 1)[-1],
        "entries": int(cut.shape[1]),
        "inputs": int(T.shape[0]),
        "seed": seed,
        "float_accuracy": float((np.abs(y - T) < 0.5).all(1).mean()),
        "residual_max": float(residual.max()),
        "residual_p99": float(np.quantile(residual, 0.99)),
        "readers_median": float(np.median(readers)),
        "cut_over_span_median": float(np.median(spread / np.where(span > 0, span, 1))),
        "per_bits": per_bits,
    }
