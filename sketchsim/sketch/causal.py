"""Causal architectures as sketches: their weights files and their plan (docs/theory.md 5.1, 5.3).

A causal weights file is a ``sketchsim-trained`` file whose header's
``architecture.kind`` names one of :data:`KINDS` (a file without ``kind`` is a
bidirectional kernel model, :mod:`sketchsim.sketch.trained`).  Layer ``l``,
head ``h`` holds ``L{l}.H{h}.NAME`` arrays: every kind has

- ``wq, bq`` (``r x m``, ``r``), ``wk, bk``: query and key projections;
- ``wv, bv`` (``d x m``, ``d``): values; ``wa, ba``: the readout ``a(u)``;
- ``wu`` (``m x d``): the head's residual update;
- ``lo, span`` (``E``): the fixed-point range of its ``E`` state entries,

plus the kind's gates (:data:`GATE_ARRAYS`), and ``wb`` (``m``), ``bb`` (``1``)
the output bias.  The recurrence of each kind, the order of its state entries
and the fixed point are in docs/theory.md 5.3; ``tests/naive.py``
(``causal_outputs``) is their plain NumPy reference, the kernel is
:mod:`sketchsim.sketch.causal_kernel`, the torch model
:mod:`sketchsim.experiments.causal_models`.

The plan: the engine runs a causal model as one layer of the ``state`` channel,
whose speakers are the data tokens and whose sketch is the model's state at the
cut (after the last data token), ``E`` entries of ``K`` bits per head and layer;
a dedicated runner computes it (the tokens pass the state from one to the next,
which no sum of independent symbols expresses).
"""

from __future__ import annotations

import numpy as np

from sketchsim.sketch import kinds as _kinds
from sketchsim.sketch.contract import check_engine_size
from sketchsim.sketch.protocol import Layer, Plan
from sketchsim.sketch.registers import register_steps

__all__ = [
    "KINDS",
    "FIXED_MAPS",
    "GATE_ARRAYS",
    "LINEAR_MAPS",
    "UNNORMALIZED_MAPS",
    "causal_entries",
    "causal_name",
    "causal_shapes",
    "check_causal_arch",
    "check_causal_arrays",
    "causal_plan",
    "causal_order",
    "causal_inputs",
]

#: The causal architectures the engine runs, in the order of their kernel codes (the kind
#: records of :mod:`sketchsim.sketch.kinds`, where every per-kind table is read from).
KINDS = _kinds.KINDS
#: The feature map each kind uses (``linear``: one of :data:`LINEAR_MAPS`).
FIXED_MAPS = {k.name: k.feature_map for k in _kinds.RECORDS if k.feature_map}
LINEAR_MAPS = ("elu1", "relu", "signed", "softplus", "elu1sum")
#: Linear maps whose state keeps no normalizer ``z`` (``E = r d``): ``signed``, and
#: ``elu1sum``, fla's ``LinearAttention(feature_map="elu", norm_q=True, norm_k=True)`` with
#: its default ``do_feature_map_norm=False``: each elu1 feature over their sum (+ 10^-4).
UNNORMALIZED_MAPS = ("signed", "elu1sum")
#: Arrays beyond the common ones, per kind, and their shapes in terms of (r, d, m).
GATE_ARRAYS = {k.name: dict(k.gates) for k in _kinds.RECORDS}
#: The arrays every head has, causal or not (a kernel head's
#: :data:`~sketchsim.sketch.trained.HEAD_ARRAYS` are these and its ``lo``, ``span``).
COMMON_ARRAYS = {
    "wq": ("r", "m"),
    "bq": ("r",),
    "wk": ("r", "m"),
    "bk": ("r",),
    "wv": ("d", "m"),
    "bv": ("d",),
    "wa": ("d", "m"),
    "ba": ("d",),
    "wu": ("m", "d"),
}
#: Largest window (tokens) and Based projection width (its features are ``1 + r + r^2``).
MAX_WINDOW = 4096
MAX_BASED_RANK = 64


def taylor_width(r: int) -> int:
    """Based's feature count for projection width ``r``: ``1 + r + r^2``."""
    return 1 + r + r * r


def causal_entries(arch: dict) -> int:
    """State entries ``E`` of one head (docs/theory.md 5.3)."""
    norm = arch.get("feature_map") not in UNNORMALIZED_MAPS
    return _kinds.kind(arch["kind"]).entries(
        arch["rank"], arch["value_width"], norm, arch.get("window") or 0
    )


