"""Trained kernel-attention models as sketch protocols: the weights file and the engine side.

A weights file (``.npz``, read with ``allow_pickle=False``; no torch needed)
holds a kernel-attention model of ``L`` layers and ``H`` heads per layer
(feature rank ``r``, value width ``d``, token width ``m``) and its fixed-point
calibration.  Key ``header`` is a UTF-8 JSON object (uint8 array); the arrays
of layer ``l``, head ``h`` are ``L{l}.H{h}.NAME``:

- ``wq, bq`` (``r x m``, ``r``), ``wk, bk``: the query and key features
  ``phi(u) = act(W u + b)`` (``act``: ``elu1`` = ``elu(z) + 1``, ``relu`` =
  ``relu(z) + 10^-3``, ``signed`` = ``z``);
- ``wv, bv`` (``d x m``, ``d``): values; ``wa, ba``: the readout ``a(u)``;
- ``wu`` (``m x d``): what the head adds to the residual stream;
- ``lo, span`` (``E``): the fixed-point calibration of the head's ``E`` state entries,

and ``wb`` (``m``), ``bb`` (``1``) the output bias ``b(u)``.  The model
(``tests/naive.py``: ``trained_outputs`` in NumPy, the torch model in
:mod:`sketchsim.experiments.capacity_models`): ``u^0_j = 2 x_j - 1``; at layer
``l`` each head's state is ``S = sum_j phi_K(u_j) v(u_j)^T`` (``r x d``) and,
for the nonnegative maps, ``z = sum_j phi_K(u_j)`` (``r``), so ``E = r(d+1)``
(``E = r d`` for ``signed``, which is not normalized); a token reads
``o_i = phi_Q(u_i)^T S / (phi_Q(u_i)^T z + eps)`` (``signed``: ``phi_Q(u_i)^T S / N``
for ``N`` tokens),
``y_i += <a(u_i), o_i>``, ``u^{l+1}_i = u^l_i + W_u o_i`` over the heads; finally
``y_i += <wb, u^0_i> + bb`` and the answer is ``round(y_i)`` clipped to ``-1..s+1``.

**Fixed point.** Entry ``e`` of a head's state is a ``K``-bit register.  Token
``j`` contributes ``c_j`` (``phi_K(u_j)_k v(u_j)_c``, or ``phi_K(u_j)_k`` for
``z``) and emits the symbol ``clip(round((c_j - lo_e) / step_e), 0, 2^K - 1)``
with ``step_e = span_e / (2^K - 1)``; the ``sum`` channel adds the symbols and
saturates at ``2^K - 1``; readers decode ``step_e * register + N lo_e``.
``lo_e`` (the smallest contribution of any token) and ``span_e`` (the largest
register value ``sum_j (c_j - lo_e)`` of any input) are measured on the
training inputs and stored with the weights, so a layer declares
``H E K`` bits, like the ``kernel`` protocol (docs/theory.md, "Trained models").
"""

from __future__ import annotations

import hashlib
import io
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numba import njit

from sketchsim.errors import PluginError
from sketchsim.sketch.activations import feature
from sketchsim.sketch.causal import COMMON_ARRAYS
from sketchsim.sketch.contract import check_engine_size
from sketchsim.sketch.protocol import Layer, Plan

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "FEATURE_MAPS",
    "MAX_BITS",
    "HEAD_ARRAYS",
    "Weights",
    "load_weights",
    "save_weights_file",
    "head_entries",
    "trained_plan",
    "trained_engine",
]

FORMAT = "sketchsim-trained"
FORMAT_VERSION = 1
#: Feature maps the engine computes, in the order of their numba codes (``signed``,
#: code 2, is the unnormalized one).
FEATURE_MAPS = ("elu1", "relu", "signed", "softplus")
#: Largest register width (bits per state entry).
MAX_BITS = 32
#: Largest layers, heads, rank, value width and token width a weights file may declare.
LIMITS = {"layers": 8, "heads": 64, "rank": 4096, "value_width": 4096, "m": 4096}
#: Per-head arrays and their shapes in terms of (r, d, m, E).
HEAD_ARRAYS = {**COMMON_ARRAYS, "lo": ("E",), "span": ("E",)}
#: Smallest positive span: its step ``span / (2^32 - 1)`` stays a normal float.
MIN_SPAN = float(np.finfo(np.float64).tiny) * 2.0**33
#: Longest ``label`` a header may carry (characters).
MAX_LABEL = 200
_ARCH_KEYS = ("layers", "heads", "rank", "value_width", "feature_map", "m", "eps")
_FAMILY_KEYS = ("name", "q", "s", "seed")


