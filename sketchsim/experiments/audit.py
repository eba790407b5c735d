"""Bit audit of trained heads: how many bits of attention state a trained head really uses.

A normalized kernel head carries, per sequence, the state of linear attention
(THEORY section 2): the numerator ``S = sum_j phi_K(x_j) v(x_j)^T`` (``r x d``)
and the normalizer ``z = sum_j phi_K(x_j)`` (``r``); every output is
``<a(x_i), phi_Q(x_i)^T S> / (phi_Q(x_i)^T z + eps) + b(x_i)``.  The audit
quantizes ``S`` and ``z`` to ``k`` bits per coordinate (uniform levels over a
range fixed per head from the inputs judged: ``[0, max z]`` for the
nonnegative normalizer, ``[-max|S|, max|S|]`` for the numerator), re-evaluates
the head on the inputs the sweep judged it on, and reports per ``k`` the
exact-sequence accuracy and the state size in bits, ``k (r d + r)`` per head,
beside float32 (32 bits per coordinate).  This bridges the trained heads and
the sketch engine's question: a head whose accuracy holds at ``k`` bits is a
sketch of ``k (r d + r)`` bits.

The float32 row is computed through the same state formula without rounding
and must give the accuracy the sweep reported (``float32_matches``).  Every
failing head (not exact on the judged inputs) is re-evaluated in float64: a
failure that vanishes there is numerical, one that stays is representational.
Softmax heads have no fixed-size state and are listed as such.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from sketchsim.config import EXACT_TOLERANCE
from sketchsim.errors import SketchsimError
from sketchsim.experiments.models import Encoded, KernelHead, MultiHead, make_head
from sketchsim.minip.token_ids import token_ids

__all__ = [
    "BITS",
    "load_run",
    "state_outputs",
    "audit_run",
    "audit_file",
    "audit_dir",
    "within_point",
    "certified_floor",
]

#: Bits per state coordinate audited (float32 is added as 32).
BITS = tuple(range(1, 17))


def load_run(path: str | Path) -> dict:
    """A weights file written by :func:`sketchsim.experiments.sweep.save_weights`."""
    try:
        run = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - a truncated or foreign file
        raise SketchsimError(f"{path} is not a sketchsim weights file ({exc})") from None
    if not isinstance(run, dict) or not _RUN_KEYS <= set(run):
        raise SketchsimError(f"{path} is not a sketchsim weights file")
    spec = run["spec"]
    if not isinstance(spec, dict) or not _SPEC_KEYS <= set(spec):
        raise SketchsimError(f"{path}: its run spec is not one sketch sweep wrote")
    tokens, targets = run["tokens"], run["targets"]
    if (
        not isinstance(tokens, torch.Tensor)
        or tokens.ndim != 3
        or not isinstance(targets, torch.Tensor)
        or targets.shape[0] != tokens.shape[0]
    ):
        raise SketchsimError(f"{path}: its judged inputs are not tokens [B, N, m] with targets")
    return run


_RUN_KEYS = {"spec", "state_dict", "tokens", "targets", "scored", "accuracy", "m", "vocab"}
_SPEC_KEYS = {"suite", "model", "feature_map", "rank", "seed", "heads", "eps", "encoding"}


def _rebuild(run: dict, dtype=torch.float32):
    spec = run["spec"]
    head = make_head(
        spec["model"], run["m"], spec["rank"], spec["feature_map"], vocab=run["vocab"],
        heads=spec["heads"], seed=spec["seed"], eps=spec["eps"], encoding=spec["encoding"],
    )  # fmt: skip
    try:
        head.load_state_dict(run["state_dict"])
    except (RuntimeError, KeyError, TypeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise SketchsimError(f"the saved weights do not fit the head they name ({first})") from None
    return head.to(dtype).eval()


def _kernel_heads(model) -> tuple[list[KernelHead], bool]:
    """The kernel heads inside ``model`` and whether tokens are fed as ``2x - 1``."""
    encoded = isinstance(model, Encoded)
    inner = model.head if encoded else model
    parts = list(inner.heads) if isinstance(inner, MultiHead) else [inner]
    if not all(isinstance(h, KernelHead) for h in parts):
        return [], encoded
    return parts, encoded


def _quantize(t: torch.Tensor, bits: int | None, low: float, high: float) -> torch.Tensor:
    if bits is None:
        return t
    levels = 2**bits - 1
    if high <= low:
        return torch.full_like(t, low)
    step = (high - low) / levels
    return torch.round((t.clamp(low, high) - low) / step) * step + low


def state_outputs(model, x, ids, bits: int | None = None, ranges=None):
    """Outputs ``[B, N]`` computed from each sequence's (quantized) attention state.

    ``ranges`` gives ``(max |S|, min(0, min z), max z)`` per kernel head (default:
    from these inputs).
    Returns ``(outputs, ranges)``.
    """
    heads, encoded = _kernel_heads(model)
    xe = 2 * x - 1 if encoded else x
    total, found = 0, []
    for k, h in enumerate(heads):
        xq = xe[:, -1:] if h.causal else xe
        iq = None if ids is None else (ids[:, -1:] if h.causal else ids)
        fq, fk = h.phi_q(xq, iq), h.phi_k(xe, ids)
        S = torch.einsum("bjr,bjd->brd", fk, h.value(xe))
        z = fk.sum(1)
        if ranges:
            s_max, z_min, z_max = ranges[k]
        else:  # z >= 0 for nonnegative features; signed heads' normalizers may be negative
            s_max, z_min, z_max = float(S.abs().max()), min(0.0, float(z.min())), float(z.max())
        found.append((s_max, z_min, z_max))
        Sq = _quantize(S, bits, -s_max, s_max)
        zq = _quantize(z, bits, z_min, z_max)
        num = torch.einsum("bir,brd->bid", fq, Sq)
        den = torch.einsum("bir,br->bi", fq, zq).unsqueeze(-1) + h.eps
        total = total + (h.a(xq) * (num / den)).sum(-1) + h.b(xq).squeeze(-1)
    return total, found


def _accuracy(y: torch.Tensor, targets: torch.Tensor, scored) -> float:
    if scored is not None:
        y = y[:, scored : scored + 1]
    right = (y - targets).abs() < EXACT_TOLERANCE
    return float(right.all(-1).float().mean())


def within_point(rows: list[dict], reference: float) -> int | None:
    """Smallest audited ``k`` whose accuracy is within one point (0.01) of ``reference``."""
    for row in rows:
        if row["bits"] != 32 and row["accuracy"] >= reference - 0.01:
            return row["bits"]
    return None


def audit_run(run: dict, bits=BITS) -> dict:
    """The audit of one saved head (see the module docstring); a JSON-ready dict."""
    spec = run["spec"]
    tokens = run["tokens"].numpy()
    x = torch.tensor(tokens, dtype=torch.float32)
    targets = run["targets"].to(torch.float32)
    ids = torch.tensor(token_ids(tokens)[0]) if spec["feature_map"] == "table" else None
    out = {
        "spec": spec,
        "reported_accuracy": run["accuracy"],
        "inputs": int(tokens.shape[0]),
    }
    model = _rebuild(run)
    heads, _ = _kernel_heads(model)
    with torch.no_grad():
        if not heads:
            out["state"] = "none: softmax attention keeps every token (no fixed-size state)"
            return out
        r, d = spec["rank"], heads[0].value.out_features
        coords = len(heads) * (r * d + r)
        y32, ranges = state_outputs(model, x, ids)
        acc32 = _accuracy(y32, targets, run["scored"])
        rows = [{"bits": 32, "state_bits": 32 * coords, "accuracy": acc32}]
        for k in bits:
            yk, _ = state_outputs(model, x, ids, k, ranges)
            rows.append(
                {
                    "bits": k,
                    "state_bits": k * coords,
                    "accuracy": _accuracy(yk, targets, run["scored"]),
                }
            )
        out.update(
            state_coordinates=coords,
            state_floats=coords,  # zoology-style state size: floats per sequence
            state_bits_float32=32 * coords,
            rows=rows,
            float32_matches=abs(acc32 - run["accuracy"]) < 0.5 / max(1, tokens.shape[0]),
            smallest_bits_within_1_point=within_point(rows[1:], acc32),
        )
        if acc32 < 1.0:  # a failing head: numerical or representational?
            y64, _ = state_outputs(_rebuild(run, torch.float64), x.double(), ids)
            acc64 = _accuracy(y64, targets.double(), run["scored"])
            out["float64_accuracy"] = acc64
            out["failure"] = "numerical" if acc64 == 1.0 else "representational"
    return out


def certified_floor(run: dict) -> dict | None:
    """For a witness-suite head: the certified rank of its family and the state it forces.

    Any head with error below 1/2 on the family has rank ``r >= r*``
    (:func:`sketchsim.certify.certify`), so its state has at least ``r* (d + 1)``
    coordinates: at one bit each, that many bits.  None for other suites.
    """
    if run["spec"]["suite"] != "witness" or run["scored"] is None:
        return None
    from sketchsim.certify import certify
    from sketchsim.certify.witness import WitnessFamily

    tokens = run["tokens"].numpy()
    targets = run["targets"].numpy()[:, 0].astype(np.int64)
    family = WitnessFamily(tokens, int(run["scored"]) + 1, targets, {})
    rank = certify(family, eps_list=()).certified_rank["0.5"]
    d = run["m"]  # value dimension of every head built by make_head (d = m)
    return {"certified_rank": rank, "min_state_bits": rank * (d + 1)}


def audit_file(path: Path, bits=BITS) -> dict:
    """One head's row (:func:`audit_run`, and its certified floor when it has one)."""
    run = load_run(path)
    try:
        row = {"file": path.name, **audit_run(run, bits)}
    except SketchsimError as exc:
        raise SketchsimError(f"{path.name}: {exc}") from None
    floor = certified_floor(run) if "rows" in row else None
    if floor is not None:
        row["certified"] = floor
    return row


def audit_dir(folder: str | Path, bits=BITS, progress=None) -> list[dict]:
    """Audit every ``run-*.pt`` file in ``folder`` (sorted by name), one unit each
    (:func:`sketchsim.units.run_units`; ``progress(done, total)``)."""
    from sketchsim.units import run_units

    files = sorted(Path(folder).glob("run-*.pt"))
    if not files:
        raise SketchsimError(f"no weights files (run-*.pt) in {folder}: run sweep --save-weights")
    return run_units([(path, bits) for path in files], audit_file, progress=progress)
