"""What a sketch protocol declares.

A :class:`Protocol` has a name, a one-line description, typed parameters and a
``setup(ctx, params)`` that returns a :class:`Plan`: the layers (channel, symbols
per speaker, alphabet, speakers), the state size, and three functions (a
fourth, ``init``, is optional)

- ``emit(layer, pos, bits, ctx, state, aux, out)``: write the ``k`` symbols of
  token ``pos`` into ``out[:k]``;
- ``update(layer, pos, bits, ctx, state, sketch, aux)``: update ``state`` in
  place from the layer's sketch;
- ``answer(pos, bits, ctx, state, aux) -> int``: the answer at query ``pos``;
- ``init(pos, bits, ctx, state, aux)``: token ``pos``'s starting state from its
  own input (without it every state starts at zero).

``bits`` are the token's private input as uint64 words (see :mod:`sketchsim.minip.bits`),
``ctx`` is the int64 array ``[q, s, m, n_tokens]``, ``state`` an int64 array of
the declared size, ``aux`` a float64 array the plan provides.  When all the
functions are numba-jitted the engine is jitted; otherwise it runs in Python.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sketchsim import config
from sketchsim.errors import PluginError, SketchsimError
from sketchsim.sketch.channels import CHANNELS
from sketchsim.sketch.specs import parse_int

__all__ = ["Param", "Layer", "Plan", "Context", "Protocol"]

_TYPES = {"int": int, "float": float, "str": str, "bool": bool, "path": str}


def _is_int(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool | np.bool_)


@dataclass(frozen=True)
class Param:
    """A typed protocol parameter.

    Parameters
    ----------
    name : str
    type : {"int", "float", "str", "bool", "path"}
        ``path`` is a string naming a file the plug-in reads (a weights file):
        its bytes' hash is part of the resolved protocol's identity, so a result
        resumed after the file changed is measured again, and no command writes
        an output over it.
    default : Any
    help : str
    choices : tuple, optional
        Allowed values (for ``str``).
    minimum : number, optional
        Smallest allowed value (for ``int`` and ``float``).
    maximum : number, optional
        Largest allowed value (for ``int`` and ``float``).
    """

    name: str
    type: str
    default: Any
    help: str = ""
    choices: tuple = ()
    minimum: float | None = None
    maximum: float | None = None

    def __post_init__(self):
        if self.type not in _TYPES:
            raise PluginError(f"parameter {self.name}: unknown type {self.type!r}")
        if not _has_type(self.default, self.type):
            raise PluginError(
                f"parameter {self.name}: default {self.default!r} is not of type {self.type}"
            )
        if self.minimum is not None and self.default < self.minimum:
            raise PluginError(
                f"parameter {self.name}: default {self.default} is below its minimum {self.minimum}"
            )
        if self.maximum is not None and self.default > self.maximum:
            raise PluginError(
                f"parameter {self.name}: default {self.default} is above its maximum {self.maximum}"
            )

    def range_text(self) -> str:
        """The allowed values in words: ``"1..62"``, ``">= 1"``, ``"one of a, b"``, ``""``."""
        if self.choices:
            return "one of " + ", ".join(map(str, self.choices))
        lo, hi = (None if x is None else _bound_text(x) for x in (self.minimum, self.maximum))
        if lo is not None and hi is not None:
            return f"{lo}..{hi}"
        if lo is not None:
            return f">= {lo}"
        return f"<= {hi}" if hi is not None else ""

    def describe(self) -> str:
        kind = "|".join(map(str, self.choices)) if self.choices else self.type
        return f"{self.name} ({kind}, default {self.default})"

    def parse(self, text: str, owner: str, error: type[SketchsimError] = PluginError):
        """Convert ``text`` to this parameter's type, or raise ``error``.

        ``owner`` names the plug-in in messages: ``"protocol NAME"``, ``"family NAME"``.
        """
        try:
            if self.type == "bool":
                low = text.lower()
                if low not in ("1", "0", "true", "false", "yes", "no"):
                    raise ValueError(text)
                value = low in ("1", "true", "yes")
            elif self.type == "int":
                value = parse_int(text)
            else:
                value = _TYPES[self.type](text)
        except (ValueError, OverflowError):
            raise error(
                f"{owner}: parameter {self.name} expects {self.type}, got {text!r}"
            ) from None
        self.check(value, owner, error)
        return value

    def check(self, value, owner: str, error: type[SketchsimError] = PluginError) -> None:
        """Raise ``error`` when ``value`` is outside the declared choices, minimum or maximum."""
        if self.choices and value not in self.choices:
            raise error(
                f"{owner}: {self.name} must be one of "
                f"{', '.join(map(str, self.choices))}, got {value!r}"
            )
        if self.minimum is not None and value < self.minimum:
            raise error(f"{owner}: {self.name} must be >= {self.minimum}, got {value}")
        if self.maximum is not None and value > self.maximum:
            raise error(f"{owner}: {self.name} must be <= {self.maximum}, got {value}")


def _bound_text(x) -> str:
    """A minimum or maximum as written: ``1``, ``65536``, ``0.5``."""
    return str(int(x)) if _is_int(x) or float(x).is_integer() else str(x)


def _has_type(value, kind: str) -> bool:
    """Whether ``value`` is a valid value of a parameter of type ``kind``."""
    if kind == "int":
        return _is_int(value)
    if kind == "float":
        return isinstance(value, numbers.Real) and not isinstance(value, bool | np.bool_)
    if kind == "bool":
        return isinstance(value, bool | np.bool_)
    return isinstance(value, str)


def resolve_params(params, given: dict[str, str], owner: str, error: type[SketchsimError]) -> dict:
    """Defaults of ``params`` overridden by the parsed ``name=value`` strings ``given``.

    ``owner`` (``"protocol NAME"``, ``"family NAME"``) and ``error`` word the failures.
    """
    by_name = {p.name: p for p in params}
    values = {p.name: p.default for p in params}
    for key, text in given.items():
        if key not in by_name:
            accepted = ", ".join(p.describe() for p in params) or "none"
            raise error(f"{owner} has no parameter {key!r}; accepted: {accepted}")
        values[key] = by_name[key].parse(text, owner, error)
    return values


@dataclass(frozen=True)
class Layer:
    """One layer: every speaker emits ``symbols`` symbols from ``{0..alphabet-1}``.

    ``speakers`` is ``"all"``, ``"last"`` (the final token) or a tuple of
    0-based positions; ``levels`` (``sum`` only) declares a saturating register
    with that many values per entry.
    """

    channel: str
    symbols: int
    alphabet: int
    speakers: str | tuple = "all"
    levels: int = 0

    def __post_init__(self):
        for what in ("symbols", "alphabet", "levels"):
            value = getattr(self, what)
            if not _is_int(value):
                raise PluginError(f"a layer's {what} must be an integer, got {value!r}")
        if not isinstance(self.channel, str) or self.channel not in CHANNELS:
            raise PluginError(f"unknown channel {self.channel!r}; use one of {', '.join(CHANNELS)}")
        if self.symbols < 0 or self.alphabet < 1:
            raise PluginError(
                f"a layer needs symbols >= 0 and alphabet >= 1, got {self.symbols}, {self.alphabet}"
            )
        if self.levels and (self.channel != "sum" or self.levels < 1):
            raise PluginError("levels is a positive register size, for sum channels only")

    def speaker_positions(self, n_tokens: int) -> tuple[int, ...]:
        if self.speakers == "all":
            return tuple(range(n_tokens))
        if self.speakers == "last":
            return (n_tokens - 1,)
        if isinstance(self.speakers, str) or not all(_is_int(p) for p in _iterable(self.speakers)):
            raise PluginError(
                f"speakers must be 'all', 'last' or a tuple of positions, got {self.speakers!r}"
            )
        pos = tuple(int(p) for p in self.speakers)
        if any(not 0 <= p < n_tokens for p in pos) or len(set(pos)) != len(pos):
            raise PluginError(f"speakers {pos} are not distinct positions in 0..{n_tokens - 1}")
        return tuple(sorted(pos))


def _iterable(value) -> tuple:
    try:
        return tuple(value)
    except TypeError:
        return (None,)


@dataclass(frozen=True)
class Context:
    """What a protocol may know about the family: F(q, s) has m bits and q + 1 tokens."""

    q: int
    s: int
    m: int
    n_tokens: int

    def array(self) -> np.ndarray:
        return np.array([self.q, self.s, self.m, self.n_tokens], dtype=np.int64)


@dataclass
class Plan:
    """A protocol instantiated for one family: layers, state size, functions, aux data."""

    layers: list[Layer]
    state_size: int
    emit: Callable
    update: Callable
    answer: Callable
    aux: np.ndarray = field(default_factory=lambda: np.zeros(1))
    #: Optional ``init(pos, bits, ctx, state, aux)``: a token's starting state, computed
    #: from its own input before any layer (``state`` starts at zero; None: zero).  The
    #: engine runs it once per batch for the tokens every input shares.
    init: Callable | None = None
    builtin: bool = field(default=False, repr=False)
    #: sketchsim's own causal models only (:mod:`sketchsim.sketch.causal`):
    #: ``runner(tokens, store) -> (fingerprints, answers, transcripts or None)`` computes
    #: every input in place of the engine loop (its ``state`` layer passes the state from
    #: token to token); the functions above are then never called.
    runner: Callable | None = field(default=None, repr=False)

    def functions(self) -> tuple:
        """``(emit, update, answer)``, then ``init`` when the plan has one."""
        funcs = (self.emit, self.update, self.answer)
        return funcs if self.init is None else (*funcs, self.init)

    @property
    def jitted(self) -> bool:
        from numba.core.registry import CPUDispatcher

        return all(isinstance(f, CPUDispatcher) for f in self.functions())


@dataclass(frozen=True)
class Protocol:
    """A sketch protocol plug-in (see the module docstring and docs/protocols.md)."""

    name: str
    description: str
    setup: Callable[[Context, dict], Plan]
    params: tuple[Param, ...] = ()
    #: Families (by name) the protocol runs on; ``transcript`` refuses the others.
    families: tuple[str, ...] = ("hard",)
    #: Integer parameters in which correctness is monotone non-decreasing
    #: (``frontier`` bisects these and scans the others).
    monotone: tuple[str, ...] = ()
    #: Set by :mod:`sketchsim.sketch.plugins` on the protocols shipped with sketchsim (tested by
    #: its suite): their jitted functions skip the bounds-checked first pass.
    builtin: bool = field(default=False, compare=False, repr=False)
    #: Optional ``preflight(params, family)``: called before any work with the resolved
    #: parameters and the run's family; it raises :class:`~sketchsim.errors.PluginError`
    #: to refuse the run in one line (``trained`` refuses a weights file trained on
    #: another family).  Its return value is ignored.
    preflight: Callable[[dict, Any], None] | None = None

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name.strip():
            raise PluginError(f"a protocol's name must be a non-empty string, got {self.name!r}")
        if self.preflight is not None and not callable(self.preflight):
            raise PluginError(
                f"protocol {self.name}: preflight must be a function (params, family), "
                f"got {self.preflight!r:.60}"
            )
        for what, kinds, word in (
            ("params", Param, "Param objects"),
            ("families", str, "names"),
            ("monotone", str, "names"),
        ):
            value = getattr(self, what)
            if isinstance(value, str) or not isinstance(value, tuple | list):
                raise PluginError(
                    f"protocol {self.name}: {what} must be a tuple of {word}, got {value!r:.60}"
                )
            bad = [v for v in value if not isinstance(v, kinds)]
            if bad:
                raise PluginError(
                    f"protocol {self.name}: {what} must be {word}, got {bad[0]!r:.60}"
                )
            object.__setattr__(self, what, tuple(value))  # frozen: store the tuple once
        names = [p.name for p in self.params]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise PluginError(f"protocol {self.name} declares parameter {twice[0]!r} twice")

    def defaults(self) -> dict:
        return {p.name: p.default for p in self.params}

    def resolve(self, given: dict[str, str]) -> dict:
        """Parse ``name=value`` strings against the declared parameters."""
        return resolve_params(self.params, given, f"protocol {self.name}", PluginError)

    def check_run(self, params: dict, family) -> None:
        """Run the protocol's ``preflight`` on ``params`` and ``family``, if it has one.

        Raises
        ------
        PluginError
            One line naming the protocol when ``preflight`` refuses the run or fails.
        """
        if self.preflight is None:
            return
        try:
            self.preflight(params, family)
        except PluginError as exc:
            raise PluginError(_named(self.name, str(exc)), param=exc.param) from None
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # a plug-in bug: one line naming it
            raise PluginError(
                f"protocol {self.name}: preflight failed: {type(exc).__name__}: {exc}"
            ) from None

    def plan(self, ctx: Context, params: dict) -> Plan:
        """Run ``setup`` and check the plan it returns (types, sizes; see docs/protocols.md).

        Raises
        ------
        PluginError
            One line naming the protocol when ``setup`` fails or its plan is malformed.
        """
        try:
            plan = self.setup(ctx, params)
        except PluginError as exc:
            raise PluginError(_named(self.name, str(exc))) from None
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # a plug-in bug (SystemExit too): one line naming it
            raise PluginError(
                f"protocol {self.name}: setup failed: {type(exc).__name__}: {exc}"
            ) from None
        if not isinstance(plan, Plan):
            raise PluginError(
                f"protocol {self.name}: setup must return a Plan, got {type(plan).__name__}"
            )
        _check_plan(plan, self.name)
        if (plan.runner is not None or any(L.channel == "state" for L in plan.layers)) and not (
            self.builtin and plan.runner is not None
        ):
            raise PluginError(
                f"protocol {self.name}: the state channel and Plan.runner are for sketchsim's "
                "own causal models (see docs/protocols.md)"
            )
        plan.builtin = self.builtin
        return plan


def _named(name: str, message: str) -> str:
    return message if message.startswith(f"protocol {name}") else f"protocol {name}: {message}"


def _check_plan(plan: Plan, name: str) -> None:
    """Types of every Plan field; ``aux`` becomes a finite float64 vector (in place)."""
    if not isinstance(plan.layers, list | tuple) or not all(
        isinstance(L, Layer) for L in plan.layers
    ):
        raise PluginError(f"protocol {name}: Plan.layers must be a list of Layer")
    if len(plan.layers) > config.PLAN_MAX_LAYERS:
        raise PluginError(
            f"protocol {name}: its plan has {len(plan.layers):,} layers, above the limit "
            f"{config.PLAN_MAX_LAYERS:,} (each layer is one pass over every token of every input)"
        )
    if not _is_int(plan.state_size) or plan.state_size < 1:
        raise PluginError(
            f"protocol {name}: Plan.state_size must be an integer >= 1, got {plan.state_size!r}"
        )
    for what in ("emit", "update", "answer"):
        if not callable(getattr(plan, what)):
            raise PluginError(f"protocol {name}: Plan.{what} must be a function")
    if plan.init is not None and not callable(plan.init):
        raise PluginError(f"protocol {name}: Plan.init must be a function or None")
    try:
        aux = np.ascontiguousarray(plan.aux, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise PluginError(
            f"protocol {name}: Plan.aux must be numbers (a float64 array), got {plan.aux!r:.60}"
        ) from None
    if not np.isfinite(aux).all():
        raise PluginError(f"protocol {name}: Plan.aux has a non-finite value")
    plan.aux = aux if aux.size else np.zeros(1)