def head_entries(r: int, d: int, feature_map: str) -> int:
    """State entries of one head: ``r (d + 1)``, or ``r d`` for unnormalized signed features."""
    return r * d if feature_map == "signed" else r * (d + 1)


@dataclass
class Weights:
    """A loaded weights file: its header and arrays (float64)."""

    header: dict
    arrays: dict
    path: str = ""

    @property
    def arch(self) -> dict:
        return self.header["architecture"]

    @property
    def family(self) -> dict:
        return self.header["family"]

    @property
    def causal(self) -> bool:
        """Whether the file holds a causal model (its architecture names a ``kind``)."""
        return "kind" in self.arch

    def entries(self) -> int:
        a = self.arch
        if self.causal:
            from sketchsim.sketch.causal import causal_entries

            return causal_entries(a)
        return head_entries(a["rank"], a["value_width"], a["feature_map"])


def _fail(path, why: str):
    raise PluginError(f"weights file {path}: {why}", param="weights")


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _check_header(header, path) -> None:
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        _fail(path, f"not a {FORMAT} file (no header naming its format)")
    if header.get("format_version") != FORMAT_VERSION:
        _fail(path, f"format_version {header.get('format_version')!r}; this reads {FORMAT_VERSION}")
    arch, fam = header.get("architecture"), header.get("family")
    if not isinstance(arch, dict) or any(k not in arch for k in _ARCH_KEYS):
        _fail(path, f"architecture must give {', '.join(_ARCH_KEYS)}")
    if not isinstance(fam, dict) or any(k not in fam for k in _FAMILY_KEYS):
        _fail(path, f"family must give {', '.join(_FAMILY_KEYS)}")
    for key, top in LIMITS.items():
        v = arch[key]
        if not _is_int(v) or not 1 <= v <= top:
            _fail(path, f"architecture {key} must be an integer in 1..{top}, got {v!r}")
    if "kind" in arch:
        from sketchsim.sketch.causal import check_causal_arch

        check_causal_arch(arch, lambda why: _fail(path, why))
    elif arch["feature_map"] not in FEATURE_MAPS:
        _fail(path, f"feature_map must be one of {', '.join(FEATURE_MAPS)}")
    eps = arch["eps"]
    if not isinstance(eps, int | float) or not (math.isfinite(eps) and 0 <= eps <= 1):
        _fail(path, f"eps must be a number in [0, 1], got {eps!r}")
    for key in ("q", "s"):
        if not _is_int(fam[key]) or fam[key] < 1:
            _fail(path, f"family {key} must be an integer >= 1, got {fam[key]!r}")
    if not _is_int(fam["seed"]) or fam["seed"] < 0 or not isinstance(fam["name"], str):
        _fail(path, "family name must be a string and seed an integer >= 0")
    if not isinstance(fam.get("options", {}), dict):
        _fail(path, "family options must be an object")
    spec = fam.get("spec", fam["name"])
    if not isinstance(spec, str) or not spec.strip():
        _fail(path, f"family spec must be a non-empty string, got {spec!r}")
    _check_claims(header, path)


def _check_claims(header: dict, path) -> None:
    """The fields a header only claims (what trained it): types and ranges, or refused."""
    label = header.get("label")
    if label is not None and (
        not isinstance(label, str) or len(label) > MAX_LABEL or not label.isprintable()
    ):
        _fail(path, f"label must be printable text of at most {MAX_LABEL} characters")
    if label is not None and "kind" in header["architecture"]:
        from sketchsim.sketch.causal import KINDS, LINEAR_MAPS, causal_dims, causal_name

        a = header["architecture"]
        dims = causal_dims(a)
        name, _, tail = label.partition(" L")
        taken = {*KINDS, *(f"linear-{f}" for f in LINEAR_MAPS), *FEATURE_MAPS, "softmax"}
        plugin = name.strip() and name not in taken  # a plug-in's label: NAME and the sizes
        if "L" + tail != dims or not (name == causal_name(a) or plugin):
            _fail(
                path,
                f"label {label!r} does not describe its architecture "
                f"({causal_name(a)} {dims}; a plug-in's label is NAME {dims})",
            )
    elif label is not None:
        a = header["architecture"]
        dims = f"L{a['layers']} H{a['heads']} r{a['rank']} d{a['value_width']}"
        name, _, tail = label.rpartition(" L")
        named_map = name in FEATURE_MAPS or name == "softmax"
        if "L" + tail != dims or not name.strip() or (named_map and name != a["feature_map"]):
            _fail(
                path,
                f"label {label!r} does not describe its architecture "
                f"({a['feature_map']} {dims}; a plug-in's label is NAME {dims})",
            )
    acc = header.get("accuracy")
    if acc is not None and (
        not isinstance(acc, int | float)
        or isinstance(acc, bool)
        or not (math.isfinite(acc) and 0 <= acc <= 1)
    ):
        _fail(path, f"accuracy must be a number in [0, 1], got {acc!r}")
    seed = header.get("seed")
    if seed is not None and (not _is_int(seed) or seed < 0):
        _fail(path, f"seed must be an integer >= 0, got {seed!r}")
    k = header.get("trained_at_bits")
    if k is not None and (not _is_int(k) or not 1 <= k <= MAX_BITS):
        _fail(path, f"trained_at_bits must be an integer in 1..{MAX_BITS} or null, got {k!r}")


