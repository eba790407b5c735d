"""The bits frontier: the smallest parameter value that makes a protocol correct.

For a family size ``(q, s)`` and a protocol with one integer parameter varied
over ``lo..hi``, find the smallest value correct on every input (every input
of the family when ``(s+1)^q`` is small, else every input of a seeded sample)
and report its declared bits, used bits and entry entropy beside the bound
``q log2(s+1)`` (THEORY section 5) and their ratios.

The search gallops then bisects when correctness is declared monotone
non-decreasing in the parameter (``Protocol.monotone``, or the built-in kernel heads' ``bits`` and
``r``) and scans every value otherwise, reporting whether the scanned pattern
was monotone.  A parameter the protocol does not have is refused
(:func:`check_vary` names the protocols' parameters), unless the caller runs
several protocols of which another has it: then this one is measured once
("fixed").  A range with a value the parameter does not allow (below its
minimum, above its maximum, not among its choices) is refused, never clipped
(:func:`check_range`): the range searched is the range the title and the
result file name.

Verdicts are three-valued as in :mod:`sketchsim.sketch.verdicts`: the search
takes the smallest value *not refuted* (no wrong input, resp. no collision and
no entropy refutation, among the inputs run); only an exhaustive cell proves it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from sketchsim.errors import PluginError, SketchsimError
from sketchsim.sketch.family import Family
from sketchsim.sketch.input_plan import choose_answers
from sketchsim.sketch.measure import measure
from sketchsim.sketch.protocol import Protocol
from sketchsim.sketch.report import ProtocolReport

__all__ = [
    "Vary",
    "Cell",
    "parse_vary",
    "check_vary",
    "check_range",
    "is_monotone",
    "frontier_cell",
    "BUILTIN_MONOTONE",
]

#: Parameters of built-in protocols in which correctness is monotone: more bits
#: per register or more registers (``r`` splits the sums) never saturate more.
BUILTIN_MONOTONE = {"kernel": ("bits", "r"), "multihead": ("bits", "r")}

#: Largest range a scan or bisection accepts.
MAX_RANGE = 1 << 20


@dataclass(frozen=True)
class Vary:
    """The varied integer parameter and its inclusive range."""

    name: str
    lo: int
    hi: int

    def __str__(self) -> str:
        return f"{self.name}={self.lo}..{self.hi}"


def parse_vary(text: str) -> Vary:
    """``"bits=1..16"`` to ``Vary("bits", 1, 16)``."""
    m = re.fullmatch(r"\s*([A-Za-z_]\w*)\s*=\s*(-?\d+)\s*\.\.\s*(-?\d+)\s*", text or "")
    if not m:
        raise SketchsimError(f"vary spec {text!r} is not NAME=LO..HI (e.g. bits=1..16)")
    vary = Vary(m.group(1), int(m.group(2)), int(m.group(3)))
    if vary.lo > vary.hi:
        raise SketchsimError(f"vary spec {text!r}: LO must be <= HI")
    if vary.hi - vary.lo + 1 > MAX_RANGE:
        raise SketchsimError(f"vary spec {text!r} has more than {MAX_RANGE} values")
    return vary


def _params_text(protocol: Protocol) -> str:
    names = [p.name for p in protocol.params]
    return f"{protocol.name}: {', '.join(names) if names else 'no parameters'}"


def check_vary(vary: Vary, protocols) -> None:
    """Refuse a varied parameter that none of ``protocols`` has, naming theirs, and a range
    with a value the parameter does not allow (:func:`check_range`).

    Raises
    ------
    SketchsimError
        With ``param="vary"``.
    """
    protocols = list(protocols)
    if any(vary.name in {p.name for p in proto.params} for proto in protocols):
        for proto in protocols:
            check_range(vary, proto)
        return
    have = "; ".join(_params_text(proto) for proto in protocols)
    raise SketchsimError(
        f"vary: no protocol has a parameter {vary.name!r} (parameters of {have})",
        param="vary",
    )


def check_range(vary: Vary, protocol: Protocol) -> None:
    """Refuse ``vary`` when ``protocol``'s parameter of that name is not an integer or does
    not allow every value of the range (its minimum, maximum or choices): the range is
    searched as given, never clipped.  A protocol without the parameter passes.

    Raises
    ------
    PluginError
        With ``param="vary"``, naming the parameter and the values it allows.
    """
    param = {p.name: p for p in protocol.params}.get(vary.name)
    if param is None:
        return
    if param.type != "int":
        raise PluginError(
            f"protocol {protocol.name}: parameter {vary.name} is {param.type}, not int",
            param="vary",
        )
    allowed = set(param.choices)
    outside = [
        v
        for v in (vary.lo, vary.hi)
        if (param.minimum is not None and v < param.minimum)
        or (param.maximum is not None and v > param.maximum)
    ]
    if allowed and not outside:
        outside = [next((v for v in range(vary.lo, vary.hi + 1) if v not in allowed), None)]
        outside = [v for v in outside if v is not None]
    if outside:
        raise PluginError(
            f"protocol {protocol.name}: {vary.name} must be {param.range_text()}; the range "
            f"{vary} holds {outside[0]} (give LO..HI within it)",
            param="vary",
        )


def is_monotone(protocol: Protocol, name: str, source: str = "") -> bool:
    """Whether correctness is declared monotone non-decreasing in parameter ``name``."""
    if name in tuple(getattr(protocol, "monotone", ()) or ()):
        return True
    return source == "built-in" and name in BUILTIN_MONOTONE.get(protocol.name, ())


@dataclass
class Cell:
    """One (q, s, protocol) result of the frontier (a JSON ``cells`` entry).

    Two frontiers per cell: ``value`` is the smallest parameter value whose
    protocol is **decoded** (its own readout right on every input run), and
    ``decodable_value`` the smallest whose transcripts are **decodable** (no two
    inputs with different answers share one: some readout exists).  The first
    measures one decoder, the second what a sketch of that size carries; both
    come with their transcript bits against the bound.  ``verdict`` says
    "correct on every input" only for exhaustive cells (sampled: "correct on n
    sampled inputs (error rate < u at 95%)").

    Sampled, both searches take the smallest value *not refuted* on the
    sample.  ``decodable`` is three-valued: ``True`` when the decodable value is
    proved (exhaustive), ``None`` when it is only not refuted (sampled),
    ``False`` when every value evaluated was refuted; ``decodable_reason`` says
    why, and ``evaluated_decodable`` holds each evaluated value's verdict
    (``true``/``false``/``null`` alike).
    """

    q: int
    s: int
    spec: str
    protocol: str
    family: str
    param: str | None
    value: int | None
    found: bool
    mode: str
    inputs: int
    search: str
    monotone: bool | None
    bound_bits: float
    declared_bits: float | None = None
    used_bits: float | None = None
    entry_entropy_bits: float | None = None
    entry_entropy_ci: list | None = None
    declared_ratio: float | None = None
    used_ratio: float | None = None
    entropy_ratio: float | None = None
    evaluated: dict = field(default_factory=dict)
    seconds: float = 0.0
    verdict: str = ""
    decodable_found: bool = False
    decodable_value: int | None = None
    decodable_declared_bits: float | None = None
    decodable_used_bits: float | None = None
    decodable_entry_entropy_bits: float | None = None
    decodable_declared_ratio: float | None = None
    evaluated_decodable: dict = field(default_factory=dict)
    decodable: bool | None = None
    decodable_reason: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


def _ratio(x: float, bound: float) -> float | None:
    return x / bound if bound > 0 else None


def frontier_cell(
    family: Family,
    protocol: Protocol,
    params: dict,
    vary: Vary,
    spec: str = "",
    source: str = "",
    samples: int = 20_000,
    search: str = "auto",
    progress: Callable[[str], None] | None = None,
    fixed: bool = False,
) -> Cell:
    """The smallest value of ``vary`` for which ``protocol`` is correct on ``family``.

    Parameters
    ----------
    family : Family
    protocol : Protocol
    params : dict
        Resolved parameters; the varied one is overridden.
    vary : Vary
    spec, source : str
        For the report.
    samples : int
        Inputs drawn when the family is too large to enumerate.
    search : {"auto", "bisect", "scan"}
        ``auto``: bisect when the parameter is declared monotone, else scan.
    progress : callable, optional
        Called with a short description before each evaluation.
    fixed : bool
        Measure a protocol without the parameter once (a run of several
        protocols, another of which has it; see :func:`check_vary`); without it
        such a parameter is refused.

    Raises
    ------
    SketchsimError
        The protocol has no parameter ``vary.name`` (and not ``fixed``).
    """
    import time

    start = time.perf_counter()
    mode, T = choose_answers(family, None, samples)
    by_name = {p.name: p for p in protocol.params}
    param = by_name.get(vary.name)
    if param is None and not fixed:
        check_vary(vary, [protocol])
    cache: dict[int | None, ProtocolReport] = {}

    def run(value):
        if value not in cache:
            p = dict(params)
            if value is not None:
                param.check(value, f"protocol {protocol.name}")
                p[vary.name] = value
            if progress is not None:
                progress(f"{spec or protocol.name} q={family.q} s={family.s} {vary.name}={value}")
            cache[value] = measure(family, T, protocol, p)
        return cache[value]

    def ok(value) -> bool:  # no wrong input among those run
        return run(value).decoded is not False

    def decodable(value) -> bool:  # not refuted on the inputs run
        return run(value).decodable is not False

    if param is None:
        how, monotone, best, carried = "fixed", None, None, None
        found, carried_found = ok(None), decodable(None)
    else:
        check_range(vary, protocol)  # the range as given, or refused: never clipped
        lo = vary.lo
        declared = is_monotone(protocol, vary.name, source)
        how, monotone, best = _search(ok, lo, vary.hi, search, declared)
        carried = _search(decodable, lo, vary.hi, search, declared)[2]
        found, carried_found = best is not None, carried is not None
    rep = cache[best] if found else None
    order = sorted(cache, key=lambda x: x or 0)
    cell = Cell(
        q=family.q,
        s=family.s,
        spec=spec,
        protocol=protocol.name,
        family=family.name,
        param=vary.name if param is not None else None,
        value=best,
        found=found,
        mode=mode,
        inputs=int(T.shape[0]),
        search=how,
        monotone=monotone,
        bound_bits=family.bound_bits,
        evaluated={str(v): cache[v].correct_fraction for v in order},
        evaluated_decodable={str(v): cache[v].decodable for v in order},
        decodable_found=carried_found,
        decodable_value=carried,
    )
    if not carried_found:  # every value evaluated refuted; the last one says how
        last = cache[order[-1]]
        cell.decodable = False
        cell.decodable_reason = (
            f"{vary.name}={order[-1]}: {last.decodable_reason}"
            if param is not None
            else last.decodable_reason
        )
    if carried_found:
        dec = cache[carried]
        cell.decodable, cell.decodable_reason = dec.decodable, dec.decodable_reason
        cell.decodable_declared_bits = dec.declared_bits
        cell.decodable_used_bits = dec.used_bits
        cell.decodable_entry_entropy_bits = dec.entry_entropy_bits
        cell.decodable_declared_ratio = _ratio(dec.declared_bits, family.bound_bits)
    if rep is not None:
        cell.declared_bits = rep.declared_bits
        cell.used_bits = rep.used_bits
        cell.entry_entropy_bits = rep.entry_entropy_bits
        cell.entry_entropy_ci = rep.entry_entropy_ci
        cell.declared_ratio = _ratio(rep.declared_bits, family.bound_bits)
        cell.used_ratio = _ratio(rep.used_bits, family.bound_bits)
        cell.entropy_ratio = _ratio(rep.entry_entropy_bits, family.bound_bits)
        cell.verdict = rep.verdict_text()
    cell.seconds = time.perf_counter() - start
    return cell


def _search(ok: Callable[[int], bool], lo: int, hi: int, search: str, declared: bool):
    """``(how, monotone, smallest v in lo..hi with ok(v) or None)``: bisect or scan."""
    if search == "bisect" or (search == "auto" and declared):
        return "bisection", True if declared else None, _bisect(ok, lo, hi)
    pattern = [ok(v) for v in range(lo, hi + 1)]
    first = pattern.index(True) if True in pattern else None
    best = None if first is None else lo + first
    return "scan", first is None or all(pattern[first:]), best


def _bisect(ok: Callable[[int], bool], lo: int, hi: int) -> int | None:
    """Smallest ``v`` in ``lo..hi`` with ``ok(v)``, assuming ``ok`` is monotone.

    Galloping first (``lo, lo+1, lo+3, lo+7, ...``), then bisection between the
    last wrong and the first correct value: about ``2 log2(v - lo)`` evaluations,
    and the large (expensive) parameter values are never run needlessly.
    """
    wrong, step, v = lo - 1, 1, lo
    while not ok(v):
        wrong = v
        if v == hi:
            return None
        v = min(hi, lo + 2 * step - 1)
        step *= 2
    right = v
    while right - wrong > 1:  # invariant: ok(right); wrong is wrong (or below lo)
        mid = (wrong + right) // 2
        if ok(mid):
            right = mid
        else:
            wrong = mid
    return right
