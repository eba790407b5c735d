"""sketchsim: an information-theoretic sketch simulator for kernel attention.

The public API re-exports the Min-IP core; everything else lives in its
topic module (``attention``, ``verify``, ``sketch``, ``plugins``).  The
re-exports are resolved on first use, so ``import sketchsim`` (and
``sketchsim --help``) loads neither NumPy nor numba.
"""

__version__ = "0.1.0"

from sketchsim import numba_cache as _numba_cache  # noqa: E402  (before any kernel is defined)

_numba_cache.configure()

__all__ = ["__version__", "pack_bits", "unpack_bits", "minip_targets"]

_LAZY = {
    "pack_bits": "sketchsim.minip.bits",
    "unpack_bits": "sketchsim.minip.bits",
    "minip_targets": "sketchsim.minip.kernel",
}


def __getattr__(name):
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'sketchsim' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