#: Largest ``header`` member (bytes once decompressed): a JSON object of a few fields.
MAX_HEADER_BYTES = 1 << 20
#: Largest total of a file's arrays once decompressed (bytes; float64 arrays of the
#: shapes its header declares).  Checked before any array is decompressed.
MAX_ARRAY_BYTES = 1 << 30
#: Room for an ``.npy`` member's own header beyond its data.
_NPY_HEADER_BYTES = 4096
#: Zip compressions a weights file may use (``numpy.savez``: stored; ``savez_compressed``:
#: deflated); both decompress no more than is asked for.
_COMPRESSIONS = (0, 8)
#: Most bytes of arrays the loaded-file cache keeps.
_LOADED_BYTES = 256 << 20
#: Loaded files, keyed by the sha256 of their bytes (one parse per file and process).
_LOADED: dict[str, Weights] = {}
_LOADED_MAX = 8


def _check_path(path) -> Path:
    if not str(path):
        raise PluginError(
            "trained needs weights=PATH (a file `sweep --save-weights` wrote)", param="weights"
        )
    p = Path(str(path))
    try:
        if p.is_dir():
            _fail(path, "is a folder, not a weights file")
        if p.exists() and not p.is_file():
            _fail(path, "is not a regular file (a FIFO or a device?)")
        if not p.exists():
            _fail(path, "no such file")
    except OSError as exc:
        _fail(path, f"cannot be read ({exc.strerror or exc})")
    return p


def load_weights(path) -> Weights:
    """Read and check a weights file; the same bytes are parsed once per process.

    The zip members are checked by name and size, and each array's ``.npy``
    header by shape and dtype, before anything but the (size-capped) JSON
    header is decompressed: a small file cannot expand into gigabytes.

    Raises
    ------
    PluginError
        One line naming the file: missing, not a regular file, unreadable, not
        this format, a header field of the wrong type or range, unexpected or
        oversized members, wrong shapes, non-finite numbers.
    """
    p = _check_path(path)
    try:
        size = p.stat().st_size
        if size > MAX_ARRAY_BYTES + MAX_HEADER_BYTES:
            _fail(path, f"is {size:,} bytes, more than any weights file may hold")
        data = p.read_bytes()
    except OSError as exc:
        _fail(path, f"cannot be read ({exc.strerror or exc})")
    key = hashlib.sha256(data).hexdigest()
    if key in _LOADED:
        w = _LOADED[key]
        return Weights(w.header, w.arrays, str(path))
    w = _read_weights(io.BytesIO(data), path)
    size = sum(a.nbytes for a in w.arrays.values())
    if size <= _LOADED_BYTES:
        while _LOADED and (
            len(_LOADED) >= _LOADED_MAX
            or size + sum(a.nbytes for v in _LOADED.values() for a in v.arrays.values())
            > _LOADED_BYTES
        ):
            _LOADED.pop(next(iter(_LOADED)))
        _LOADED[key] = w
    return w


def _read_member(zf, info, path, shape=None) -> np.ndarray:
    """One ``.npy`` member, its header checked before its data is decompressed."""
    from numpy.lib import format as npy

    with zf.open(info) as fh:
        version = npy.read_magic(fh)
        if version == (1, 0):
            have, fortran, dtype = npy.read_array_header_1_0(fh)
        elif version == (2, 0):
            have, fortran, dtype = npy.read_array_header_2_0(fh)
        else:
            raise ValueError(f"npy format {version}")
        name = info.filename[:-4]
        if shape is not None and (have != shape or dtype.kind not in "fiu" or dtype.itemsize > 8):
            _fail(path, f"array {name} has shape {have} ({dtype}); expected {shape} numbers")
        if shape is None and (len(have) != 1 or dtype != np.uint8):
            _fail(path, "no JSON header")
        if dtype.hasobject:
            _fail(path, f"array {name} holds objects")
        count = int(np.prod(have, dtype=np.int64))
        size = count * dtype.itemsize
        limit = info.file_size if shape is not None else min(info.file_size, MAX_HEADER_BYTES)
        if count < 0 or size > limit:  # never decompress more than the member's checked size
            _fail(path, f"member {info.filename} declares {size:,} bytes of data in {limit:,}")
        data = fh.read(size)
        if len(data) != count * dtype.itemsize:
            raise ValueError("truncated member")
        out = np.frombuffer(data, dtype=dtype)
        return out.reshape(have[::-1]).T if fortran else out.reshape(have)


