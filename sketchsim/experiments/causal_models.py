"""Causal architectures in torch: the recurrences of docs/theory.md 5.3, trained and exported.

:class:`CausalLayer` is one layer of ``H`` heads of one kind (:data:`KINDS`:
causal linear attention, Based, GLA, DeltaNet, gated DeltaNet, a Mamba-style
selective diagonal state space, sliding-window softmax attention); it steps
one token at a time on a state ``[B, H, E]`` kept in the entry order the
engine uses.  :class:`CausalModel` stacks ``L`` layers on a residual stream
and reads a family's inputs (queries first) in causal order: the data tokens,
then the queries.  ``quantize``, when given, maps ``(layer, state)`` to the
state kept after each update (the ``K``-bit registers of
:func:`fixed_point_state`; default exact), so the model evaluated with it is
the engine's fixed point.  :func:`export_causal` writes the arrays of
:mod:`sketchsim.sketch.causal`; :func:`causal_from_weights` reads them back.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from sketchsim.errors import PluginError, SketchsimError
from sketchsim.experiments.registers import register_steps, register_values
from sketchsim.sketch.causal import (
    COMMON_ARRAYS,
    FIXED_MAPS,
    GATE_ARRAYS,
    KINDS,
    UNNORMALIZED_MAPS,
    causal_dims,
    causal_entries,
    causal_name,
)
from sketchsim.sketch.kinds import RECORDS, retention_decay

__all__ = [
    "CausalLayer",
    "CausalModel",
    "causal_arch",
    "state_range",
    "fixed_point_state",
    "causal_qat_quantizer",
    "CutNoise",
    "export_causal",
    "causal_from_weights",
]

#: Registers reach this fraction of an entry's range below the smallest value seen in
#: calibration and above the largest.
HEADROOM = 1 / 16
#: Kinds whose state update and readout are affine in the state
#: (:meth:`CausalModel._affine_readout`).
AFFINE_KINDS = tuple(k.name for k in RECORDS if k.affine)


def causal_arch(kind, m, layers, heads, r, d, feature_map="elu1", eps=1e-6, window=0) -> dict:
    """The header's ``architecture`` of a causal model (``feature_map``: ``linear`` only)."""
    if kind not in KINDS:
        raise ValueError(f"unknown architecture {kind!r}; choose one of {', '.join(KINDS)}")
    fmap = feature_map if kind == "linear" else FIXED_MAPS[kind]
    return dict(
        kind=kind,
        layers=layers,
        heads=heads,
        rank=r,
        value_width=d,
        feature_map=fmap,
        m=m,
        eps=eps,
        window=window if kind == "window" else 0,
    )


def _act(name: str, z: torch.Tensor) -> torch.Tensor:
    if name == "elu1":
        return F.elu(z) + 1.0
    if name == "elu1sum":  # fla's norm_q / norm_k: each feature over their sum
        f = F.elu(z) + 1.0
        return f / (f.sum(-1, keepdim=True) + 1e-4)
    if name == "relu":
        return F.relu(z) + 1e-3
    if name == "softplus":
        from sketchsim.experiments.capacity_models import softplus

        return softplus(z)
    return z


def _normalized(kind: str, fmap: str) -> bool:
    """Whether a sum-state kind's state keeps the normalizer ``z`` and divides by it."""
    return kind == "based" or fmap not in UNNORMALIZED_MAPS


def _taylor(x: torch.Tensor) -> torch.Tensor:
    """Based's features ``[1, x / r^(1/4), vec(x x^T) / (sqrt(2) sqrt(r))]`` of ``x [..., r]``."""
    r = x.shape[-1]
    outer = (x.unsqueeze(-1) * x.unsqueeze(-2)).flatten(-2)
    one = torch.ones_like(x[..., :1])
    return torch.cat([one, x / math.sqrt(math.sqrt(r)), outer / (math.sqrt(2) * math.sqrt(r))], -1)


