"""kernel: one nonnegative kernel attention head as a sketch, r(d+1) entries of `bits` bits.

Correct on F(q, s) when the registers hold the sums (bits >= log2(N+1) for
identity values), wrong when they saturate.  See sketchsim.sketch.kernel_head.
"""

from sketchsim.sketch import Protocol
from sketchsim.sketch.kernel_head import KERNEL_PARAMS, kernel_plan


def setup(ctx, params):
    return kernel_plan(ctx, params["r"], params["bits"], params["values"], heads=1)


PROTOCOL = Protocol(
    "kernel",
    "one nonnegative kernel attention head with b-bit sketch entries",
    setup,
    params=KERNEL_PARAMS,
)