def _read_weights(p, path) -> Weights:
    import zipfile

    try:
        zf = zipfile.ZipFile(p)
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        _fail(path, f"not a readable .npz ({type(exc).__name__})")
    with zf:
        infos = zf.infolist()
        odd = [i.filename for i in infos if i.compress_type not in _COMPRESSIONS]
        if odd:  # bzip2 and lzma members decompress without an output limit
            _fail(path, f"member {odd[0]} is not stored or deflated (numpy writes no other)")
        names = [i.filename for i in infos]
        if len(set(names)) != len(names):
            _fail(path, "holds two members of the same name")
        by_name = {i.filename: i for i in infos}
        head = by_name.get("header.npy")
        if head is None:
            _fail(path, "no JSON header")
        if head.file_size > MAX_HEADER_BYTES + _NPY_HEADER_BYTES:
            _fail(
                path,
                f"its header member is {head.file_size:,} bytes (at most {MAX_HEADER_BYTES:,})",
            )
        try:
            text = _read_member(zf, head, path).tobytes()
            header = json.loads(text.decode("utf-8"))
        except PluginError:
            raise
        except (UnicodeDecodeError, ValueError, RecursionError):
            _fail(path, "its header is not JSON")
        except Exception as exc:  # noqa: BLE001 - a corrupt member (zlib, CRC)
            _fail(path, f"not a readable .npz ({type(exc).__name__})")
        _check_header(header, path)
        want = _array_shapes(header["architecture"])
        total = sum(8 * math.prod(shape) for shape in want.values())
        if total > MAX_ARRAY_BYTES:
            _fail(
                path,
                f"its architecture declares {total / 2**20:,.0f} MiB of arrays "
                f"(at most {MAX_ARRAY_BYTES / 2**20:,.0f} MiB)",
            )
        extra = sorted(n for n in names if n != "header.npy" and n[:-4] not in want)
        if extra:
            _fail(path, f"holds a member its architecture has no use for: {extra[0]}")
        for key, shape in want.items():
            info = by_name.get(key + ".npy")
            if info is None:
                _fail(path, f"array {key} is missing")
            if info.file_size > 8 * math.prod(shape) + _NPY_HEADER_BYTES:
                _fail(path, f"array {key} is {info.file_size:,} bytes; {shape} numbers need less")
        arrays = {}
        for key, shape in want.items():
            try:
                a = _read_member(zf, by_name[key + ".npy"], path, shape)
            except PluginError:
                raise
            except Exception as exc:  # noqa: BLE001 - a truncated or corrupt member
                _fail(path, f"array {key} is unreadable ({type(exc).__name__})")
            a = a.astype(np.float64)  # a copy, read-only: loaded files are shared (_LOADED)
            a.setflags(write=False)
            if not np.isfinite(a).all():
                _fail(path, f"array {key} has a non-finite value")
            arrays[key] = a
    arch = header["architecture"]
    for l in range(arch["layers"]):
        for h in range(arch["heads"]):
            span = arrays[f"L{l}.H{h}.span"]
            if (span < 0).any():
                _fail(path, f"L{l}.H{h}.span has a negative entry")
            if ((span > 0) & (span < MIN_SPAN)).any():
                _fail(
                    path,
                    f"L{l}.H{h}.span has an entry in (0, {MIN_SPAN:.1e}): its register step "
                    "would underflow (a span is 0 or at least that)",
                )
    if "kind" in arch:
        from sketchsim.sketch.causal import check_causal_arrays

        check_causal_arrays(arch, arrays, lambda why: _fail(path, why))
    return Weights(header, arrays, str(path))


def _array_shapes(arch: dict) -> dict:
    """Every array a file of architecture ``arch`` holds, and its shape."""
    if "kind" in arch:
        from sketchsim.sketch.causal import causal_shapes

        return causal_shapes(arch)
    r, d, m = arch["rank"], arch["value_width"], arch["m"]
    dims = {"r": r, "d": d, "m": m, "E": head_entries(r, d, arch["feature_map"])}
    want = {
        f"L{l}.H{h}.{name}": tuple(dims[s] for s in shape)
        for l in range(arch["layers"])
        for h in range(arch["heads"])
        for name, shape in HEAD_ARRAYS.items()
    }
    want.update({"wb": (m,), "bb": (1,)})
    return want