def causal_name(arch: dict) -> str:
    """The architecture's name in labels: ``linear-elu1``, ``gla``, ``window``, ..."""
    if arch["kind"] == "linear":
        return f"linear-{arch['feature_map']}"
    return arch["kind"]


def causal_dims(arch: dict) -> str:
    """``L.. H.. r.. d..`` (and `` w..`` for ``window``): the label's sizes."""
    dims = f"L{arch['layers']} H{arch['heads']} r{arch['rank']} d{arch['value_width']}"
    return dims + (f" w{arch['window']}" if arch["kind"] == "window" else "")


def check_causal_arch(arch: dict, fail) -> None:
    """Check the causal fields of a header's ``architecture`` (``fail(why)`` raises)."""
    kind = arch.get("kind")
    if kind not in KINDS:
        fail(f"architecture kind must be one of {', '.join(KINDS)}, got {kind!r:.40}")
    fmap = arch["feature_map"]
    want = LINEAR_MAPS if kind == "linear" else (FIXED_MAPS[kind],)
    if fmap not in want:
        fail(f"a {kind} model's feature_map is {' or '.join(want)}, got {fmap!r:.40}")
    w = arch.get("window", 0)
    if not isinstance(w, int) or isinstance(w, bool):
        fail(f"architecture window must be an integer, got {w!r:.40}")
    if kind == "window" and not 1 <= w <= MAX_WINDOW:
        fail(f"a window model's window must be in 1..{MAX_WINDOW}, got {w}")
    if kind != "window" and w != 0:
        fail(f"only a window model has a window (0 here), got {w}")
    if kind == "based" and arch["rank"] > MAX_BASED_RANK:
        fail(f"a based model's rank is at most {MAX_BASED_RANK} (1 + r + r^2 features)")


def causal_shapes(arch: dict) -> dict:
    """Every array a causal file of architecture ``arch`` holds, and its shape."""
    dims = {"r": arch["rank"], "d": arch["value_width"], "m": arch["m"]}
    dims["E"] = causal_entries(arch)
    names = {**COMMON_ARRAYS, **GATE_ARRAYS[arch["kind"]], "lo": ("E",), "span": ("E",)}
    want = {
        f"L{l}.H{h}.{name}": tuple(dims.get(s, s) for s in shape)
        for l in range(arch["layers"])
        for h in range(arch["heads"])
        for name, shape in names.items()
    }
    want.update({"wb": (arch["m"],), "bb": (1,)})
    return want


def check_causal_arrays(arch: dict, arrays: dict, fail) -> None:
    """A window model's ``lo`` and ``span`` repeat from slot to slot (an entry keeps its
    register as it moves to an older slot): else ``fail(why)``."""
    if arch["kind"] != "window":
        return
    w, width = arch["window"], arch["rank"] + arch["value_width"]
    for l in range(arch["layers"]):
        for h in range(arch["heads"]):
            for name in ("lo", "span"):
                a = arrays[f"L{l}.H{h}.{name}"].reshape(w, width)
                if not (a == a[:1]).all():
                    fail(f"L{l}.H{h}.{name} differs between window slots (one range per entry)")


def causal_order(q: int, n_tokens: int) -> np.ndarray:
    """Positions in causal order: the data tokens (``q..n-1``), then the queries ``0..q-1``."""
    return np.concatenate([np.arange(q, n_tokens), np.arange(q)]).astype(np.int64)


# aux: per (layer, head) a block of the arrays below, in this order (absent ones empty),
# offsets in a (L H, len(_BLOCK) + 1) table; then wb (m) and bb.
_BLOCK = (
    "wq", "bq", "wk", "bk", "wv", "bv", "wa", "ba", "wu",
    "wg", "bg", "wbeta", "bbeta", "alog", "dskip", "lo", "step", "decay",
)  # fmt: skip