class CausalLayer(nn.Module):
    """``H`` heads of architecture ``arch["kind"]`` over width-``m`` tokens."""

    def __init__(self, arch: dict, index: int = 0):
        super().__init__()
        self.arch, self.index = arch, index
        self.kind, m, H = arch["kind"], arch["m"], arch["heads"]
        r, d = arch["rank"], arch["value_width"]
        self.m, self.heads, self.r, self.d = m, H, r, d
        self.entries = causal_entries(arch)
        self.wq, self.wk = nn.Linear(m, H * r), nn.Linear(m, H * r)
        self.wv, self.wa = nn.Linear(m, H * d), nn.Linear(m, H * d)
        self.wu = nn.Parameter(torch.randn(H, m, d) / (d**0.5 * 4))
        gates = GATE_ARRAYS[self.kind]
        if "wg" in gates:
            rows = {"r": r, "d": d, 1: 1}[gates["wg"][0]]
            self.wg = nn.Linear(m, H * rows)
        if "wbeta" in gates:
            self.wbeta = nn.Linear(m, H)
        if self.kind == "gated-deltanet":
            self.alog = nn.Parameter(torch.zeros(H, 1))
        if self.kind == "mamba":  # S4D-real: A_k = -(k + 1)
            a = torch.log(torch.arange(1, r + 1, dtype=torch.float32))
            self.alog = nn.Parameter(a.view(1, r, 1).repeat(H, 1, d))
            self.dskip = nn.Parameter(torch.ones(H, d))

    def step(self, u: torch.Tensor, st: torch.Tensor, count: int, quantize=None, residual=True):
        """One token: ``(y, delta, state)`` from its stream ``u [B, m]`` (or ``[1, m]``: a token
        every input shares) and the state ``st [B, H, E]``; ``count``: tokens so far, this
        one included (the window's); ``residual=False``: ``delta`` is None (not computed)."""
        B, H, r, d, n = st.shape[0], self.heads, self.r, self.d, u.shape[0]
        q, k = self.wq(u).view(n, H, r).expand(B, H, r), self.wk(u).view(n, H, r).expand(B, H, r)
        v, a = self.wv(u).view(n, H, d).expand(B, H, d), self.wa(u).view(n, H, d).expand(B, H, d)
        gates = {name: g.expand(B, *g.shape[1:]) for name, g in self.gates(u).items()}
        o, S = self.recur(q, k, v, gates, st, count, quantize)
        y = (a * o).sum((-1, -2))
        delta = torch.einsum("hmc,bhc->bm", self.wu, o) if residual else None
        return y, delta, S

    def gates(self, u: torch.Tensor) -> dict:
        """The kind's data-dependent gates of stream ``u [B, m]`` (docs/theory.md 5.3):
        ``gk`` (GLA's log decay ``[B, H, r]``), ``beta`` ``[B, H, 1]``, ``g`` (gated
        DeltaNet's log decay ``[B, H]``), ``dt`` (Mamba's step ``[B, H, d]``)."""
        B, H = u.shape[0], self.heads
        out = {}
        if self.kind == "gla":
            out["gk"] = F.logsigmoid(self.wg(u).view(B, H, self.r)) / 16.0
        if self.kind in ("deltanet", "gated-deltanet"):
            out["beta"] = torch.sigmoid(self.wbeta(u).view(B, H, 1))
        if self.kind == "gated-deltanet":
            out["g"] = -torch.exp(self.alog).view(1, H) * F.softplus(self.wg(u).view(B, H))
        if self.kind == "mamba":
            out["dt"] = F.softplus(self.wg(u).view(B, H, self.d))
        if self.kind == "retention":  # RetNet's fixed decay per head, as GLA's log decay
            decay = torch.tensor([retention_decay(h) for h in range(H)], dtype=u.dtype)
            out["gk"] = torch.log(decay).view(1, H, 1).expand(B, H, self.r)
        return out

    def recur(self, q, k, v, gates: dict, st, count: int, quantize=None):
        """``(o, state)``: the recurrence on projections ``q, k [B, H, r]``, ``v [B, H, d]``
        and :meth:`gates` from the state ``st [B, H, E]`` (the part each fla reference
        function computes; ``tests/sketch/test_causal_fla.py``)."""
        B, H, r, d = q.shape[0], self.heads, self.r, self.d
        kind, fmap = self.kind, self.arch["feature_map"]
        if kind in ("linear", "based"):
            fq, fk = (_taylor(q), _taylor(k)) if kind == "based" else (_act(fmap, q), _act(fmap, k))
            norm = _normalized(kind, fmap)
            add = fk.unsqueeze(-1) * v.unsqueeze(-2)
            if norm:
                add = torch.cat([add, fk.unsqueeze(-1)], -1)
            S = self._keep(st.view(B, H, fk.shape[-1], -1) + add, quantize)
            o = torch.einsum("bhk,bhkc->bhc", fq, S[..., :d])
            if norm:
                den = torch.einsum("bhk,bhk->bh", fq, S[..., d]) + self.arch["eps"]
                o = o / den.unsqueeze(-1)
        elif kind == "window":
            w = self.arch["window"]
            newest = torch.cat([k, v], -1)[:, :, None]
            S = self._keep(torch.cat([st.view(B, H, w, r + d)[:, :, 1:], newest], 2), quantize)
            logits = torch.einsum("bhk,bhjk->bhj", q, S[..., :r]) / math.sqrt(r)
            empty = torch.arange(w, device=q.device) < w - min(count, w)
            p = torch.softmax(logits.masked_fill(empty, -math.inf), -1)
            o = torch.einsum("bhj,bhjc->bhc", p, S[..., r:])
        else:
            S = st.view(B, H, r, d)
            if kind in ("gla", "retention"):
                S = torch.exp(gates["gk"]).unsqueeze(-1) * S + k.unsqueeze(-1) * v.unsqueeze(-2)
                qs = q / math.sqrt(r)
            elif kind in ("deltanet", "gated-deltanet"):
                qs, kn = F.normalize(q, dim=-1) / math.sqrt(r), F.normalize(k, dim=-1)
                if kind == "gated-deltanet":
                    S = torch.exp(gates["g"]).view(B, H, 1, 1) * S
                new = gates["beta"] * (v - torch.einsum("bhkc,bhk->bhc", S, kn))
                S = S + kn.unsqueeze(-1) * new.unsqueeze(-2)
            else:  # mamba
                dt = gates["dt"]
                decay = torch.exp(-dt.unsqueeze(-2) * torch.exp(self.alog))
                S = decay * S + k.unsqueeze(-1) * (dt * v).unsqueeze(-2)
                qs = q
            S = self._keep(S, quantize)
            o = torch.einsum("bhk,bhkc->bhc", qs, S)
            if kind == "mamba":
                o = o + self.dskip * v
        return o, S.reshape(B, H, self.entries)

    def sum_terms(self, u: torch.Tensor):
        """``(phi(q), a, term)`` of tokens ``u [B, T, m]`` for a sum-state kind: the
        features ``[B, T, H, D]``, readouts ``[B, T, H, d]`` and each token's term of the
        state ``[B, T, H, D, W]`` (``phi(k) v^T``, then ``phi(k)`` when normalized)."""
        B, T, _ = u.shape
        H, r, d, fmap = self.heads, self.r, self.d, self.arch["feature_map"]
        q, k = self.wq(u).view(B, T, H, r), self.wk(u).view(B, T, H, r)
        v, a = self.wv(u).view(B, T, H, d), self.wa(u).view(B, T, H, d)
        if self.kind == "based":
            fq, fk = _taylor(q), _taylor(k)
        else:
            fq, fk = _act(fmap, q), _act(fmap, k)
        term = fk.unsqueeze(-1) * v.unsqueeze(-2)
        if _normalized(self.kind, fmap):
            term = torch.cat([term, fk.unsqueeze(-1)], -1)
        return fq, a, term

    def read_sum(self, fq: torch.Tensor, S: torch.Tensor) -> torch.Tensor:
        """``o [B, T, H, d]`` of features ``fq [B, T, H, D]`` from states ``S [B, T, H, D, W]``
        (as :meth:`recur` reads them)."""
        d = self.d
        o = torch.einsum("bthk,bthkc->bthc", fq, S[..., :d])
        if _normalized(self.kind, self.arch["feature_map"]):
            den = torch.einsum("bthk,bthk->bth", fq, S[..., d]) + self.arch["eps"]
            o = o / den.unsqueeze(-1)
        return o

    def read_output(self, fq, a, S) -> torch.Tensor:
        """The heads' summed readout ``sum_h <a, o>`` ``[B]`` of one token (``fq [1 or B, H,
        D]``, ``a [1 or B, H, d]``) on the states ``S [B, H, D, W]``, as :meth:`read_sum`
        reads ``o`` but without it: ``a`` folds into the features first."""
        d = self.d
        weight = fq.unsqueeze(-1) * a.unsqueeze(-2)  # [1 or B, H, D, d]
        rows = "hkc" if weight.shape[0] == 1 < S.shape[0] else "bhkc"
        num = torch.einsum(f"{rows},bhkc->bh", weight[0] if rows == "hkc" else weight, S[..., :d])
        if _normalized(self.kind, self.arch["feature_map"]):
            rows = rows[:-1]
            den = torch.einsum(f"{rows},bhk->bh", fq[0] if rows == "hk" else fq, S[..., d])
            num = num / (den + self.arch["eps"])
        return num.sum(-1)

    def read_shared(self, fq, a, term, S0) -> torch.Tensor:
        """The heads' summed readouts ``[B, Nq]`` of ``Nq`` tokens every input shares
        (``fq [1, Nq, H, D]``, ``a [1, Nq, H, d]``, ``term [1, Nq, H, D, W]``) that follow
        the states ``S0 [B, H, D, W]``: ``sum_h <a, o>`` of :meth:`read_sum` on
        ``S0 + cumsum(term)``, without the ``[B, Nq, H, D, W]`` states (each input's part
        ``S0`` is read by one matrix product; the shared prefix once)."""
        d = self.d
        fq, a, prefix = fq[0], a[0], torch.cumsum(term[0], 0)
        weight = fq.unsqueeze(-1) * a.unsqueeze(-2)  # [Nq, H, D, d]: o's numerator, read by a
        num = torch.einsum("qhkc,bhkc->bqh", weight, S0[..., :d])
        num = num + torch.einsum("qhkc,qhkc->qh", weight, prefix[..., :d])
        if _normalized(self.kind, self.arch["feature_map"]):
            den = torch.einsum("qhk,bhk->bqh", fq, S0[..., d])
            num = num / (den + torch.einsum("qhk,qhk->qh", fq, prefix[..., d]) + self.arch["eps"])
        return num.sum(-1)

    def _keep(self, S: torch.Tensor, quantize):
        if quantize is None:
            return S
        shape = S.shape
        return quantize(self, S.reshape(shape[0], self.heads, -1)).view(shape)

    def head_arrays(self, h: int) -> dict:
        """Head ``h``'s weights as the float64 arrays of a causal weights file (no calibration)."""
        r, d = self.r, self.d

        def rows(lin, n):
            return lin.weight[h * n : (h + 1) * n], lin.bias[h * n : (h + 1) * n]

        out = {}
        for name, n in (("q", r), ("k", r), ("v", d), ("a", d)):
            out["w" + name], out["b" + name] = rows(getattr(self, "w" + name), n)
        out["wu"] = self.wu[h]
        gates = GATE_ARRAYS[self.kind]
        if "wg" in gates:
            n = self.wg.out_features // self.heads
            out["wg"], out["bg"] = rows(self.wg, n)
        if "wbeta" in gates:
            out["wbeta"], out["bbeta"] = rows(self.wbeta, 1)
        if "alog" in gates:
            out["alog"] = self.alog[h]
        if "dskip" in gates:
            out["dskip"] = self.dskip[h]
        return {k: v.detach().double().cpu().numpy() for k, v in out.items()}

    def load_head(self, h: int, g: dict) -> None:
        """Set head ``h`` from a file's arrays ``g`` (torch tensors)."""
        r, d = self.r, self.d
        with torch.no_grad():
            for name, n in (("q", r), ("k", r), ("v", d), ("a", d)):
                lin = getattr(self, "w" + name)
                lin.weight[h * n : (h + 1) * n] = g["w" + name]
                lin.bias[h * n : (h + 1) * n] = g["b" + name]
            self.wu[h] = g["wu"]
            if "wg" in g:
                n = self.wg.out_features // self.heads
                self.wg.weight[h * n : (h + 1) * n] = g["wg"]
                self.wg.bias[h * n : (h + 1) * n] = g["bg"]
            if "wbeta" in g:
                self.wbeta.weight[h : h + 1] = g["wbeta"]
                self.wbeta.bias[h : h + 1] = g["bbeta"]
            if "alog" in g:
                self.alog[h] = g["alog"].view(self.alog[h].shape)
            if "dskip" in g:
                self.dskip[h] = g["dskip"]