def save_weights_file(path, header: dict, arrays: dict) -> Path:
    """Write a weights file atomically (``header`` gets the format fields); returns the path."""
    from sketchsim.results import atomic_path

    header = {"format": FORMAT, "format_version": FORMAT_VERSION, **header}
    _check_header(header, path)
    text = json.dumps(header, sort_keys=True).encode("utf-8")
    payload = {k: np.ascontiguousarray(v, dtype=np.float64) for k, v in arrays.items()}
    payload["header"] = np.frombuffer(text, dtype=np.uint8)
    path = Path(path)
    with atomic_path(path, suffix=".npz") as tmp:
        with open(tmp, "wb") as fh:
            np.savez(fh, **payload)
    return path


# ---------------------------------------------------------------------------------------
# aux layout: a header of _HDR numbers, then one block of P numbers per (layer, head),
# then wb (m) and bb (1).  Block: wq wk (r m each) bq bk (r) wv wa (d m) bv ba (d)
# wu (m d), lo step (E); the matrices stored transposed, column after column (:func:`_affine`).
# Offsets inside a block are computed where they are read (``o_wv``, ``o_wu``, ...).
_HDR = 12


def _block_size(r: int, d: int, m: int, E: int) -> int:
    return 2 * (r * m + r) + 2 * (d * m + d) + m * d + 2 * E


def _aux(w: Weights, bits: int) -> np.ndarray:
    a = w.arch
    L, H, r, d, m = a["layers"], a["heads"], a["rank"], a["value_width"], a["m"]
    E = w.entries()
    top = float(2**bits - 1)
    hdr = [
        L,
        H,
        r,
        d,
        m,
        FEATURE_MAPS.index(a["feature_map"]),
        E,
        _block_size(r, d, m, E),
        a["eps"],
        top,
        0.0,
        0.0,
    ]
    parts = [np.array(hdr, dtype=np.float64)]
    for l in range(L):
        for h in range(H):
            g = {k: w.arrays[f"L{l}.H{h}.{k}"] for k in HEAD_ARRAYS}
            span = g["span"]
            step = np.where(span > 0, span / top, 1.0)
            parts += [
                g["wq"].T.ravel(),
                g["wk"].T.ravel(),
                g["bq"],
                g["bk"],
                g["wv"].T.ravel(),
                g["wa"].T.ravel(),
                g["bv"],
                g["ba"],
                g["wu"].T.ravel(),
                g["lo"],
                step,
            ]
    parts += [w.arrays["wb"], w.arrays["bb"]]
    return np.concatenate(parts)


@njit(inline="always")
def _dims(aux):
    return (
        int(aux[0]),
        int(aux[1]),
        int(aux[2]),
        int(aux[3]),
        int(aux[4]),
        int(aux[5]),
        int(aux[6]),
        int(aux[7]),
    )


@njit(cache=True)
def _affine(aux, w_off, b_off, rows, m, f, src, dst, act):
    """``f[dst + k] = act(sum_i W[k, i] f[src + i] + b[k])`` (``act < 0``: no activation).

    ``W`` is stored transposed (``W[k, i]`` at ``w_off + i rows + k``), so that eight
    rows at a time read eight adjacent weights per ``i`` (unsigned indices: no
    wraparound test between the loads) and keep eight independent sums in flight.
    (numba leaves them scalar; the gain over four rows of the untransposed matrix is
    in docs/benchmarks.md.)  Each row still adds its terms in the
    order ``b, i = 0, 1, ...``, so every float is the one of a row-by-row loop.
    """
    k = 0
    o1, o2, o3, o4 = np.uint64(1), np.uint64(2), np.uint64(3), np.uint64(4)
    o5, o6, o7 = np.uint64(5), np.uint64(6), np.uint64(7)
    while k + 8 <= rows:
        z0, z1, z2, z3 = aux[b_off + k], aux[b_off + k + 1], aux[b_off + k + 2], aux[b_off + k + 3]
        z4, z5, z6, z7 = (
            aux[b_off + k + 4],
            aux[b_off + k + 5],
            aux[b_off + k + 6],
            aux[b_off + k + 7],
        )
        w = np.uint64(w_off + k)
        for i in range(m):
            ui = f[src + i]
            z0 += aux[w] * ui
            z1 += aux[w + o1] * ui
            z2 += aux[w + o2] * ui
            z3 += aux[w + o3] * ui
            z4 += aux[w + o4] * ui
            z5 += aux[w + o5] * ui
            z6 += aux[w + o6] * ui
            z7 += aux[w + o7] * ui
            w += np.uint64(rows)
        f[dst + k], f[dst + k + 1], f[dst + k + 2], f[dst + k + 3] = z0, z1, z2, z3
        f[dst + k + 4], f[dst + k + 5], f[dst + k + 6], f[dst + k + 7] = z4, z5, z6, z7
        k += 8
    while k < rows:
        z = aux[b_off + k]
        for i in range(m):
            z += aux[w_off + i * rows + k] * f[src + i]
        f[dst + k] = z
        k += 1
    if act >= 0:
        for k in range(rows):
            f[dst + k] = feature(f[dst + k], act)


