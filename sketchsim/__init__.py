"""sketchsim: an information-theoretic sketch simulator for kernel attention.

The public API is :mod:`sketchsim.api` (``verify``, ``transcript``, ``frontier``,
``certify``, ``sweep``, ``reproduce``: what the commands of those names call),
re-exported here with the Min-IP core, except ``certify``, which is the name of
the :mod:`sketchsim.certify` package (use ``sketchsim.api.certify``).  The
packages by layer: ``minip``, ``heads``, ``sketch``, ``certify``,
``experiments``, ``cluster``, ``runs`` (every measuring command's loop and
checkpoint), ``cli`` (docs/architecture.md).  The re-exports
are resolved on first use, so ``import sketchsim`` (and ``sketchsim --help``)
loads neither NumPy nor numba.
"""

__version__ = "0.1.0"

from sketchsim import numba_cache as _numba_cache  # noqa: E402  (before any kernel is defined)

_numba_cache.configure()

from sketchsim.lazy import lazy_exports as _lazy_exports  # noqa: E402

_LAZY = {
    "pack_bits": "sketchsim.minip.bits",
    "unpack_bits": "sketchsim.minip.bits",
    "minip_targets": "sketchsim.minip.kernel",
    "verify": "sketchsim.api",
    "transcript": "sketchsim.api",
    "frontier": "sketchsim.api",
    "run": "sketchsim.api",
    "bound": "sketchsim.api",
    "minrank": "sketchsim.api",
    "witness": "sketchsim.api",
    "ablation": "sketchsim.api",
    "sweep": "sketchsim.api",
    "reproduce": "sketchsim.api",
    "model_inputs": "sketchsim.api",
}

__all__ = ["__version__", *_LAZY]


__getattr__, __dir__ = _lazy_exports(__name__, globals(), _LAZY)
