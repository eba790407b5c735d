"""A user layer for the capacity suite: query and key features tied (phi_Q = phi_K).

    sketchsim sweep --suite capacity --q 4 --s 1 --model-plugin docs/capacity/tied_layer.py:tied

or, installed, as an entry point in the group ``sketchsim.models``::

    [project.entry-points."sketchsim.models"]
    tied = "mypackage.tied_layer:MODEL"
"""

from sketchsim.experiments.capacity_models import KernelLayer
from sketchsim.experiments.model_plugins import ModelType


class TiedLayer(KernelLayer):
    """A kernel layer whose queries read the keys' features: one projection, not two."""

    def __init__(self, m, heads, r, d, feature_map, eps=1e-6):
        super().__init__(m, heads, r, d, feature_map, eps)
        self.wq = self.wk  # the same module: its weights are trained and exported once


MODEL = ModelType("tied", "kernel layer with tied query and key features", TiedLayer)