# A token's state (floats in int64 words): the ``L H E`` sketch entries decoded
# (``update``), then what ``init`` computes from the token's own bits once: the output bias term
# ``<wb, u^0> + bb`` and, per head, layer 0's query features and readout (``r + d``);
# then, with several layers, answer's float scratch of ``2 (m + r + d)``.


@njit(inline="always")
def _cache(aux):
    """Offset in the state of the token's ``init`` cache (bias term, then per head ``r + d``)."""
    return int(aux[0]) * int(aux[1]) * int(aux[6])


@njit(inline="always")
def _cached(pos, ctx, aux):
    """Whether ``init`` fills the cache of token ``pos``: every query; with several layers,
    every token (``emit`` of the later layers runs layer 0 for each speaker)."""
    return int(aux[0]) > 1 or pos < ctx[0]


@njit(inline="always")
def _scratch(state, aux):
    """``init``'s and ``answer``'s float scratch (:func:`_forward`) with several layers: the
    token's state after the sketch entries and the cache, written before it is read.  With
    one layer the state has none (``answer`` reads only the cache and the sketches, and
    the engine copies every state into every input: a small state is a fast one); ``init``
    then allocates its scratch, as ``emit``, which may not write the state, always does."""
    H, r, d = int(aux[1]), int(aux[2]), int(aux[3])
    return state[_cache(aux) + 1 + H * (r + d) :].view(np.float64)


@njit(cache=True)
def _unpack(bits, m, f):
    """``f[:m] = u^0 = 2 x - 1`` from the packed token."""
    for i in range(m):
        f[i] = 2.0 * float((bits[i >> 6] >> np.uint64(i & 63)) & np.uint64(1)) - 1.0


@njit(cache=True)
def _bias(aux, L, H, P, m, f):
    """The output bias term ``<wb, u^0> + bb`` (``u^0`` in ``f[:m]``)."""
    base = _HDR + L * H * P
    y = aux[base + m]
    for i in range(m):
        y += aux[base + i] * f[i]
    return y


@njit(inline="always")
def _query_side(aux, head_base, r, d, m, act, f):
    """One head's query features and readout of ``f[:m]``, into ``f[2m : 2m + r + d]``
    (``head_base``: the head's first aux entry)."""
    o_wv = head_base + 2 * r * m + 2 * r
    o_bv = o_wv + 2 * d * m
    _affine(aux, head_base, head_base + 2 * r * m, r, m, f, 0, 2 * m, act)
    _affine(aux, o_wv + d * m, o_bv + d, d, m, f, 0, 2 * m + r, -1)


@njit(inline="always")
def _head_readout(
    y,
    aux,
    head_base,
    sketch_values,
    state_offset,
    query_array,
    query_offset,
    r,
    d,
    m,
    act,
    eps,
    N,
    f,
    residual,
):
    """``y`` plus one head's ``<a(u), o>``, its query features and readout at
    ``query_array[query_offset:]``.

    ``head_base``: the head's first aux entry; ``sketch_values[state_offset:]``: its
    decoded state (:func:`update`), ``r`` rows of ``width`` entries (``d`` products,
    then the key feature itself unless ``act`` is the signed map).  ``residual``: also
    add ``W_u o`` to ``delta`` (``f[m : 2m]``).  Every sum adds its terms in the order
    of the model's definition.  Unsigned indices: numba then tests no index for
    wraparound, which made this readout over 2x slower.
    """
    state_offset = np.uint64(state_offset)
    features = np.uint64(query_offset)
    rank, width_d, width_m = np.uint64(r), np.uint64(d), np.uint64(m)
    row_width = width_d if act == 2 else width_d + np.uint64(1)
    denominator = eps if act != 2 else N
    if act != 2:
        for k in range(rank):
            denominator += (
                query_array[features + k] * sketch_values[state_offset + k * row_width + width_d]
            )
    readout = features + rank
    o_wu = np.uint64(head_base + 2 * r * m + 2 * r + 2 * d * m + 2 * d)
    for c in range(width_d):
        numerator = 0.0
        for k in range(rank):
            numerator += query_array[features + k] * sketch_values[state_offset + k * row_width + c]
        head_out = numerator / denominator
        y += query_array[readout + c] * head_out
        if residual:
            w = o_wu + c * width_m  # W_u stored transposed: row c is head_out's
            for i in range(width_m):
                f[width_m + i] += aux[w + i] * head_out
    return y


