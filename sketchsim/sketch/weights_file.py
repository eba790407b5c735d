"""The ``sketchsim-trained`` weights file: its format, its checks and its reader.

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

Files users hand us are untrusted: every header field and array shape is
checked, and every member's size bounded, before anything is decoded or shown.
The engine side (the model run as a ``trained`` protocol at ``K`` bits) is
:mod:`sketchsim.sketch.trained`.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sketchsim.errors import PluginError
from sketchsim.sketch.causal import COMMON_ARRAYS

__all__ = [
    "weights_family",
    "FORMAT",
    "FORMAT_VERSION",
    "FEATURE_MAPS",
    "MAX_BITS",
    "HEAD_ARRAYS",
    "Weights",
    "load_weights",
    "pinned",
    "save_weights_file",
    "head_entries",
    "builtin_label",
    "label_name",
    "reserved_names",
    "check_plugin_name",
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
    #: The sha256 of the bytes the header and arrays were read from ("" for a model built
    #: in memory): the file's identity, whatever its name or label says.
    sha256: str = ""

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


#: A model plug-in's name as labels show it: no spaces, no punctuation that a label,
#: a protocol spec or a file name would split on.
PLUGIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.+-]{0,63}")


def reserved_names() -> frozenset[str]:
    """Names only sketchsim's own models may carry (lower case): every causal kind, every
    feature map and ``linear-MAP`` name, and the suite's model names."""
    from sketchsim.sketch.causal import FIXED_MAPS, KINDS, LINEAR_MAPS

    names = {*KINDS, *FEATURE_MAPS, *LINEAR_MAPS, *FIXED_MAPS.values()}
    names |= {f"linear-{f}" for f in LINEAR_MAPS} | {"softmax", "kernel", "causal", "linear"}
    return frozenset(n.lower() for n in names)


def check_plugin_name(name: str) -> str | None:
    """Why ``name`` cannot name a model plug-in in labels, or None.

    A plug-in's model is labelled ``NAME L.. H.. r.. d..``; a NAME that is a
    built-in kind's or feature map's would make its rows read as that kind's
    (docs/capacity.md, "Your own layer"), and one with spaces would not parse back.
    """
    if not isinstance(name, str) or not PLUGIN_NAME.fullmatch(name):
        return (f"a model plug-in's name is a letter or '_' then letters, digits, '_', '.', "
                f"'+' or '-' (at most 64), got {ascii(name)[:70]}")  # fmt: skip
    if name.lower() in reserved_names():
        return (f"a model plug-in may not be named {name!r}: it is a built-in kind's or "
                "feature map's name, and its rows would read as that model's")  # fmt: skip
    return None


def builtin_label(arch: dict) -> str:
    """The label sketchsim gives a model of ``arch``: its kind or feature map, then its sizes
    (``elu1 L1 H1 r2 d4``, ``gla L1 H1 r2 d4``, ``window L1 H1 r4 d8 w5``)."""
    if "kind" in arch:
        from sketchsim.sketch.causal import causal_dims, causal_name

        return f"{causal_name(arch)} {causal_dims(arch)}"
    dims = f"L{arch['layers']} H{arch['heads']} r{arch['rank']} d{arch['value_width']}"
    return f"{arch['feature_map']} {dims}"


