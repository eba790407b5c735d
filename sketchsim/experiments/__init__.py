"""Trained-model experiments (optional: ``pip install sketchsim[torch]``).

``models`` holds the normalized kernel attention head, its feature maps and
the dense softmax baseline; ``train`` fits them full-batch with a seed, with
Adam on one flat buffer (``optim``) and, where inputs repeat few tokens, the
heads computed on their vocabulary (``vocabulary``).  ``softmax_kernel`` and
``vocab_readout`` are the jitted CPU kernels (forward and gradient) of the
attention readouts.
"""


def require_torch():
    """Import torch or raise a one-line error saying how to install it."""
    try:
        import torch
    except ImportError:
        from sketchsim.errors import SketchsimError

        raise SketchsimError("this needs PyTorch: pip install 'sketchsim[torch]'") from None
    return torch