class CausalModel(nn.Module):
    """``L`` :class:`CausalLayer` s on a residual stream ``u^0 = 2x - 1``.

    ``forward(x)`` takes a family's inputs ``[B, N, m]`` (the ``q`` queries first)
    and returns the outputs ``[B, N]`` in the same order, computed in causal order.
    """

    def __init__(self, arch: dict, q: int, layer_type=None):
        super().__init__()
        self.arch, self.q = dict(arch), q
        self.plugin = None
        #: Training only: a function of the state after the last data token (one layer,
        #: ``[B, H, E]``) that the forward pass reads instead of it (:class:`CutNoise`).
        self.cut_noise = None
        make = layer_type or CausalLayer
        if make is not CausalLayer:
            from sketchsim.experiments.model_plugins import plugin_label

            self.plugin = plugin_label(make)
        # each layer its own copy: a plug-in that edits it changes neither the model's
        # recorded architecture nor another layer's (or run's)
        built = [self._guarded(make, "__init__", dict(self.arch), i)
                 for i in range(arch["layers"])]  # fmt: skip
        for layer in built:
            if not isinstance(layer, nn.Module):
                self._refuse(f"its layer class built a {type(layer).__name__}, not a torch "
                             "nn.Module")  # fmt: skip
        self.layers = nn.ModuleList(built)
        self.out = nn.Linear(arch["m"], 1)

    def _refuse(self, what: str):
        raise PluginError(f"model plug-in {self.plugin}: {what}")

    def _guarded(self, fn, name: str, *args):
        """``fn(*args)``; a plug-in's exception is one line naming it (the built-in: as is)."""
        if self.plugin is None:
            return fn(*args)
        from sketchsim.experiments.capacity_models import plugin_call

        return plugin_call(self.plugin, fn, name, *args)

    def _step(self, layer, u, st, count, quantize, residual):
        """The layer's step; a plug-in's is guarded and its outputs' shapes checked (it
        always gets ``B`` rows and returns its ``delta``)."""
        if self.plugin is None:
            return layer.step(u, st, count, quantize, residual)
        out = self._guarded(layer.step, "step", u, st, count, quantize)
        B, m = u.shape
        want = ((B,), (B, m), tuple(st.shape))
        ok = isinstance(out, tuple | list) and len(out) == 3
        tensors = ok and all(isinstance(x, torch.Tensor) for x in out)
        got = tuple(tuple(x.shape) for x in out) if tensors else None
        if got != want:
            self._refuse(f"step returned {got or type(out).__name__}; expected (y, delta, "
                         f"state) of shapes {want}")  # fmt: skip
        return out

    @property
    def label(self) -> str:
        return f"{causal_name(self.arch)} {causal_dims(self.arch)}"

    def forward(self, x: torch.Tensor, quantize=None, states: list | None = None):
        B, N, _ = x.shape
        if hasattr(quantize, "prepare"):  # quantization-aware training: ranges of this batch
            quantize.prepare(self, x)
        n_data, last = N - self.q, len(self.layers) - 1
        # a family's queries are the same in every input: layer 0 projects them once
        shared = self.plugin is None and self._shared_queries(x)
        if self.plugin is None and self.kind_is_sum():
            if quantize is None:
                out = self._parallel(x, n_data, shared, states)
            else:
                out = self._rounded(x, n_data, shared, quantize, states)
            return torch.cat([out[:, n_data:], out[:, :n_data]], 1)
        if self._affine_in_state(B, shared, quantize, states, n_data):
            out = self._affine_readout(x, n_data)
            return torch.cat([out[:, n_data:], out[:, :n_data]], 1)
        st = [x.new_zeros(B, self.arch["heads"], layer.entries) for layer in self.layers]
        ys = []
        for t in range(N):  # causal order: the data tokens (positions q..), then the queries
            if t < n_data:
                u = 2 * x[:, self.q + t] - 1
            else:
                u = 2 * x[: 1 if shared else B, t - n_data] - 1
            y = self.out(u).squeeze(-1).expand(B)
            for lay, layer in enumerate(self.layers):
                dy, delta, st[lay] = self._step(layer, u, st[lay], t + 1, quantize, lay < last)
                if self.cut_noise is not None and t == n_data - 1:
                    st[lay] = self.cut_noise(st[lay])
                if states is not None:
                    states.append((lay, t, st[lay].detach()))
                y = y + dy
                if lay < last:
                    u = u + delta
            ys.append(y)
        out = torch.stack(ys, 1)
        return torch.cat([out[:, n_data:], out[:, :n_data]], 1)

    def kind_is_sum(self) -> bool:
        """Whether the state is a running sum of per-token terms (``linear``, ``based``):
        then exact arithmetic needs no loop over tokens (:meth:`_parallel`)."""
        return self.arch["kind"] in ("linear", "based")

    def _shared_queries(self, x: torch.Tensor) -> bool:
        """Whether every input of ``x`` has the same query tokens (remembered per tensor:
        a training loop passes the same one at every step).  A model whose
        ``shared_queries`` attribute is a bool (the batched trainer's, whose ``x`` is one
        model's slice of a stack and has no storage of its own) takes that instead."""
        forced = getattr(self, "shared_queries", None)
        if forced is not None:
            return forced
        key = (x.data_ptr(), tuple(x.shape), tuple(x.stride()), x._version, x.device, self.q)
        if getattr(self, "_shared_key", None) != key:
            self._shared_key = key
            self._shared = bool((x[:, : self.q] == x[:1, : self.q]).all())
        return self._shared

    def _affine_in_state(self, B: int, shared: bool, quantize, states, n_data: int) -> bool:
        """Whether :meth:`_affine_readout` computes this forward: one layer of a kind whose
        update is linear in the state (GLA, DeltaNet, gated DeltaNet, Mamba), exact
        arithmetic, queries every input shares, and more inputs than state entries."""
        if self.plugin is not None or quantize is not None or states is not None:
            return False
        layer = self.layers[0]
        return (len(self.layers) == 1 and layer.kind in AFFINE_KINDS and shared and n_data > 0
                and self.q > 0 and B > layer.heads * layer.entries + 1)  # fmt: skip

    def _affine_readout(self, x, n_data: int) -> torch.Tensor:
        """The one-layer forward whose shared queries read every input's state at the cut
        through one affine map (docs/theory.md 5.3: each update ``S -> A_t(S) + B_t`` is
        affine in the state, with ``A_t, B_t`` set by the token alone, and so is the
        readout): the data tokens run on every input, the queries only on the zero state
        and on the ``H E`` unit states, whose outputs give the map's constant and columns;
        then each input's query outputs are one matrix product with its cut state."""
        B = x.shape[0]
        layer = self.layers[0]
        H, E = layer.heads, layer.entries
        st, ys = x.new_zeros(B, H, E), []
        for t in range(n_data):
            u = 2 * x[:, self.q + t] - 1
            dy, _, st = layer.step(u, st, t + 1, None, residual=False)
            ys.append(self.out(u).squeeze(-1) + dy)
        unit = torch.eye(H * E, dtype=x.dtype, device=x.device)
        sb, yb = torch.cat([x.new_zeros(1, H * E), unit]).view(-1, H, E), []
        for t in range(self.q):
            u = 2 * x[:1, t] - 1
            dy, _, sb = layer.step(u, sb, n_data + t + 1, None, residual=False)
            yb.append(self.out(u).squeeze(-1) + dy)
        yb = torch.stack(yb, 1)  # [1 + H E, q]: the zero state's outputs, then each unit's
        if self.cut_noise is not None:
            st = self.cut_noise(st)
        y_q = yb[:1] + st.reshape(B, H * E) @ (yb[1:] - yb[:1])
        return torch.cat([torch.stack(ys, 1), y_q], 1)

    def _streams(self, x, n_data: int, shared: bool):
        """``(u_data [B, n_data, m], u_q [1 or B, q, m], y)``: layer 0's streams and the
        outputs' bias term ``[B, N]`` in causal order."""
        B = x.shape[0]
        u_data = 2 * x[:, self.q :] - 1
        u_q = 2 * x[: 1 if shared else B, : self.q] - 1
        y = torch.cat([self.out(u_data), self.out(u_q).expand(B, -1, -1)], 1).squeeze(-1)
        return u_data, u_q, y

    def _rounded(self, x, n_data: int, shared: bool, quantize, states):
        """The forward of a sum-state model with every state kept in its registers by
        ``quantize`` after each token's update, as the token loop keeps them (the rounding
        makes the states sequential); each layer's terms are computed in one pass and the
        shared queries' once, so each token costs the update, the rounding and the read."""
        B, N, _ = x.shape
        u_data, u_q, y = self._streams(x, n_data, shared)
        last = len(self.layers) - 1
        for lay, layer in enumerate(self.layers):
            parts = [layer.sum_terms(u) for u in (u_data, u_q)]  # (phi_q, a, term) each
            D, W = parts[0][2].shape[-2:]
            S = x.new_zeros(B, layer.heads, D, W)
            outs = []
            for t in range(N):
                fq, a, term = parts[0] if t < n_data else parts[1]
                i = t if t < n_data else t - n_data
                S = layer._keep(S + term[:, i], quantize)
                if states is not None:
                    states.append((lay, t, S.reshape(B, layer.heads, -1).detach()))
                if lay == last:  # only the output: no [B, H, d] readouts
                    outs.append(layer.read_output(fq[:, i], a[:, i], S))
                else:
                    outs.append(layer.read_sum(fq[:, i : i + 1].expand(B, -1, -1, -1), S[:, None]))
            if lay == last:
                return y + torch.stack(outs, 1)
            o = torch.cat(outs, 1)  # [B, N, H, d]
            a = torch.cat([parts[0][1], parts[1][1].expand(B, -1, -1, -1)], 1)
            y = y + (a * o).sum((-1, -2))
            u = torch.cat([u_data, u_q.expand(B, -1, -1)], 1)
            u = u + torch.einsum("hmc,bnhc->bnm", layer.wu, o)
            u_data, u_q = u[:, :n_data], u[:, n_data:]
        return y

    def _parallel(self, x, n_data: int, shared: bool, states):
        """The exact forward of a sum-state model in one pass per layer: every token's
        state is the running sum (``cumsum``, adding in token order as the loop does) of
        the terms ``phi(k) v^T`` (and ``phi(k)``); shared queries are projected once."""
        B, N, _ = x.shape
        u_data, u_q, y = self._streams(x, n_data, shared)
        last = len(self.layers) - 1
        for lay, layer in enumerate(self.layers):
            parts = [layer.sum_terms(u) for u in (u_data, u_q)]  # (phi_q, a, term) each
            run = torch.cumsum(parts[0][2], 1)
            ranges_only = states is None or hasattr(states, "widen")
            if lay == last and u_q.shape[0] == 1 < B and ranges_only and u_q.shape[1] and n_data:
                if states is not None:
                    states.widen(lay, *self._shared_extremes(layer, run, parts[1][2]))
                o = layer.read_sum(parts[0][0], run)
                y_data = y[:, :n_data] + (parts[0][1] * o).sum((-1, -2))
                S0 = run[:, -1]
                if self.cut_noise is not None:
                    S0 = self.cut_noise(S0.reshape(B, layer.heads, -1)).view(S0.shape)
                y_q = y[:, n_data:] + layer.read_shared(*parts[1], S0)
                return torch.cat([y_data, y_q], 1)
            if u_q.shape[1]:
                base = run[:, -1:] if n_data else torch.zeros_like(parts[1][2][:, :1])
                if self.cut_noise is not None and n_data:
                    base = self.cut_noise(base.reshape(B, layer.heads, -1)).view(base.shape)
                run_q = base + torch.cumsum(parts[1][2].expand(B, *parts[1][2].shape[1:]), 1)
                run = torch.cat([run, run_q], 1)  # [B, N, H, D, W]
            fq = torch.cat([parts[0][0], parts[1][0].expand(B, -1, -1, -1)], 1)
            a = torch.cat([parts[0][1], parts[1][1].expand(B, -1, -1, -1)], 1)
            o = layer.read_sum(fq, run)
            if states is not None:
                for t in range(N):
                    states.append((lay, t, run[:, t].reshape(B, layer.heads, -1).detach()))
            y = y + (a * o).sum((-1, -2))
            if lay < last:
                u = torch.cat([u_data, u_q.expand(B, -1, -1)], 1)
                u = u + torch.einsum("hmc,bnhc->bnm", layer.wu, o)
                u_data, u_q = u[:, :n_data], u[:, n_data:]
        return y

    @staticmethod
    def _shared_extremes(layer, run, term_q):
        """Entrywise ``(low, high)`` ``[H, E]`` of every state of the last layer: the data
        tokens' ``run [B, n_data, H, D, W]`` and the shared queries' ``S0 + P_t`` (``S0``:
        each input's last data state, ``P_t``: the prefix sums of ``term_q [1, Nq, ...]``),
        whose extremes over inputs and queries are ``min S0 + min P`` (and ``max + max``:
        rounding is monotone, so this is the elementwise extreme, bit for bit)."""
        prefix = torch.cumsum(term_q[0], 0)
        S0, shape = run[:, -1], (layer.heads, -1)
        low = torch.minimum(run.amin((0, 1)), S0.amin(0) + prefix.amin(0))
        high = torch.maximum(run.amax((0, 1)), S0.amax(0) + prefix.amax(0))
        return low.reshape(shape), high.reshape(shape)


