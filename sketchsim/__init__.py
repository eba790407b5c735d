"""sketchsim: an information-theoretic sketch simulator for kernel attention.

The public API re-exports the Min-IP core; everything else lives in its
topic module (``attention``, ``verify``, ``sketch``, ``plugins``).
"""

__version__ = "0.1.0"

from sketchsim.bits import pack_bits, unpack_bits
from sketchsim.minip import minip_targets

__all__ = ["__version__", "pack_bits", "unpack_bits", "minip_targets"]
