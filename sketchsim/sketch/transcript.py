"""The old name of :mod:`sketchsim.sketch.measure`, kept for plug-ins written before it moved.

``transcript`` now names one thing, the command (``cli``, ``runs`` and ``tables``
each hold its layer); importing this module warns and re-exports ``measure``'s names.
"""

import warnings

from sketchsim.sketch import measure as _measure
from sketchsim.sketch.measure import *  # noqa: F403

__all__ = list(_measure.__all__)

warnings.warn(
    "sketchsim.sketch.transcript moved to sketchsim.sketch.measure",
    DeprecationWarning,
    stacklevel=2,
)