@njit(cache=True)
def _forward(upto, bits, ctx, state, aux, f, cached):
    """Run layers ``0..upto-1`` for one token from its bits and the stored sketches.

    ``f``: float scratch of ``2 (m + r + d)``: ``u`` (``m``), ``delta`` (``m``), then
    blocks of ``r`` and ``d`` (query or key features, readout or values).  Leaves
    the token's residual stream in ``f[:m]`` and returns its output ``y`` (the
    readouts of those layers, plus the output bias when ``upto`` is all layers;
    then the last layer's residual update, which no output reads, is skipped).
    ``cached``: the bias term and layer 0's query side are read from the token's
    ``init`` cache in ``state`` (the same floats, computed once per token).
    """
    L, H, r, d, m, act, E, P = _dims(aux)
    eps = aux[8]
    N = float(ctx[3])
    delta, features = m, 2 * m  # offsets in f
    state_floats = state.view(np.float64)
    cache_offset = _cache(aux)
    _unpack(bits, m, f)
    y = 0.0
    if upto == L:
        y = state_floats[cache_offset] if cached else _bias(aux, L, H, P, m, f)
    for lay in range(upto):
        residual = lay < upto - 1 or upto < L
        if residual:
            for i in range(m):
                f[delta + i] = 0.0
        for h in range(H):
            head_base = _HDR + (lay * H + h) * P
            if cached and lay == 0:  # read in place from the cache
                query_array, query_offset = state_floats, cache_offset + 1 + h * (r + d)
            else:
                _query_side(aux, head_base, r, d, m, act, f)
                query_array, query_offset = f, features
            state_offset = (lay * H + h) * E
            y = _head_readout(
                y, aux, head_base, state_floats, state_offset, query_array, query_offset,
                r, d, m, act, eps, N, f, residual,
            )  # fmt: skip
        if residual:
            for i in range(m):
                f[i] += f[delta + i]
    return y


@njit(cache=True)
def init(pos, bits, ctx, state, aux):
    """The token's cache (:func:`_cached` tokens): its bias term and layer 0's query side."""
    if not _cached(pos, ctx, aux):
        return
    L, H, r, d, m, act, E, P = _dims(aux)
    state_floats = state.view(np.float64)
    cache_offset = _cache(aux)
    f = _scratch(state, aux) if L > 1 else np.empty(2 * (m + r + d))
    _unpack(bits, m, f)
    state_floats[cache_offset] = _bias(aux, L, H, P, m, f)
    for h in range(H):
        _query_side(aux, _HDR + h * P, r, d, m, act, f)
        head_cache = cache_offset + 1 + h * (r + d)
        for k in range(r + d):
            state_floats[head_cache + k] = f[2 * m + k]


@njit(cache=True)
def emit(layer, pos, bits, ctx, state, aux, out):
    L, H, r, d, m, act, E, P = _dims(aux)
    top = aux[9]
    f = np.empty(2 * (m + r + d))
    _forward(layer, bits, ctx, state, aux, f, _cached(pos, ctx, aux))
    keys, values = 2 * m, 2 * m + r  # offsets in f
    width = d if act == 2 else d + 1
    for h in range(H):
        head_base = _HDR + (layer * H + h) * P
        o_wv = head_base + 2 * r * m + 2 * r
        o_lo = o_wv + 2 * d * m + 2 * d + m * d
        o_step = o_lo + E
        _affine(aux, head_base + r * m, head_base + 2 * r * m + r, r, m, f, 0, keys, act)
        _affine(aux, o_wv, o_wv + 2 * d * m, d, m, f, 0, values, -1)
        for k in range(r):
            for c in range(width):
                x = f[keys + k] * f[values + c] if c < d else f[keys + k]
                e = k * width + c
                code = math.floor((x - aux[o_lo + e]) / aux[o_step + e] + 0.5)
                code = min(max(code, 0.0), top)
                out[h * E + e] = int(code)