class _Extremes:
    """Takes the ``(layer, t, state)`` of :meth:`CausalModel.forward` as a list would and
    keeps only each layer's entrywise minimum and maximum ``[H, E]``; the one-pass forward
    hands the last layer's extremes over shared queries to :meth:`widen` directly."""

    def __init__(self):
        self.low, self.high = {}, {}

    def append(self, item) -> None:
        lay, _, st = item
        self.widen(lay, st.amin(0), st.amax(0))

    def widen(self, lay: int, low: torch.Tensor, high: torch.Tensor) -> None:
        """Widen layer ``lay``'s extremes to ``low`` and ``high`` ``[H, E]``."""
        if lay in self.low:
            low, high = torch.minimum(low, self.low[lay]), torch.maximum(high, self.high[lay])
        self.low[lay], self.high[lay] = low, high


def state_range(model: CausalModel, x, exact: bool = True) -> list[tuple]:
    """Per layer ``(lo, span)`` ``[H, E]``: every state entry's range over the inputs ``x``
    (a tensor ``[B, N, m]``, or an iterable of them: chunks) at every position, widened by
    :data:`HEADROOM` of it on each side.

    ``exact``: in float64 (numpy arrays; leaves ``model`` in float64, as a saved file
    is calibrated); else in the model's own dtype and device (tensors).
    """
    seen = _Extremes()
    if exact:
        model.double()
    with torch.no_grad():
        for chunk in [x] if isinstance(x, torch.Tensor) else x:
            model(chunk.double() if exact else chunk, states=seen)
    out = []
    for lay, layer in enumerate(model.layers):
        low, high = seen.low[lay], seen.high[lay]
        if layer.kind == "window":  # one range per slot entry, whichever slot holds it
            w = model.arch["window"]
            H = low.shape[0]
            low = low.view(H, w, -1).amin(1, keepdim=True).expand(H, w, -1).reshape(H, -1)
            high = high.view(H, w, -1).amax(1, keepdim=True).expand(H, w, -1).reshape(H, -1)
        pad = HEADROOM * (high - low)
        lo, span = low - pad, high - low + 2 * pad
        out.append((lo.cpu().numpy(), span.cpu().numpy()) if exact else (lo, span))
    return out