def label_name(label: str, arch: dict) -> str | None:
    """What a header's ``label`` says of the model of ``arch``: ``""`` when it is sketchsim's
    own label (:func:`builtin_label`), a plug-in's NAME when it is exactly ``NAME`` and the
    sizes, with NAME allowed (:func:`check_plugin_name`); None when it describes another
    model (another kind, other sizes, other spacing)."""
    want = builtin_label(arch)
    if label == want:
        return ""
    name, space, dims = label.partition(" ")
    if not space or dims != want.split(" ", 1)[1] or check_plugin_name(name) is not None:
        return None
    return name


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
    if label is not None:
        a = header["architecture"]
        name, dims = builtin_label(a).split(" ", 1)
        plugin = label_name(label, a)
        if plugin is None:
            _fail(
                path,
                f"label {label!r} does not describe its architecture ({name} {dims}; a "
                f"plug-in's label is NAME {dims}, NAME not a built-in kind's or map's name)",
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
    if header.get("state_basis", "readout") != "readout":
        _fail(path, "state_basis must be readout or absent")
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
    from sketchsim.errors import printable
    from sketchsim.input_files import path_problem

    p, shown = Path(str(path)), printable(path)  # a name's line breaks stay in one line
    problem = path_problem(p)  # missing, a symlink loop, a dangling symlink
    if problem:
        _fail(shown, problem)
    try:
        if p.is_dir():
            _fail(shown, "is a folder, not a weights file")
        if not p.is_file():
            _fail(shown, "is not a regular file (a FIFO or a device?)")
    except OSError as exc:
        _fail(shown, f"cannot be read ({exc.strerror or exc})")
    return p


#: Files pinned by :func:`pinned` (sha256 -> Weights): a unit's model, never evicted
#: while the unit runs, so that every read of it within the unit is the same bytes.
_PINNED: dict[str, Weights] = {}


@contextlib.contextmanager
def pinned(weights: Weights):
    """Keep ``weights`` loadable by its content key for the ``with`` block.

    Inside it, ``load_weights(path, sha256=weights.sha256)`` returns these arrays
    without reading the file again: a unit (one file of ``capacity``, one protocol of
    ``frontier``) measures exactly the bytes it hashed, even if the file is replaced
    while it runs.
    """
    key = weights.sha256
    had = _PINNED.get(key)
    _PINNED[key] = weights
    try:
        yield weights
    finally:
        if had is None:
            _PINNED.pop(key, None)


def load_weights(path, sha256: str | None = None) -> Weights:
    """Read and check a weights file; the same bytes are parsed once per process.

    The zip members are checked by name and size, and each array's ``.npy``
    header by shape and dtype, before anything but the (size-capped) JSON
    header is decompressed: a small file cannot expand into gigabytes.

    Parameters
    ----------
    path : path-like
    sha256 : str, optional
        The content the caller measures: a file loaded (or :func:`pinned`) with this
        sha256 is returned without reading ``path`` again; otherwise the file is read
        and refused unless its bytes hash to it (it changed since it was read).

    Raises
    ------
    PluginError
        One line naming the file: missing, not a regular file, unreadable, not
        this format, a header field of the wrong type or range, unexpected or
        oversized members, wrong shapes, non-finite numbers, not the bytes ``sha256``
        names.
    """
    if sha256:
        w = _PINNED.get(sha256) or _LOADED.get(sha256)
        if w is not None:
            return Weights(w.header, w.arrays, str(path), sha256)
    p = _check_path(path)
    try:
        size = p.stat().st_size
        if size > MAX_ARRAY_BYTES + MAX_HEADER_BYTES:
            _fail(path, f"is {size:,} bytes, more than any weights file may hold")
        data = p.read_bytes()
    except OSError as exc:
        _fail(path, f"cannot be read ({exc.strerror or exc})")
    key = hashlib.sha256(data).hexdigest()
    if sha256 and key != sha256:
        _fail(path, f"is not the content the run pinned (its sha256 is {key[:16]}..., the "
                    f"run measures {str(sha256)[:16]}...): it changed during the run, or the "
                    "pin names another file")  # fmt: skip
    if key in _LOADED:
        w = _LOADED[key]
        return Weights(w.header, w.arrays, str(path), key)
    w = _read_weights(io.BytesIO(data), path)
    w.sha256 = key
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


def weights_family(weights):
    """The family a weights file was trained on (name, size, seed and options from its header)."""
    from sketchsim.sketch.family_plugins import make_family

    fam = weights.family
    return make_family(
        fam.get("spec", fam["name"]).split(":")[0],
        fam["q"],
        fam["s"],
        fam["seed"],
        fam.get("options") or {},
    )
