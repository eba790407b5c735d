"""The readout basis of a one-layer causal model's state (docs/theory.md 5.3, "The
readout basis").

A head's values enter its state and leave it through its value space only: an
invertible ``R`` (``d x d``) with ``v -> R v``, ``a -> R^-T a`` and ``wu -> wu R^-1``
gives the same outputs on every input, in exact arithmetic, for the kinds whose update
commutes with ``R`` (:data:`REBASE_KINDS`).  What changes is what each register holds,
so what rounding it costs.  :func:`readout_basis` picks ``R`` whose first ``q`` rows are
the queries' readout vectors ``a(u_i)``: entry ``c`` of a feature row then holds
exactly what query ``c`` reads, one answer per register.
"""

from __future__ import annotations

import numpy as np
import torch

from sketchsim.errors import SketchsimError
from sketchsim.sketch.kinds import RECORDS

__all__ = ["REBASE_KINDS", "readout_basis", "readout_matrix"]

#: Kinds whose state update commutes with a change of basis of the value space
#: (``mamba`` does not: its step ``dt`` and skip ``dskip`` act per value channel).
REBASE_KINDS = tuple(k.name for k in RECORDS if k.rebase)


def readout_matrix(readouts: np.ndarray) -> np.ndarray:
    """``R`` (``d x d``) of the query readout vectors ``readouts`` (``q x d``): those rows,
    then an orthonormal basis of the vectors orthogonal to them.

    Raises
    ------
    SketchsimError
        ``q > d``, readouts that are not finite, or not linearly independent (no basis
        holds one query per register).
    """
    from scipy.linalg import null_space

    q, d = readouts.shape
    if not np.isfinite(readouts).all():
        raise SketchsimError("the queries' readout vectors are not finite: no readout basis")
    if q > d:
        raise SketchsimError(f"the readout basis needs value width >= q ({d} < {q})")
    if np.linalg.matrix_rank(readouts) < q:
        raise SketchsimError("the queries' readout vectors are not linearly independent: "
                             "no basis of the state holds one query per register")  # fmt: skip
    return np.vstack([readouts, null_space(readouts).T])


def readout_basis(model, queries: torch.Tensor) -> None:
    """Change, in place, every head of the one-layer causal ``model`` to its readout basis.

    ``queries``: the family's query tokens ``[q, m]`` (0/1), the same in every input.
    The outputs are unchanged up to float rounding (``tests/experiments/
    test_state_basis.py`` checks them against the model before).
    """
    layer = model.layers[0]
    if len(model.layers) != 1 or layer.kind not in REBASE_KINDS or model.plugin is not None:
        raise SketchsimError("the readout basis changes one-layer causal models of the kinds "
                             f"{', '.join(REBASE_KINDS)}")  # fmt: skip
    H, d = layer.heads, layer.d
    with torch.no_grad():
        u = (2 * queries - 1).to(layer.wa.weight.dtype)
        a = layer.wa(u).double().view(-1, H, d)
        for h in range(H):
            R = torch.from_numpy(readout_matrix(a[:, h].cpu().numpy())).to(a.device)
            Ri = torch.linalg.inv(R)
            rows = slice(h * d, (h + 1) * d)
            for lin, M in ((layer.wv, R), (layer.wa, Ri.T)):
                w, b = lin.weight[rows], lin.bias[rows]
                w.copy_((M @ w.double()).to(w.dtype))
                b.copy_((M @ b.double()).to(b.dtype))
            layer.wu[h].copy_((layer.wu[h].double() @ Ri).to(layer.wu.dtype))
