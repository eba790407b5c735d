"""Kernel-attention models of the ``capacity`` suite, in torch, and their weights files.

:class:`KernelLayer` is one layer of ``H`` heads that exposes its state: per
token the contributions ``c_j`` of every state entry (``phi_K(u_j)_k v(u_j)_c``
and, for the nonnegative maps, ``phi_K(u_j)_k``), whose sum over tokens is the
layer's sketch, and :meth:`KernelLayer.read`, which turns a state back into
outputs.  :class:`CapacityModel` stacks ``L`` layers on a residual stream; it is
the model :mod:`sketchsim.sketch.trained` runs in the engine (same formulas;
:func:`export` writes the weights file), and ``SoftmaxModel`` is the dense
softmax reference (no fixed-size state, not exported).

A user's layer plugs in through :mod:`sketchsim.experiments.model_plugins`; it is
untrusted code (#47): :class:`CapacityModel` turns whatever its ``__init__``,
``contributions``, ``read`` or ``head_arrays`` raises into one
:class:`~sketchsim.errors.PluginError` line naming the plug-in, and refuses
outputs of the wrong shape (checks the built-in :class:`KernelLayer` skips).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from sketchsim.errors import PluginError
from sketchsim.experiments.registers import register_codes, register_steps
from sketchsim.sketch.weights_file import FEATURE_MAPS, HEAD_ARRAYS, head_entries

__all__ = [
    "HEADROOM",
    "KernelLayer",
    "CapacityModel",
    "SoftmaxModel",
    "calibrate",
    "export_arrays",
    "model_from_weights",
    "fixed_point_state",
    "qat_quantizer",
    "softplus",
    "plugin_call",
]

#: Registers reach this fraction of the contributions' range below the smallest one
#: seen in calibration and span this much more than the largest sum seen, so that
#: inputs not calibrated on rarely clip or saturate.
HEADROOM = 1 / 16


def _activation(name: str):
    if name == "elu1":
        return lambda z: F.elu(z) + 1.0
    if name == "relu":
        return lambda z: F.relu(z) + 1e-3
    if name == "signed":
        return lambda z: z
    if name == "softplus":
        return softplus
    raise ValueError(f"unknown feature map {name!r}; choose one of {FEATURE_MAPS}")


def softplus(z: torch.Tensor) -> torch.Tensor:
    """``z + log1p(exp(-z))`` for ``z > 0``, else ``log1p(exp(z))``: the engine's formula
    (torch's ``softplus`` returns ``z`` above 20)."""
    return torch.where(z > 0, z, torch.zeros_like(z)) + torch.log1p(torch.exp(-z.abs()))


def plugin_call(plugin: str, fn, name: str, *args):
    """``fn(*args)``, a plug-in's layer method: whatever it raises (but running out of
    memory) is one :class:`~sketchsim.errors.PluginError` line naming ``plugin`` and
    ``name`` with the exception's first line."""
    try:
        return fn(*args)
    except MemoryError:
        raise
    except Exception as exc:
        text = next((ln.strip() for ln in str(exc).splitlines() if ln.strip()), "")
        text = text if len(text) <= 300 else text[:297] + "..."
        said = f": {text}" if text else ""
        raise PluginError(
            f"model plug-in {plugin}: {name} raised {type(exc).__name__}{said}"
        ) from None


class KernelLayer(nn.Module):
    """``H`` kernel heads over width-``m`` tokens; the state is ``[B, H, E]``.

    Parameters
    ----------
    m, heads, r, d : int
        Token width, heads, feature rank, value width.
    feature_map : {"elu1", "relu", "signed"}
    eps : float
        The normalizer's epsilon (nonnegative maps).
    """

    def __init__(self, m: int, heads: int, r: int, d: int, feature_map: str, eps: float = 1e-6):
        super().__init__()
        self.act = _activation(feature_map)
        self.m, self.heads, self.r, self.d = m, heads, r, d
        self.feature_map, self.eps = feature_map, eps
        self.normalize = feature_map != "signed"
        self.wq, self.wk = nn.Linear(m, heads * r), nn.Linear(m, heads * r)
        self.wv, self.wa = nn.Linear(m, heads * d), nn.Linear(m, heads * d)
        self.wu = nn.Parameter(torch.randn(heads, m, d) / (d**0.5 * 4))

    @property
    def entries(self) -> int:
        """State entries per head (``E``)."""
        return head_entries(self.r, self.d, self.feature_map)

    def contributions(self, u: torch.Tensor) -> torch.Tensor:
        """Per-token state contributions ``[B, N, H, E]`` (their sum over tokens is the state)."""
        B, N, _ = u.shape
        fk = self.act(self.wk(u)).view(B, N, self.heads, self.r, 1)
        v = self.wv(u).view(B, N, self.heads, 1, self.d)
        parts = [fk * v]
        if self.normalize:
            parts.append(fk)
        return torch.cat(parts, -1).reshape(B, N, self.heads, self.entries)

    def read(self, u: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(y, delta)``: the layer's readout ``[B, N]`` and residual update ``[B, N, m]``."""
        B, N, _ = u.shape
        H, r, d = self.heads, self.r, self.d
        fq = self.act(self.wq(u)).view(B, N, H, r)
        av = self.wa(u).view(B, N, H, d)
        st = state.view(B, H, r, -1)
        o = torch.einsum("bnhr,bhrc->bnhc", fq, st[..., :d])
        if self.normalize:
            o = o / (torch.einsum("bnhr,bhr->bnh", fq, st[..., d]) + self.eps).unsqueeze(-1)
        else:
            o = o / N
        y = (av * o).sum((-1, -2))
        delta = torch.einsum("hmc,bnhc->bnm", self.wu, o)
        return y, delta

    def head_arrays(self, h: int) -> dict:
        """Head ``h``'s weights as the float64 arrays of the weights file (no calibration)."""
        r, d = self.r, self.d

        def rows(lin, k, n):
            return lin.weight[k * n : (k + 1) * n], lin.bias[k * n : (k + 1) * n]

        wq, bq = rows(self.wq, h, r)
        wk, bk = rows(self.wk, h, r)
        wv, bv = rows(self.wv, h, d)
        wa, ba = rows(self.wa, h, d)
        out = dict(wq=wq, bq=bq, wk=wk, bk=bk, wv=wv, bv=bv, wa=wa, ba=ba, wu=self.wu[h])
        return {k: v.detach().double().cpu().numpy() for k, v in out.items()}


class CapacityModel(nn.Module):
    """``L`` :class:`KernelLayer` s on a residual stream ``u^0 = 2x - 1``; outputs ``[B, N]``.

    ``quantize``, when given to :meth:`forward`, maps ``(layer, contributions)``
    to the state a layer reads (default: the exact sum over tokens).

    ``layer_type`` (a plug-in's layer class; default :class:`KernelLayer`) is
    guarded: an exception it raises, and contributions or readouts of the wrong
    shape, are a :class:`~sketchsim.errors.PluginError` naming the plug-in
    (``plugin``, its spec; None for the built-in layer).
    """

    def __init__(
        self,
        m: int,
        layers: int,
        heads: int,
        r: int,
        d: int,
        feature_map: str,
        eps: float = 1e-6,
        layer_type=None,
    ):
        super().__init__()
        make = layer_type or KernelLayer
        self.plugin = None
        if make is KernelLayer:
            built = [make(m, heads, r, d, feature_map, eps) for _ in range(layers)]
        else:
            from sketchsim.experiments.model_plugins import plugin_label

            self.plugin = plugin_label(make)
            built = [self._guarded(make, "__init__", m, heads, r, d, feature_map, eps)
                     for _ in range(layers)]  # fmt: skip
            for layer in built:
                if not isinstance(layer, nn.Module):
                    self._refuse(f"its layer class built a {type(layer).__name__}, not a torch "
                                 "nn.Module")  # fmt: skip
        self.layers = nn.ModuleList(built)
        self.out = nn.Linear(m, 1)
        self.arch = dict(
            layers=layers, heads=heads, rank=r, value_width=d, feature_map=feature_map, m=m, eps=eps
        )

    def forward(self, x: torch.Tensor, quantize=None, states: list | None = None):
        u = 2 * x - 1
        y = self.out(u).squeeze(-1)
        for k, layer in enumerate(self.layers):
            if self.plugin is None:
                c = layer.contributions(u)
            else:
                c = self._contributions(layer, u)
            state = c.sum(1) if quantize is None else quantize(k, c)
            if states is not None:
                states.append((c.detach(), state.detach()))
            if self.plugin is None:
                dy, delta = layer.read(u, state)
            else:
                dy, delta = self._read(layer, u, state)
            y = y + dy
            u = u + delta
        return y

    # -- a plug-in layer's guards (never on the built-in path) ------------------------

    def _refuse(self, what: str):
        raise PluginError(f"model plug-in {self.plugin}: {what}")

    def _guarded(self, fn, name: str, *args):
        """``fn(*args)``; whatever it raises is one line naming the plug-in and ``name``."""
        return plugin_call(self.plugin, fn, name, *args)

    def _contributions(self, layer, u: torch.Tensor) -> torch.Tensor:
        B, N, _ = u.shape
        entries = self._guarded(lambda: layer.entries, "entries")
        if isinstance(entries, bool) or not isinstance(entries, int) or entries < 1:
            self._refuse(f"entries is {entries!r}, not an integer >= 1")
        c = self._guarded(layer.contributions, "contributions", u)
        want = (B, N, self.arch["heads"], entries)
        if not isinstance(c, torch.Tensor) or tuple(c.shape) != want:
            got = tuple(c.shape) if isinstance(c, torch.Tensor) else type(c).__name__
            self._refuse(f"contributions returned {got}; expected [B, N, H, E] = {want} "
                         "(E = layer.entries)")  # fmt: skip
        return c

    def _read(self, layer, u: torch.Tensor, state: torch.Tensor):
        B, N, m = u.shape
        out = self._guarded(layer.read, "read", u, state)
        want = "(y [B, N], delta [B, N, m]) = " + f"({(B, N)}, {(B, N, m)})"
        pair = isinstance(out, tuple | list) and len(out) == 2
        if not pair or not all(isinstance(v, torch.Tensor) for v in out):
            size = f" of {len(out)}" if isinstance(out, tuple | list) else ""
            self._refuse(f"read returned {type(out).__name__}{size}; expected {want}")
        y, delta = out
        if tuple(y.shape) != (B, N) or tuple(delta.shape) != (B, N, m):
            self._refuse(f"read returned y {tuple(y.shape)} and delta {tuple(delta.shape)}; "
                         f"expected {want}")  # fmt: skip
        return y, delta

    def layer_arrays(self, layer, h: int) -> dict:
        """Head ``h`` of ``layer`` as the weights file's arrays (a plug-in's: guarded)."""
        if self.plugin is None:
            return layer.head_arrays(h)
        head = self._guarded(layer.head_arrays, "head_arrays", h)
        if not isinstance(head, dict):
            self._refuse(f"head_arrays returned {type(head).__name__}, not a dict of arrays")
        return head


class SoftmaxModel(nn.Module):
    """The reference: ``L`` layers of ``H`` dense softmax heads (no fixed-size state)."""

    def __init__(self, m: int, layers: int, heads: int, d: int):
        super().__init__()
        self.heads, self.d = heads, d
        self.qkv = nn.ModuleList([nn.Linear(m, 3 * heads * d) for _ in range(layers)])
        self.wa = nn.ModuleList([nn.Linear(m, heads * d) for _ in range(layers)])
        self.wu = nn.ModuleList([nn.Linear(heads * d, m, bias=False) for _ in range(layers)])
        self.out = nn.Linear(m, 1)

    def forward(self, x: torch.Tensor, quantize=None, states=None):
        B, N, _ = x.shape
        u = 2 * x - 1
        y = self.out(u).squeeze(-1)
        for qkv, wa, wu in zip(self.qkv, self.wa, self.wu, strict=True):
            q, k, v = qkv(u).view(B, N, 3, self.heads, self.d).unbind(2)
            w = torch.softmax(torch.einsum("bihc,bjhc->bhij", q, k) / self.d**0.5, -1)
            o = torch.einsum("bhij,bjhc->bihc", w, v)
            y = y + (wa(u).view(B, N, self.heads, self.d) * o).sum((-1, -2))
            u = u + wu(o.reshape(B, N, -1))
        return y


def calibrate(model: CapacityModel, x: torch.Tensor, quantize=None) -> list[tuple]:
    """Per layer ``(lo, span)`` ``[H, E]`` float64 from the inputs ``x`` (the training set).

    ``lo_e``: the smallest contribution ``c_j`` of any token, less :data:`HEADROOM`
    times the contributions' range; ``span_e``: the largest ``sum_j (c_j - lo_e)``
    of any input, times ``1 +`` :data:`HEADROOM` (docs/theory.md, "Trained models").
    """
    states: list = []
    with torch.no_grad():
        model.double()(x.double(), quantize=quantize, states=states)
    out = []
    for c, _ in states:
        lo, span = register_range(c)
        out.append((lo.cpu().numpy(), span.cpu().numpy()))
    return out


def register_range(c: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(lo, span)`` ``[H, E]`` of contributions ``c`` ``[B, N, H, E]``: the smallest
    contribution less :data:`HEADROOM` of their range, and the largest register value
    ``sum_j (c_j - lo)`` times ``1 + HEADROOM`` (what :func:`calibrate` stores)."""
    low, high = c.amin((0, 1)), c.amax((0, 1))
    lo = low - HEADROOM * (high - low)
    return lo, (c - lo).sum(1).amax(0) * (1 + HEADROOM)


def export_arrays(model: CapacityModel, calibration: list[tuple]) -> dict:
    """The arrays of the weights file (:mod:`sketchsim.sketch.trained`)."""
    arrays = {}
    for lay, layer in enumerate(model.layers):
        lo, span = calibration[lay]
        for h in range(model.arch["heads"]):
            head = dict(model.layer_arrays(layer, h))
            head.update(lo=lo[h], span=span[h])
            if set(head) != set(HEAD_ARRAYS):
                who = f"model plug-in {model.plugin}" if model.plugin else "the kernel layer"
                need = [k for k in HEAD_ARRAYS if k not in ("lo", "span")]
                raise PluginError(
                    f"{who}: head_arrays gave {', '.join(sorted(set(head) - {'lo', 'span'}))}; "
                    f"the weights file needs {', '.join(need)}"
                )
            arrays.update({f"L{lay}.H{h}.{k}": v for k, v in head.items()})
    arrays["wb"] = model.out.weight.detach().double().cpu().numpy()[0]
    arrays["bb"] = model.out.bias.detach().double().cpu().numpy()
    return arrays


def model_from_weights(weights) -> CapacityModel:
    """The torch model (float64) of a loaded weights file (``load_weights``)."""
    a = weights.arch
    model = CapacityModel(
        a["m"], a["layers"], a["heads"], a["rank"], a["value_width"], a["feature_map"], a["eps"]
    ).double()
    arr = {k: torch.tensor(v) for k, v in weights.arrays.items()}  # a copy: may be read-only
    r, d = a["rank"], a["value_width"]
    with torch.no_grad():
        for lay, layer in enumerate(model.layers):
            for h in range(a["heads"]):
                g = {k: arr[f"L{lay}.H{h}.{k}"] for k in HEAD_ARRAYS}
                for name, n in (("wq", r), ("wk", r), ("wv", d), ("wa", d)):
                    lin = getattr(layer, name)
                    lin.weight[h * n : (h + 1) * n] = g[name]
                    lin.bias[h * n : (h + 1) * n] = g["b" + name[1]]
                layer.wu[h] = g["wu"]
        model.out.weight[0] = arr["wb"]
        model.out.bias[:] = arr["bb"]
    return model


def fixed_point_state(c: torch.Tensor, bits: int, lo: torch.Tensor, span: torch.Tensor):
    """The state ``[B, H, E]`` a layer reads when its contributions ``c`` ``[B, N, H, E]``
    cross ``bits``-bit registers calibrated by ``lo``, ``span`` ``[H, E]``: the engine's
    fixed point (docs/theory.md 5.2; ``tests/naive.py``'s ``trained_outputs``).

    Each token's symbol is ``clip(floor((c - lo) / step + 1/2), 0, top)`` with
    ``top = 2^bits - 1``, ``step = span / top`` (1 where ``span`` is 0); the
    register saturates at ``top``; the state is ``step * register + N lo``.
    """
    top = float(2**bits - 1)
    step = register_steps(span, top)
    code = register_codes(c, lo, step, top).sum(1)
    return step * torch.clamp(code, max=top) + c.shape[1] * lo


def qat_quantizer(bits: int):
    """``quantize(layer, c)`` for :meth:`CapacityModel.forward`: quantization-aware training.

    The forward pass reads the :func:`fixed_point_state` of ``c`` at ``bits`` bits,
    calibrated on the batch itself by :func:`register_range`, as :func:`calibrate`
    calibrates a saved file; the backward pass is the exact sum's (straight-through).
    """

    def quantize(_layer: int, c: torch.Tensor) -> torch.Tensor:
        exact = c.sum(1)
        with torch.no_grad():
            state = fixed_point_state(c, bits, *register_range(c))
        return exact + (state - exact).detach()

    return quantize
