"""Which inputs a transcript run measures: exhaustive or sampled, within the size limits.

Every input of the family is enumerated (exhaustive mode: exact entropies) when
``(s+1)^q`` is small enough, else a sample drawn with the family's seed;
both are checked against the input and memory limits before anything is
allocated.
"""

from __future__ import annotations

import math
import os

import numpy as np

from sketchsim import config
from sketchsim.errors import SketchsimError
from sketchsim.estimates import byte_size
from sketchsim.sketch.family import Family

__all__ = [
    "EXHAUSTIVE_AUTO",
    "EXHAUSTIVE_MAX",
    "InputLimitError",
    "choose_answers",
    "exhaustive_mode",
    "max_bytes",
    "plan_inputs",
]

EXHAUSTIVE_AUTO = config.TRANSCRIPT_EXHAUSTIVE_AUTO
EXHAUSTIVE_MAX = config.TRANSCRIPT_EXHAUSTIVE_MAX

#: Bytes per input that measuring holds besides the answer vector: fingerprints
#: (16), correctness (1) and the grouping temporaries (order, sorted copy,
#: group ids, inverse: about 48).
_BYTES_PER_INPUT = 65


class InputLimitError(SketchsimError):
    """A run would exceed a size limit; carries the values (the CLI words the remedy).

    Attributes
    ----------
    kind : {"exhaustive", "memory"}
    estimate, limit : float
        Inputs (exhaustive) or bytes (memory).
    """

    def __init__(self, message: str, kind: str, estimate: float, limit: float):
        super().__init__(message)
        self.kind, self.estimate, self.limit = kind, estimate, limit


def max_bytes() -> int:
    """The memory limit: ``SKETCHSIM_MAX_MEMORY_GB`` (GiB) or the config default."""
    text = os.environ.get("SKETCHSIM_MAX_MEMORY_GB")
    if not text:
        return config.TRANSCRIPT_MAX_BYTES
    try:
        value = float(text)
    except ValueError:
        raise SketchsimError(f"SKETCHSIM_MAX_MEMORY_GB must be a number, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise SketchsimError(f"SKETCHSIM_MAX_MEMORY_GB must be positive, got {text!r}")
    return int(value * 2**30)


def exhaustive_mode(family: Family, exhaustive: bool | None, limit: int, name: str) -> bool:
    """Whether to enumerate every input of ``family`` (``None``: when ``(s+1)^q`` is at
    most :data:`EXHAUSTIVE_AUTO`).

    Raises
    ------
    InputLimitError
        Exhaustive mode above ``limit`` inputs (``name`` words the limit).
    """
    if exhaustive is None:
        exhaustive = family.log2_size <= math.log2(EXHAUSTIVE_AUTO)
    if exhaustive and family.log2_size > math.log2(limit) + 1e-9:
        raise InputLimitError(
            f"exhaustive {family.describe()} has (s+1)^q = {family.size_text()} inputs, "
            f"above {name} 2^{limit.bit_length() - 1}",
            "exhaustive",
            2.0 ** min(family.log2_size, 1023.0),
            limit,
        )
    return bool(exhaustive)


def plan_inputs(family: Family, exhaustive: bool | None, samples: int) -> tuple[str, int]:
    """``(mode, inputs)`` after checking the limits, before anything is allocated.

    ``exhaustive=None`` chooses exhaustive mode when ``(s+1)^q`` is at most
    :data:`EXHAUSTIVE_AUTO`.

    Raises
    ------
    InputLimitError
        Exhaustive mode above :data:`EXHAUSTIVE_MAX` inputs, or an estimated
        allocation above :func:`max_bytes`.
    """
    if exhaustive_mode(family, exhaustive, EXHAUSTIVE_MAX, "the limit"):
        mode, n = "exhaustive", family.size
        extra = 24  # the enumeration index and one column temporary
    else:
        if samples < 1:
            raise SketchsimError(f"the number of samples must be >= 1, got {samples}")
        mode, n, extra = "sampled", samples, 0
    per = family.q * np.dtype(family.answer_dtype).itemsize + _BYTES_PER_INPUT + extra
    need, limit = float(n) * per, max_bytes()
    if need > limit:
        raise InputLimitError(
            f"{n:,} {mode} inputs of {family.describe()} need about {byte_size(need, 'GiB')} "
            f"({per} bytes each), above the memory limit {byte_size(limit, 'GiB')}",
            "memory",
            need,
            limit,
        )
    return mode, n


def choose_answers(family: Family, exhaustive: bool | None, samples: int):
    """The answer vectors to run: ``(mode, T)`` (limits checked by :func:`plan_inputs`)."""
    mode, n = plan_inputs(family, exhaustive, samples)
    if mode == "exhaustive":
        return mode, family.all_answers()
    return mode, family.sample_answers(n)
