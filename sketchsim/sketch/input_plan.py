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
    "answer_bytes",
    "check_memory",
    "choose_answers",
    "choose_inputs",
    "covers_family",
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


def choose_inputs(
    family: Family,
    exhaustive: bool | None,
    samples: int,
    exhaustive_max: int = EXHAUSTIVE_MAX,
    limit_name: str = "the limit",
) -> tuple[str, int]:
    """Which inputs a run measures, the one choice of a run with or without a cluster.

    Parameters
    ----------
    family : Family
    exhaustive : bool or None
        Enumerate every input; ``None`` chooses exhaustive mode when ``(s+1)^q``
        is at most :data:`EXHAUSTIVE_AUTO`.
    samples : int
        Inputs to draw (with the family's seed) in sampled mode.
    exhaustive_max : int
        Most inputs accepted in exhaustive mode.
    limit_name : str
        How the error words ``exhaustive_max``.

    Returns
    -------
    (str, int)
        ``("exhaustive", (s+1)^q)`` or ``("sampled", samples)``.

    Raises
    ------
    InputLimitError
        Exhaustive mode above ``exhaustive_max`` inputs.
    SketchsimError
        Sampled mode with fewer than one sample.
    """
    if exhaustive_mode(family, exhaustive, exhaustive_max, limit_name):
        return "exhaustive", int(family.size)
    if samples < 1:
        raise SketchsimError(f"the number of samples must be >= 1, got {samples}")
    return "sampled", int(samples)


def answer_bytes(family: Family) -> int:
    """Bytes of one input's answer vector (``q`` answers of the family's answer dtype)."""
    return family.q * np.dtype(family.answer_dtype).itemsize


def check_memory(family: Family, mode: str, inputs: int, per_input: int, held: str = "") -> None:
    """Refuse a run whose ``inputs`` would hold ``per_input`` bytes each above :func:`max_bytes`.

    Parameters
    ----------
    family : Family
    mode : {"exhaustive", "sampled"}
    inputs : int
    per_input : int
        Bytes held per input.
    held : str
        What those bytes are, for the message (e.g. ``" of answers on the client"``).

    Raises
    ------
    InputLimitError
        ``kind="memory"``, with the estimate and the limit in bytes.
    """
    need, limit = float(inputs) * per_input, max_bytes()
    if need > limit:
        raise InputLimitError(
            f"{inputs:,} {mode} inputs of {family.describe()} need about "
            f"{byte_size(need, 'GiB')}{held} ({per_input} bytes each), above the memory limit "
            f"{byte_size(limit, 'GiB')}",
            "memory",
            need,
            limit,
        )


def covers_family(family: Family, inputs: int) -> bool:
    """Whether ``inputs`` inputs are the whole family (an exhaustive run: exact entropies)."""
    return family.log2_size <= 62 and inputs == family.size


def plan_inputs(family: Family, exhaustive: bool | None, samples: int) -> tuple[str, int]:
    """``(mode, inputs)`` of a single-process run, limits checked before anything is allocated.

    The inputs are :func:`choose_inputs`'s; the process holds, per input, the
    answer vector and the measuring's arrays.

    Raises
    ------
    InputLimitError
        Exhaustive mode above :data:`EXHAUSTIVE_MAX` inputs, or an estimated
        allocation above :func:`max_bytes`.
    """
    mode, n = choose_inputs(family, exhaustive, samples)
    extra = 24 if mode == "exhaustive" else 0  # the enumeration index and one column temporary
    check_memory(family, mode, n, answer_bytes(family) + _BYTES_PER_INPUT + extra)
    return mode, n


def choose_answers(family: Family, exhaustive: bool | None, samples: int):
    """The answer vectors to run: ``(mode, T)`` (limits checked by :func:`plan_inputs`)."""
    mode, n = plan_inputs(family, exhaustive, samples)
    if mode == "exhaustive":
        return mode, family.all_answers()
    return mode, family.sample_answers(n)
