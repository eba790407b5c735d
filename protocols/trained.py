"""trained: a saved kernel-attention model (1-2 layers, H heads) with K-bit state registers.

``trained:weights=PATH,bits=K`` runs the model `sketchsim sweep --suite capacity
--save-weights DIR` kept in PATH: each layer's per-head state (``sum phi_K v^T``
and ``sum phi_K``) crosses a ``sum`` channel of K-bit registers, so the model
declares ``layers * heads * E * K`` bits.  A causal model's state is rounded after
every token (``rounding=every``, the model in fixed point) or, with ``rounding=cut``,
only at the cut: its transcript in K-bit registers, both sides exact (docs/theory.md
5.3).  See sketchsim.sketch.trained.
"""

from sketchsim.sketch import Param, Protocol

#: ``sketchsim.sketch.weights_file.MAX_BITS`` (tests/sketch/test_startup_imports.py checks it):
#: the model's module is imported when the protocol is used, not by every command that
#: lists the built-in protocols (the main job never runs it).
MAX_BITS = 32


def setup(ctx, params):
    from sketchsim.sketch.trained import load_weights, trained_plan

    weights = load_weights(params["weights"], params.get("sha256") or None)
    return trained_plan(ctx, weights, params["bits"], params.get("rounding", "every"))


def preflight(params, family):
    """Refuse a weights file trained on another family than the run's (name, seed or
    options; q, s and m are the plan's check), unless ``other_family=allow``."""
    if params.get("other_family") != "refuse":
        return
    from sketchsim.errors import PluginError
    from sketchsim.sketch.trained import family_difference, load_weights

    weights = load_weights(params["weights"], params.get("sha256") or None)
    differ = family_difference(weights, family)
    if differ:
        raise PluginError(
            f"weights file {params['weights']} was trained on another family: {differ}; "
            "run with the family it names, or pass other_family=allow to measure it here",
            param="other_family",
        )


PROTOCOL = Protocol(
    "trained",
    "a saved kernel-attention model whose per-head state crosses K-bit sum registers",
    setup,
    params=(
        Param("weights", "path", "", "weights file (.npz) written by sweep --save-weights"),
        Param(
            "bits",
            "int",
            MAX_BITS,
            f"bits per state register (1..{MAX_BITS})",
            minimum=1,
            maximum=MAX_BITS,
        ),
        Param(
            "rounding",
            "str",
            "every",
            "causal models: round every state update to the "
            "registers, or only the transcript at the cut",
            choices=("every", "cut"),
        ),
        Param(
            "sha256",
            "str",
            "",
            "the weights file's content (sha256): refuse the file unless its bytes hash to "
            "it; capacity and frontier set it, so that every K of a run measures one file",
        ),
        Param(
            "other_family",
            "str",
            "refuse",
            "a model trained on another family (name, seed or options) than the run's: "
            "refuse it, or allow it (measured on inputs it never saw the like of)",
            choices=("refuse", "allow"),
        ),
    ),
    families=("hard", "mqar"),
    preflight=preflight,
)