def fixed_point_state(bits: int, calibration: list[tuple]):
    """``quantize(layer, state)`` for :meth:`CausalModel.forward`: every entry rounded to its
    ``bits``-bit register (docs/theory.md 5.3), calibrated by ``(lo, span)`` per layer."""
    top = float(2**bits - 1)
    tables = []
    for lo, span in calibration:
        lo = torch.as_tensor(lo)
        span = torch.as_tensor(span).to(lo.device)
        tables.append((lo, register_steps(span, top)))

    def quantize(layer: CausalLayer, S: torch.Tensor) -> torch.Tensor:
        lo, step = (t.to(S.dtype) for t in tables[layer.index])
        return register_values(S, lo, step, top)

    return quantize


class causal_qat_quantizer:  # noqa: N801 - used as the function of the kernel models
    """``quantize`` for quantization-aware training of a :class:`CausalModel` at ``bits``.

    Before each forward pass (:meth:`prepare`) the registers are calibrated on the
    batch itself by :func:`state_range` (the exact model, no gradient), as the saved
    file is calibrated on the training inputs; the forward pass then keeps every state
    in its registers and the backward pass is the exact state's (straight-through).
    ``cut``: only the state after the last data token is rounded (the engine's
    ``rounding=cut``, docs/theory.md 5.3); one-layer models, whose data token's own
    output is never read, so the rounding's place within that step does not matter.
    """

    def __init__(self, model, bits: int, cut: bool = False):
        if cut and len(model.layers) != 1:
            raise SketchsimError("rounding only at the cut trains one-layer causal models")
        self.bits, self.rounding, self.cut = bits, None, cut
        self.n_data, self.calls = 0, {}

    def prepare(self, model: CausalModel, x: torch.Tensor) -> None:
        self.rounding = fixed_point_state(self.bits, state_range(model, x.detach(), exact=False))
        self.n_data, self.calls = x.shape[1] - model.q, {}

    def __call__(self, layer: CausalLayer, S: torch.Tensor) -> torch.Tensor:
        # the forward pass keeps a layer's states token by token: its call t is token t
        t = self.calls.get(layer.index, 0)
        self.calls[layer.index] = t + 1
        if self.cut and t != self.n_data - 1:
            return S
        with torch.no_grad():
            q = self.rounding(layer, S)
        return S + (q - S).detach()


