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

The suite trains any such layer (``sweep --suite capacity --model-plugin
SPEC``); it writes a weights file when the layer's ``feature_map`` is one the
engine computes and it has ``head_arrays`` (a layer that computes something
else trains and reports its accuracy, without a weights file).  Subclassing
``KernelLayer`` gives all of it: docs/capacity.md has an example (query and
key features tied).

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

__all__ = ["ENTRY_POINT_GROUP", "ModelType", "discover_models", "resolve_model", "plugin_label"]

ENTRY_POINT_GROUP = "sketchsim.models"
_METHODS = ("contributions", "read")


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
        missing = [m for m in _METHODS if not callable(getattr(self.layer, m, None))]
        if missing:
            raise PluginError(f"model {self.name}: its layer lacks {', '.join(missing)}")


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


def resolve_model(spec: str) -> type:
    """The layer class of ``NAME`` (an entry point), ``path/file.py:NAME`` or ``pkg.mod:NAME``.

    Raises
    ------
    PluginError
        Unknown, broken or ambiguous models.
    """
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