@njit(cache=True)
def update(layer, pos, bits, ctx, state, sketch, aux):
    """Store the layer's sketch decoded, entry ``e`` of a head as ``step_e register + N lo_e``
    (a float in the integer state), once per token rather than once per reading of it.
    The last layer's is read only by the queries' ``answer``: the other tokens skip it."""
    L, H, r, d, m, act, E, P = _dims(aux)
    if layer == L - 1 and pos >= ctx[0]:
        return
    N = float(ctx[3])
    state_floats = state.view(np.float64)
    for h in range(H):
        o_lo = np.uint64(_HDR + (layer * H + h) * P + 2 * r * m + 2 * r + 2 * d * m + 2 * d + m * d)
        o_step = o_lo + np.uint64(E)
        state_offset, sketch_offset = np.uint64((layer * H + h) * E), np.uint64(h * E)
        for e in range(np.uint64(E)):
            state_floats[state_offset + e] = (
                aux[o_step + e] * sketch[sketch_offset + e] + N * aux[o_lo + e]
            )


@njit(inline="always")
def _cached_output(ctx, state, aux):
    """A query's output with one layer: its cached bias term and readout of its cache."""
    L, H, r, d, m, act, E, P = _dims(aux)
    state_floats = state.view(np.float64)
    cache_offset = _cache(aux)
    eps, N = aux[8], float(ctx[3])
    y = state_floats[cache_offset]
    for h in range(H):
        head_base, query_offset = _HDR + h * P, cache_offset + 1 + h * (r + d)
        y = _head_readout(
            y, aux, head_base, state_floats, h * E, state_floats, query_offset,
            r, d, m, act, eps, N, state_floats, False,
        )  # fmt: skip
    return y


@njit(cache=True)
def answer(pos, bits, ctx, state, aux):
    if int(aux[0]) == 1:  # every query is cached
        y = _cached_output(ctx, state, aux)
    else:
        y = _forward(
            int(aux[0]), bits, ctx, state, aux, _scratch(state, aux), _cached(pos, ctx, aux)
        )
    if not y == y:  # NaN
        return -1
    return int(min(max(math.floor(y + 0.5), -1.0), float(ctx[1] + 1)))


def trained_plan(ctx, weights: Weights, bits: int) -> Plan:
    """The plan of a saved model on a family with context ``ctx`` at ``bits`` bits per entry.

    Raises
    ------
    PluginError
        ``bits`` outside ``1..MAX_BITS``, or a model trained for another family size.
    """
    if not 1 <= bits <= MAX_BITS:
        raise PluginError(f"bits must be in 1..{MAX_BITS}, got {bits}", param="bits")
    a, fam = weights.arch, weights.family
    have, want = (fam["q"], fam["s"], a["m"]), (ctx.q, ctx.s, ctx.m)
    if have != want:
        differ = ", ".join(
            f"{name}={x} (this family: {y})"
            for name, x, y in zip(("q", "s", "token bits m"), have, want, strict=True)
            if x != y
        )
        raise PluginError(
            f"{weights.path} was trained for {fam['name']} q={fam['q']}, s={fam['s']}; "
            f"it differs in {differ}"
        )
    if weights.causal:
        from sketchsim.sketch.causal import causal_plan

        return causal_plan(ctx, weights, bits)
    L, H, E = a["layers"], a["heads"], weights.entries()
    r, d, m = a["rank"], a["value_width"], a["m"]
    # per token: its copies of the L layers' sketches, init's cache, the float scratch
    state = L * H * E + 1 + H * (r + d) + (2 * (m + r + d) if L > 1 else 0)
    check_engine_size(ctx.n_tokens * state + H * E * (L + 1), what=f"{L} x {H} x {E} entries")
    layers = [Layer("sum", H * E, 2**bits, levels=2**bits) for _ in range(L)]
    return Plan(layers, state, emit, update, answer, aux=_aux(weights, bits), init=init)


def trained_engine(ctx, weights: Weights, bits: int, name: str = "trained"):
    """The engine of :func:`trained_plan` as the ``trained`` protocol runs it.

    The plan's functions are sketchsim's own (tested by its suite), so the engine
    uses its cached, inlined loop without the bounds-checked first pass, as for
    every protocol shipped with sketchsim; a plan built by hand and handed to
    :class:`~sketchsim.sketch.engine.Engine` is compiled as a plug-in's instead
    (checked copies, compiled in every new process).
    """
    from sketchsim.sketch.engine import Engine

    plan = trained_plan(ctx, weights, bits)
    plan.builtin = True
    return Engine(plan, ctx, name)
