"""clipped-counts: block counts clipped to fewer than s+1 levels.

Declares ``q log2(levels)`` bits; with ``levels <= s`` that is below the bound,
so the protocol must be wrong somewhere on F(q, s).
"""

from sketchsim.sketch import Param, Protocol
from sketchsim.sketch.block_counts import block_counts_plan


def setup(ctx, params):
    return block_counts_plan(ctx, params["levels"] or ctx.s)  # 0: one level too few


PROTOCOL = Protocol(
    "clipped-counts",
    "block counts clipped to fewer levels: below the bound, must fail",
    setup,
    params=(Param("levels", "int", 0, "levels per count (0: s)", minimum=0),),
)
