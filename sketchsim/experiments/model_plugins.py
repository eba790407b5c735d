"""User layers for the capacity suite: entry points ``sketchsim.models`` and ``file.py:NAME``.

A plug-in is a :class:`ModelType` naming a torch layer class built as
``layer(m, heads, r, d, feature_map, eps)`` (the signature of
:class:`~sketchsim.experiments.capacity_models.KernelLayer`) that exposes its
per-layer state:

- ``entries``: state entries per head (``E``);
- ``contributions(u) -> [B, N, H, E]``: each token's share of the state, whose
  sum over tokens is the layer's state (what crosses the channel);
- ``read(u, state) -> (y [B, N], delta [B, N, m])``: the layer's readout and
  residual update from a state ``[B, H, E]``;
- ``head_arrays(h)`` (to be measured by ``sketchsim capacity``): head ``h`` as
  the arrays of the weights file (:data:`sketchsim.sketch.trained.HEAD_ARRAYS`
  less ``lo`` and ``span``): the engine computes ``act(W u + b)`` features with
  ``act`` in ``elu1``, ``relu``, ``signed``.

A *causal* layer (:class:`~sketchsim.experiments.causal_models.CausalLayer`'s
contract) instead names its architecture in a class attribute ``kind`` (one of
:data:`sketchsim.sketch.causal.KINDS`), is built as ``layer(arch, index)`` and
steps one token at a time: ``step(u, state, count, quantize) -> (y, delta,
state)``; its ``head_arrays(h)`` are the kind's arrays
(:func:`sketchsim.sketch.causal.causal_shapes`).

Either declares the feature map it computes in a class attribute
``feature_map`` (default: the plan's, ``elu1``; a causal kind other than
``linear`` has its own).  The contract (docs/capacity.md, "Your own layer"): a
layer the engine could not run is refused in one line *before* training: no
``head_arrays``, a feature map the engine does not compute
(:data:`sketchsim.sketch.trained.FEATURE_MAPS`), an unknown ``kind``.  The rest
is checked when the model is saved: the file's model (the engine's formulas on
the exported arrays) must give the trained model's outputs, else no file is
written and the run's ``weights_refused`` says why.  Subclassing
``KernelLayer`` or ``CausalLayer`` gives all of it: docs/capacity.md has
examples (query and key features tied; a decay that does not depend on the
token).

A plug-in's layer is untrusted code (#47): :class:`CapacityModel` turns an
exception raised by its ``__init__``, ``entries``, ``contributions``, ``read`` or
``head_arrays`` into one
:class:`~sketchsim.errors.PluginError` line naming the plug-in (its spec, as
:func:`resolve_model` recorded it: :func:`plugin_label`), and refuses outputs of
the wrong shape.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from pathlib import Path

from sketchsim.errors import PluginError
from sketchsim.sketch import specs

__all__ = [
    "ENTRY_POINT_GROUP",
    "ModelType",
    "discover_models",
    "resolve_model",
    "plugin_label",
    "declared_map",
    "engine_refusal",
    "check_spec_name",
]

ENTRY_POINT_GROUP = "sketchsim.models"
_METHODS = ("contributions", "read")
_CAUSAL_METHODS = ("step", "head_arrays")


@dataclass(frozen=True)
class ModelType:
    """A user layer: ``name``, a one-line ``description`` and the ``layer`` class."""

    name: str
    description: str
    layer: type

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name.strip():
            raise PluginError(f"a model's name must be a non-empty string, got {self.name!r}")
        if not isinstance(self.layer, type):
            raise PluginError(f"model {self.name}: layer must be a class")
        kind = getattr(self.layer, "kind", None)
        need = _CAUSAL_METHODS if kind is not None else _METHODS
        missing = [m for m in need if not callable(getattr(self.layer, m, None))]
        if missing:
            raise PluginError(f"model {self.name}: its layer lacks {', '.join(missing)}")
        why = engine_refusal(self.layer)
        if why:
            raise PluginError(f"model {self.name}: the engine could not run it: {why}")


def declared_map(layer: type, default: str = "elu1") -> str:
    """The feature map a layer class declares (class attribute ``feature_map``), else
    the kind's own (causal kinds other than ``linear``), else ``default``."""
    from sketchsim.sketch.causal import FIXED_MAPS

    fmap = layer.__dict__.get("feature_map") or next(
        (c.__dict__["feature_map"] for c in layer.__mro__[1:] if "feature_map" in c.__dict__),
        None,
    )
    if isinstance(fmap, str):
        return fmap
    return FIXED_MAPS.get(getattr(layer, "kind", None) or "", default)


