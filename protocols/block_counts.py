"""block-counts: the data token sends its q block counts (THEORY section 5, tightness).

Exactly ``q log2(s+1)`` bits, and correct on F(q, s).
"""

from sketchsim.sketch import Protocol
from sketchsim.sketch.block_counts import block_counts_plan


def setup(ctx, params):
    return block_counts_plan(ctx, ctx.s + 1)


PROTOCOL = Protocol(
    "block-counts", "the data token sends its q block counts: exactly at the bound", setup
)
