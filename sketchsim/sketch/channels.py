"""Channels: how one layer's symbols become its sketch, and the sketch's range.

Every token that speaks in a layer emits ``k`` symbols from ``{0..a-1}``.

- ``sum``: ``k`` entries, entry ``c`` is the sum of slot ``c`` over speakers
  (the kernel-attention case).  Range per entry ``n*(a-1)+1`` for ``n``
  speakers, or ``levels`` when the layer declares a ``levels``-valued register
  (a saturating fixed-precision accumulator: entries are clipped to ``levels-1``).
- ``histogram``: ``k*a`` entries, the count of each value in each slot.  Range
  per slot: compositions of ``n`` into ``a`` parts, ``C(n+a-1, a-1)``.
- ``concat``: ``n*k`` entries, every speaker's symbols in position order.
  Range ``a^(n k)``.
- ``state``: ``k`` registers that the speakers, in position order, pass from
  one to the next (a causal model's state at the cut, docs/theory.md 5.1); the
  sketch is the registers after the last speaker.  Range ``a^k``.  Only a plan
  with a ``runner`` (sketchsim's causal models) has such a layer.

The declared transcript size is the sum over layers of ``log2`` of the range
(THEORY section 5).
"""

from __future__ import annotations

import math

CHANNELS = ("sum", "histogram", "concat", "state")
CHANNEL_CODE = {name: code for code, name in enumerate(CHANNELS)}


def sketch_length(channel: str, k: int, a: int, n_speakers: int) -> int:
    """Number of integer entries of one layer's sketch."""
    if channel in ("sum", "state"):
        return k
    if channel == "histogram":
        return k * a
    if channel == "concat":
        return k * n_speakers
    raise ValueError(f"unknown channel {channel!r}")


def log2_range(channel: str, k: int, a: int, n_speakers: int, levels: int = 0) -> float:
    """``log2`` of the number of values one layer's sketch can take."""
    if k == 0 or n_speakers == 0 or a <= 1:
        return 0.0
    if channel == "sum":
        per = levels if levels else n_speakers * (a - 1) + 1
        return k * math.log2(per)
    if channel == "histogram":
        return k * math.log2(math.comb(n_speakers + a - 1, a - 1))
    if channel == "concat":
        return n_speakers * k * math.log2(a)
    if channel == "state":
        return k * math.log2(a)
    raise ValueError(f"unknown channel {channel!r}")


def declared_bits(layers, n_tokens: int) -> float:
    """Declared transcript size of a list of :class:`~sketchsim.sketch.Layer`."""
    return sum(
        log2_range(L.channel, L.symbols, L.alphabet, len(L.speaker_positions(n_tokens)), L.levels)
        for L in layers
    )
