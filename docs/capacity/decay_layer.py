"""A causal user layer for the capacity suite: GLA with a decay that ignores the token.

Each key feature ``j`` forgets at its own learned rate ``exp(logsigmoid(b_j) / 16)``
(a data-independent decay, as in RetNet), which is GLA's update with its gate's
weights at zero; the layer says so in ``head_arrays``, so the engine runs it.

    sketchsim sweep --suite capacity --q 4 --s 1 --model-plugin docs/capacity/decay_layer.py:decay
"""

import torch
from torch.nn import functional as F

from sketchsim.experiments.causal_models import CausalLayer
from sketchsim.experiments.model_plugins import ModelType


class DecayLayer(CausalLayer):
    """GLA whose decay is a learned constant per key feature."""

    kind = "gla"

    def gates(self, u):
        B, H, r = u.shape[0], self.heads, self.r
        rate = F.logsigmoid(self.wg.bias).view(1, H, r) / 16.0
        return {"gk": rate.expand(B, H, r)}

    def head_arrays(self, h):
        out = super().head_arrays(h)
        out["wg"] = torch.zeros_like(self.wg.weight[: self.r]).double().numpy()
        return out


MODEL = ModelType("decay", "GLA with a data-independent decay per key feature", DecayLayer)