def _pack(weights, bits: int) -> tuple[np.ndarray, np.ndarray]:
    a = weights.arch
    L, H = a["layers"], a["heads"]
    parts, offs, at = [], np.zeros((L * H, len(_BLOCK) + 1), dtype=np.int64), 0
    for l in range(L):
        for h in range(H):
            g = {k[len(f"L{l}.H{h}.") :]: v for k, v in weights.arrays.items()
                 if k.startswith(f"L{l}.H{h}.")}  # fmt: skip
            g["step"] = register_steps(g["span"], bits)
            if a["kind"] == "retention":  # the kind's fixed decay, per head
                g["decay"] = np.array([_kinds.retention_decay(h)])
            for i, name in enumerate(_BLOCK):
                offs[l * H + h, i] = at
                block = np.ascontiguousarray(g.get(name, np.zeros(0)), dtype=np.float64).ravel()
                parts.append(block)
                at += block.size
            offs[l * H + h, len(_BLOCK)] = at
    offs_bias = at
    parts += [weights.arrays["wb"], weights.arrays["bb"]]
    aux = np.concatenate(parts).astype(np.float64)
    return aux, np.append(offs.ravel(), offs_bias)


#: How a causal model's state meets its registers (docs/theory.md 5.3): ``every`` update
#: rounded (the model in fixed point), or only the transcript, at the ``cut``.
ROUNDINGS = ("every", "cut")


def _dims(weights, ctx, bits: int, rounding: str = "every") -> np.ndarray:
    a = weights.arch
    fmap = a["feature_map"]
    code = {"elu1": 0, "relu": 1, "signed": 2, "softplus": 3, "elu1sum": 4}.get(fmap, 0)
    return np.array(
        [
            a["layers"],
            a["heads"],
            a["rank"],
            a["value_width"],
            a["m"],
            KINDS.index(a["kind"]),
            code,
            causal_entries(a),
            a.get("window", 0),
            2**bits - 1,
            ctx.q,
            ctx.s,
            ctx.n_tokens,
            ROUNDINGS.index(rounding),
        ],
        dtype=np.int64,
    )


def causal_plan(ctx, weights, bits: int, rounding: str = "every") -> Plan:
    """The plan of a causal weights file on context ``ctx`` at ``bits`` bits per state entry.

    One ``state`` layer: its speakers are the data tokens, its sketch the
    ``L H E`` registers at the cut.  ``rounding``: ``every`` update rounded to the
    registers, or only the ``cut`` (:data:`ROUNDINGS`).  Raises :class:`PluginError`
    as :func:`~sketchsim.sketch.trained.trained_plan` does.
    """
    from sketchsim.sketch import causal_kernel

    a = weights.arch
    L, H, E = a["layers"], a["heads"], causal_entries(a)
    D = taylor_width(a["rank"]) if a["kind"] == "based" else a["rank"]
    scratch = 4 * a["m"] + 4 * (D + a["value_width"]) + a.get("window", 0)
    check_engine_size(ctx.n_tokens * a["m"] + L * H * E * 2 + scratch, what=f"{L} x {H} x {E}")
    aux, offs = _pack(weights, bits)
    dims = _dims(weights, ctx, bits, rounding)
    order = causal_order(ctx.q, ctx.n_tokens)
    eps = float(a["eps"])

    def runner(tokens: np.ndarray, store: bool):
        return causal_kernel.run_batch(tokens, order, dims, offs, aux, eps, store)

    speakers = tuple(range(ctx.q, ctx.n_tokens))
    layer = Layer("state", L * H * E, 2**bits, speakers=speakers)
    return Plan([layer], 1, _never, _never, _never, aux=np.zeros(1), runner=runner)


def _never(*args):  # pragma: no cover - a runner plan's functions are never called
    raise AssertionError("a causal plan runs through its runner")


def causal_inputs(weights, family, bits: int, T, rounding: str = "every"):
    """The engine's answers and cut codes of a causal file on given answer vectors.

    Parameters
    ----------
    weights : Weights
        A causal weights file (:func:`sketchsim.sketch.weights_file.load_weights`).
    family : Family
        Its family (:func:`sketchsim.sketch.weights_file.weights_family`).
    bits : int
        Register bits ``K``.
    T : array_like
        Answer vectors ``(B, q)``, each ``t_i`` in ``0..s`` (F(q, s)) or the family's values.
    rounding : str
        ``every`` or ``cut`` (docs/theory.md 5.3).

    Returns
    -------
    answers : ndarray
        ``(B, q)`` int64, the model's answer at each query (``-1`` for NaN).
    codes : ndarray
        ``(B, L H E)`` int64, the registers at the cut, in order layer, head, entry.
    """
    plan = causal_plan(family.context(), weights, bits, rounding)
    tokens = family.tokens(np.asarray(T, dtype=np.int64))
    _, answers, codes = plan.runner(tokens, True)
    return answers, codes