class CutNoise:
    """Register noise at the cut for training (``CausalModel.cut_noise``): each entry of
    the state after the last data token gets uniform noise of one ``bits``-bit register
    step, the step being the entry's range over the batch (with the registers'
    :data:`HEADROOM`) over ``2^bits - 1``.  Unlike rounding with straight-through
    gradients, the step keeps its gradient: a state that mixes several answers into one
    entry widens that entry's range, and with it the noise every answer read from it
    carries, so training prefers states whose entries each hold little of the answers
    (docs/capacity.md, "Register noise").  Draws from torch's global generator."""

    def __init__(self, bits: int):
        self.top = float(2**bits - 1)

    def __call__(self, S: torch.Tensor) -> torch.Tensor:
        span = (S.amax(0) - S.amin(0)) * (1 + 2 * HEADROOM)
        return S + span / self.top * (torch.rand_like(S) - 0.5)


def export_causal(model: CausalModel, calibration: list[tuple]) -> dict:
    """The arrays of a causal weights file (:func:`sketchsim.sketch.causal.causal_shapes`)."""
    arrays = {}
    want = set(COMMON_ARRAYS) | set(GATE_ARRAYS[model.arch["kind"]])
    for lay, layer in enumerate(model.layers):
        lo, span = calibration[lay]
        for h in range(model.arch["heads"]):
            head = model._guarded(layer.head_arrays, "head_arrays", h)
            if not isinstance(head, dict) or set(head) != want:
                got = ", ".join(sorted(head)) if isinstance(head, dict) else type(head).__name__
                raise PluginError(
                    f"model plug-in {model.plugin}: head_arrays gave {got}; a "
                    f"{model.arch['kind']} weights file needs {', '.join(sorted(want))}"
                )
            head = dict(head)
            head.update(lo=lo[h], span=span[h])
            arrays.update({f"L{lay}.H{h}.{k}": v for k, v in head.items()})
    arrays["wb"] = model.out.weight.detach().double().cpu().numpy()[0]
    arrays["bb"] = model.out.bias.detach().double().cpu().numpy()
    return arrays


def causal_from_weights(weights) -> CausalModel:
    """The torch model (float64) of a loaded causal weights file."""
    model = CausalModel(weights.arch, weights.family["q"]).double()
    arr = {k: torch.tensor(v) for k, v in weights.arrays.items()}
    names = set(COMMON_ARRAYS) | set(GATE_ARRAYS[weights.arch["kind"]])
    for lay, layer in enumerate(model.layers):
        for h in range(weights.arch["heads"]):
            layer.load_head(h, {k: arr[f"L{lay}.H{h}.{k}"] for k in names})
    with torch.no_grad():
        model.out.weight[0] = arr["wb"]
        model.out.bias[:] = arr["bb"]
    return model
