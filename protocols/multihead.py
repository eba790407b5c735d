"""multihead: H kernel heads, value coordinates split among them, readouts summed."""

from sketchsim.sketch import Param, Protocol
from sketchsim.sketch.kernel_head import KERNEL_PARAMS, kernel_plan


def setup(ctx, params):
    return kernel_plan(ctx, params["r"], params["bits"], params["values"], heads=params["heads"])


PROTOCOL = Protocol(
    "multihead",
    "H kernel heads, each carrying a share of the value coordinates",
    setup,
    params=(Param("heads", "int", 4, "number of heads", minimum=1),) + KERNEL_PARAMS,
)