def engine_refusal(layer: type) -> str | None:
    """Why the engine could not run a model of this layer class, or None (checked before
    training: the arrays it exports, the feature map and causal kind it declares)."""
    from sketchsim.sketch.causal import FIXED_MAPS, KINDS, LINEAR_MAPS
    from sketchsim.sketch.weights_file import FEATURE_MAPS

    if not callable(getattr(layer, "head_arrays", None)):
        return "its layer has no head_arrays (the arrays of its weights file)"
    kind = getattr(layer, "kind", None)
    fmap = declared_map(layer)
    if kind is None:
        if fmap not in FEATURE_MAPS:
            return (f"feature map {fmap!r:.40} is not one the engine computes "
                    f"({', '.join(FEATURE_MAPS)})")  # fmt: skip
        return None
    if kind not in KINDS:
        return f"kind {kind!r:.40} is not a causal architecture ({', '.join(KINDS)})"
    allowed = LINEAR_MAPS if kind == "linear" else (FIXED_MAPS[kind],)
    if fmap not in allowed:
        return f"a {kind} layer's feature map is {' or '.join(allowed)}, not {fmap!r:.40}"
    return None


def discover_models() -> list:
    """Installed entry points of :data:`ENTRY_POINT_GROUP` (a bad one is listed with its error)."""
    return specs.discover_entry_points(ENTRY_POINT_GROUP, ModelType, "ModelType", {})


#: Layer class -> the spec it was resolved from (for messages naming the plug-in).
_SPECS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def plugin_label(layer: type) -> str:
    """The spec ``layer`` was resolved from (``file.py:NAME``), else its class name."""
    try:
        found = _SPECS.get(layer)
    except TypeError:  # not weak-referenceable
        found = None
    return found or getattr(layer, "__qualname__", None) or repr(layer)


def _remember(layer: type, spec: str) -> type:
    try:
        _SPECS[layer] = spec
    except TypeError:
        pass
    return layer


def check_spec_name(spec: str) -> None:
    """Refuse a model spec whose NAME (its last ``:`` part, what its rows and files are
    labelled with) a label may not carry: :func:`~sketchsim.sketch.weights_file.
    check_plugin_name`.

    Raises
    ------
    PluginError
    """
    from sketchsim.sketch.weights_file import check_plugin_name

    why = check_plugin_name(spec.rsplit(":", 1)[-1])
    if why:
        raise PluginError(f"model {ascii(spec)[1:-1][:80]}: {why}", param="model_plugin")


def resolve_model(spec: str) -> type:
    """The layer class of ``NAME`` (an entry point), ``path/file.py:NAME`` or ``pkg.mod:NAME``.

    Raises
    ------
    PluginError
        Unknown, broken or ambiguous models.
    """
    check_spec_name(spec)
    head, _, name = spec.partition(":")
    if head.endswith(".py"):
        module = specs.load_file(Path(head), "model", "sketchsim_model", PluginError)
    elif name:
        module = specs.import_module(head, "model", PluginError)
    else:
        found = [d for d in discover_models() if d.name == head]
        ok = [d for d in found if d.value is not None]
        if ok:
            return _remember(ok[0].value.layer, spec)
        if found:
            raise PluginError(f"model {head} ({found[0].source}): {found[0].error}")
        raise PluginError(
            f"unknown model {head!r}: no entry point in {ENTRY_POINT_GROUP}", param="model_plugin"
        )
    if not name:
        raise PluginError(f"model spec {spec!r} needs a name: path/to/file.py:NAME")
    found = specs.pick(specs.instances_in(module, ModelType), name, head, "model", PluginError)
    return _remember(found.layer, spec)
