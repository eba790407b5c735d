"""Random weights files of any shape for the tests (NumPy only: no torch), calibrated
as the capacity suite calibrates trained ones."""

import numpy as np

from sketchsim.minip.bits import unpack_bits
from sketchsim.sketch.weights_file import HEAD_ARRAYS, head_entries, load_weights, save_weights_file


def random_weights(path, family, layers, heads, r, d, fmap, seed=0, calibrate_on=None):
    """A random model of this shape, calibrated (``lo``, ``span``) on ``calibrate_on`` inputs."""
    rng = np.random.default_rng(seed)
    m, E = family.m, head_entries(r, d, fmap)
    dims = {"r": r, "d": d, "m": m, "E": E}
    arrays = {}
    for lay in range(layers):
        for h in range(heads):
            for name, shape in HEAD_ARRAYS.items():
                shape = tuple(dims[s] for s in shape)
                arrays[f"L{lay}.H{h}.{name}"] = rng.normal(0, 0.5, shape)
    arrays["wb"], arrays["bb"] = rng.normal(0, 0.3, m), rng.normal(0, 1, 1)
    header = {
        "architecture": dict(
            layers=layers, heads=heads, rank=r, value_width=d, feature_map=fmap, m=m, eps=1e-6
        ),
        "family": {
            "name": family.name,
            "q": family.q,
            "s": family.s,
            "seed": family.seed,
            "options": family.options(),
        },
    }
    # calibrate with the exact model: lo = smallest contribution, span = largest register
    for lay in range(layers):
        for h in range(heads):
            arrays[f"L{lay}.H{h}.lo"] = np.zeros(E)
            arrays[f"L{lay}.H{h}.span"] = np.ones(E)
    save_weights_file(path, header, arrays)
    T = family.sample_answers(64) if calibrate_on is None else calibrate_on
    X = unpack_bits(family.tokens(T), m)
    _calibrate_numpy(load_weights(path), X, arrays)
    save_weights_file(path, header, arrays)
    return load_weights(path)


def _calibrate_numpy(w, X, arrays):
    """lo and span from per-token contributions, layer by layer (exact forward)."""
    a = w.arch
    u = 2.0 * X - 1.0
    act = {
        "elu1": lambda z: np.where(z > 0, z + 1, np.exp(np.minimum(z, 0))),
        "relu": lambda z: np.maximum(z, 0) + 1e-3,
        "signed": lambda z: z,
        "softplus": lambda z: np.maximum(z, 0.0) + np.log1p(np.exp(-np.abs(z))),
    }[a["feature_map"]]
    N = u.shape[1]
    for lay in range(a["layers"]):
        delta = np.zeros_like(u)
        for h in range(a["heads"]):
            g = {k: arrays[f"L{lay}.H{h}.{k}"] for k in HEAD_ARRAYS}
            fq, fk = act(u @ g["wq"].T + g["bq"]), act(u @ g["wk"].T + g["bk"])
            v = u @ g["wv"].T + g["bv"]
            parts = [fk[..., :, None] * v[..., None, :]]
            if a["feature_map"] != "signed":
                parts.append(fk[..., :, None])
            c = np.concatenate(parts, -1).reshape(u.shape[0], N, -1)
            lo = c.min((0, 1))
            arrays[f"L{lay}.H{h}.lo"], arrays[f"L{lay}.H{h}.span"] = lo, (c - lo).sum(1).max(0)
            st = c.sum(1).reshape(u.shape[0], a["rank"], -1)
            num = np.einsum("bir,brc->bic", fq, st[..., : a["value_width"]])
            if a["feature_map"] != "signed":
                num /= (np.einsum("bir,br->bi", fq, st[..., -1]) + a["eps"])[..., None]
            else:
                num /= N
            delta += num @ g["wu"].T
        u = u + delta


def random_causal_weights(path, family, kind, layers, heads, r, d, fmap="elu1", window=0,
                          seed=0, scale=0.5):  # fmt: skip
    """A random causal model (docs/theory.md 5.3), calibrated on 48 of the family's inputs
    with the NumPy reference (no torch)."""
    from naive import causal_outputs

    from sketchsim.sketch.causal import FIXED_MAPS, causal_entries, causal_shapes

    rng = np.random.default_rng(seed)
    arch = dict(kind=kind, layers=layers, heads=heads, rank=r, value_width=d,
                feature_map=fmap if kind == "linear" else FIXED_MAPS[kind], m=family.m,
                eps=1e-6, window=window if kind == "window" else 0)  # fmt: skip
    E = causal_entries(arch)
    arrays = {k: rng.normal(0, scale, shape) for k, shape in causal_shapes(arch).items()}
    for l in range(layers):
        for h in range(heads):
            arrays[f"L{l}.H{h}.lo"], arrays[f"L{l}.H{h}.span"] = np.zeros(E), np.ones(E)
    header = {
        "architecture": arch,
        "family": {
            "name": family.name,
            "q": family.q,
            "s": family.s,
            "seed": family.seed,
            "options": family.options(),
        },  # fmt: skip
    }
    save_weights_file(path, header, arrays)
    T = family.sample_answers(48)
    trace = {}
    causal_outputs(load_weights(path), unpack_bits(family.tokens(T), family.m), trace=trace)
    for (l, h), seen in trace.items():
        seen = np.array(seen)
        low, high = seen.min(0), seen.max(0)
        if kind == "window":
            low = np.tile(low.reshape(window, -1).min(0), window)
            high = np.tile(high.reshape(window, -1).max(0), window)
        arrays[f"L{l}.H{h}.lo"] = low - (high - low) / 16
        arrays[f"L{l}.H{h}.span"] = (high - low) * 9 / 8
    save_weights_file(path, header, arrays)
    return load_weights(path)


def exact_sum_weights(path, family, bits=4, drop=0.0, bias=20.0):
    """:func:`sketchsim.prove.examples.counting_model` saved to ``path`` and loaded."""
    from sketchsim.prove.examples import counting_model

    save_weights_file(path, *counting_model(family, bits, drop, bias))
    return load_weights(path)
