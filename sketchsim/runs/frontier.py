"""The bits frontier as a library run: one cell per (q, s, protocol), resumable, on a cluster.

``run(FrontierPlan(...), resume=PATH, cluster="local:2")`` searches every cell
with :func:`sketchsim.sketch.frontier.frontier_cell`, here or one cell per Dask
task (the same cells either way), writing the result file after each cell.
The run object computes what the table shows (:meth:`FrontierRun.verdicts`
per cell, :meth:`FrontierRun.notes` once for all), so that the CLI only
formats them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from sketchsim.checkpoint import Checkpoint, unit_key
from sketchsim.errors import SketchsimError, printable
from sketchsim.runs.clusters import open_cluster
from sketchsim.units import run_units

__all__ = [
    "FrontierPlan",
    "FrontierRun",
    "CellVerdict",
    "FrontierNotes",
    "run",
    "cell_problem",
]


@dataclass(frozen=True)
class FrontierPlan:
    """What ``sketchsim frontier`` measures: every (q, s) of ``qs x ss`` and every protocol.

    ``vary`` is ``NAME=LO..HI`` (``bits=1..12``); see
    :func:`sketchsim.sketch.frontier.frontier_cell` for the search.
    ``protocols`` is a sequence of protocol specs or a single spec string.
    """

    protocols: str | Sequence[str] = ("kernel",)
    vary: str = "bits=1..16"
    qs: Sequence[int] = (4, 8, 16)
    ss: Sequence[int] = (3, 7)
    family: str = "hard"
    samples: int = 20_000
    search: str = "auto"
    seed: int = 0
    #: Seconds per cell: prove or refute a sampled decoded ``trained`` causal cell at its
    #: value (docs/theory.md 5.5); None: not proved.
    prove: float | None = None

    def __post_init__(self):
        if self.prove is not None and not (math.isfinite(self.prove) and self.prove > 0):
            raise SketchsimError(f"--prove must be > 0 seconds, got {self.prove}", param="prove")
        specs = (self.protocols,) if isinstance(self.protocols, str) else self.protocols
        trained = any(str(p).split(":")[0].strip() == "trained" for p in specs)
        if self.prove is not None and not (trained and self.vary.split("=")[0].strip() == "bits"):
            raise SketchsimError(
                "--prove applies only to trained protocols (causal weights files) "
                "varying bits; this run would ignore it",
                param="prove",
            )
        specs = self.protocols  # one spec string is one protocol, not one per character
        object.__setattr__(self, "protocols", (specs,) if isinstance(specs, str) else tuple(specs))

    def params(self, vary) -> dict:
        """The parameters recorded in the result file (resume needs them equal)."""
        return {
            "protocols": list(self.protocols),
            "vary": str(vary),
            "q": list(self.qs),
            "s": list(self.ss),
            "family": self.family,
            "samples": self.samples,
            "search": self.search,
            "seed": self.seed,
        } | ({"prove": self.prove} if self.prove is not None else {})


@dataclass
class FrontierRun:
    """The cells (JSON ``cells`` entries, in (q, s, protocol) order) and the varied parameter."""

    vary: object
    cells: list = field(default_factory=list)
    resumed: int = 0

    def to_dict(self) -> dict:
        """The measured key of the result file: the cells."""
        return {"cells": self.cells}

    def verdicts(self) -> list[CellVerdict]:
        """Every cell's verdict, in the cells' order."""
        return [CellVerdict.of(c) for c in self.cells]

    def notes(self) -> FrontierNotes:
        """What the verdicts of all cells rest on, once for all cells."""
        from sketchsim.sketch.verdicts import collision_power, error_rate_upper

        cells = self.cells
        sizes = sorted({c["inputs"] for c in cells if c["mode"] != "exhaustive"})
        verdicts = self.verdicts()
        return FrontierNotes(
            proved=any(c["mode"] == "exhaustive" for c in cells),
            sampled=tuple((n, error_rate_upper(0, n), collision_power(n)) for n in sizes),
            missing=any(not c["found"] or not c.get("decodable_found", False) for c in cells),
            not_monotone=any(v.not_monotone for v in verdicts),
            fixed=any(c["search"] == "fixed" for c in cells),
            kinds=frozenset((v.verdict, v.shows) for v in verdicts),
        )


@dataclass(frozen=True)
class CellVerdict:
    """What the table says of one cell.

    Attributes
    ----------
    name : str
        The spec as given, else the protocol's name.
    cell : dict
        The JSON ``cells`` entry.
    verdict : {"none", "proved", "not refuted", "refuted"}
        How strong what the cell shows is: ``"none"``: no value in the range is
        decoded or decodable; ``"proved"``: every input of the family was run, or
        ``prove`` proved the decoded value; ``"not refuted"``: a sample was;
        ``"refuted"``: a sample was decoded and ``prove`` found an input it is wrong on.
    not_monotone : bool
        Scanned, and the verdicts are not monotone in the parameter.
    shows : {"decoded", "decodable", "neither"}
        What the cell shows (proved or not refuted, as ``verdict`` says):
        ``"decoded"``: some value's own readout is right on every input run (its
        transcripts are then decodable too); ``"decodable"``: only that some
        value's transcripts separate the answers (some decoder exists, the
        protocol's readout is wrong at every value); ``"neither"``.
    """

    name: str
    cell: dict
    verdict: str
    not_monotone: bool
    shows: str = "decoded"

    @classmethod
    def of(cls, c: dict) -> CellVerdict:
        """The verdict of cell ``c``."""
        if c["found"]:
            shows = "decoded"
        elif c.get("decodable_found", False):
            shows = "decodable"
        else:
            shows = "neither"
        proof = (c.get("prove") or {}).get("verdict")
        if shows == "neither":
            verdict = "none"
        elif c["mode"] == "exhaustive":
            verdict = "proved"
        elif shows == "decoded" and proof in ("proved", "refuted"):
            verdict = proof  # `prove` decided every input at the decoded value
        else:
            verdict = "not refuted"
        return cls(
            name=c["spec"] or c["protocol"],
            cell=c,
            verdict=verdict,
            not_monotone=c["search"] == "scan" and c["monotone"] is False,
            shows=shows,
        )


@dataclass(frozen=True)
class FrontierNotes:
    """What the verdicts of a frontier's cells rest on.

    Attributes
    ----------
    proved : bool
        Some cell ran every input of its family.
    sampled : tuple of (int, float, float or None)
        ``(inputs, error-rate bound, collision check reach)`` per sample size
        of the sampled cells, smallest first: the one-sided 95% bound on the
        error rate of a value right on every sampled input
        (:func:`~sketchsim.sketch.verdicts.error_rate_upper`) and the per-pair
        collision probability the sample detects
        (:func:`~sketchsim.sketch.verdicts.collision_power`).
    missing : bool
        Some cell found no decoded or no decodable value in the range.
    not_monotone : bool
        Some scanned cell's verdicts are not monotone in the parameter.
    fixed : bool
        Some protocol has no such parameter (measured once).
    kinds : frozenset of (str, str)
        Every ``(verdict, shows)`` of the cells (:class:`CellVerdict`): the notes
        say what each kind of cell proved (decoded, decodable only, neither).
    """

    proved: bool
    sampled: tuple
    missing: bool
    not_monotone: bool
    fixed: bool
    kinds: frozenset = frozenset()


# What the table and the plot read from a resumed cell, with their JSON types.
_CELL_FIELDS = {
    "q": int,
    "s": int,
    "spec": str,
    "protocol": str,
    "identity": str,
    "family_identity": str,
    "value": (int, None),
    "found": bool,
    "mode": str,
    "inputs": int,
    "search": str,
    "monotone": (bool, None),
    "bound_bits": float,
    "declared_bits": (float, None),
    "used_bits": (float, None),
    "entry_entropy_bits": (float, None),
    "declared_ratio": (float, None),
    "evaluated": dict,
    "verdict": str,
    "decodable_found": bool,
    "decodable_value": (int, None),
    "decodable_declared_bits": (float, None),
    "decodable_declared_ratio": (float, None),
    "evaluated_decodable": dict,
    "decodable_reason": str,  # since issue #33 (three-valued verdicts)
}


def cell_problem(c, vary) -> str | None:
    """What is wrong with a resumed cell (types, and its own search record), or None."""
    from sketchsim.results import field_problem

    problem = field_problem(c, _CELL_FIELDS)
    if problem:
        return problem
    if c["mode"] not in ("exhaustive", "sampled") or c["inputs"] < 1:
        return f"has mode {c['mode']!r} over {c['inputs']} inputs"
    if c["search"] not in ("fixed", "bisection", "scan"):
        return f"has an unknown search {c['search']!r}"
    rates = c["evaluated"]
    if not all(isinstance(v, int | float) and 0 <= v <= 1 for v in rates.values()):
        return "has correct fractions outside [0, 1]"
    if c["search"] == "fixed":
        consistent = c["value"] is None and c["found"] == (rates.get("None") == 1)
    else:
        tried = {}
        for key, rate in rates.items():
            try:
                tried[int(key)] = rate
            except ValueError:
                return f"has an evaluated value {key!r} that is not an integer"
        right = sorted(v for v, rate in tried.items() if rate == 1)
        if c["found"]:
            value = c["value"]
            consistent = (
                value is not None
                and vary.lo <= value <= vary.hi
                and right[:1] == [value]
                and (value - 1 in tried or value == min(tried))  # the first correct one
            )
        else:
            consistent = c["value"] is None and not right
    if not consistent:
        return "does not match its own evaluations (value, found, evaluated)"
    if c["found"] != (c["declared_bits"] is not None):
        return "has bits without a correct value, or a correct value without bits"
    carried = c["evaluated_decodable"]  # true (proved), false (refuted), null (not refuted)
    if not all(v is None or isinstance(v, bool) for v in carried.values()) or set(carried) != set(
        rates
    ):
        return "has decodable verdicts that do not match its evaluations"
    value = c["decodable_value"]
    if c["search"] == "fixed":
        consistent = value is None and c["decodable_found"] == (
            carried.get("None", False) is not False
        )
    else:
        consistent = c["decodable_found"] == (value is not None) and (
            value is None or carried.get(str(value), False) is not False
        )
    if not consistent:
        return "does not match its own decodable evaluations"
    return None


def _cell_key(c: dict, _file=None) -> str:
    return unit_key(c["q"], c["s"], c["spec"], c["identity"], c["family_identity"])


def measure_cell(plan: FrontierPlan, q: int, s: int, spec: str, built=None,
                 identity: str | None = None) -> dict:  # fmt: skip
    """One cell as a JSON entry, built from specs alone (so a Dask worker can run it).

    ``built`` is ``(family, family identity)`` when the caller has them already;
    ``identity`` the protocol's as the run resolved it (its files' content included):
    a cell whose spec now resolves to another (a weights file replaced during the run)
    is refused, never measured as another model under the run's key (#60).
    """
    from sketchsim.sketch.family_plugins import family_identity
    from sketchsim.sketch.frontier import frontier_cell, parse_vary
    from sketchsim.sketch.input_plan import InputLimitError
    from sketchsim.sketch.inputs import build_family, check_support, resolve_protocols

    if built is None:
        family = build_family(plan.family, q, s, plan.samples, plan.seed)[0]
        built = family, family_identity(plan.family, family)
    family, fam_id = built
    ((_, r),) = resolve_protocols([spec])
    if identity is not None and r.identity != identity:
        raise SketchsimError(
            f"{printable(spec)[:120]}: a file it reads changed during the run (its protocol "
            "now resolves to other content); run again on files that stay put"
        )
    check_support([(spec, r)], family)
    try:
        cell = frontier_cell(
            family, r.protocol, r.params, parse_vary(plan.vary), spec, r.source,
            plan.samples, plan.search, fixed=True,  # run() checked that some protocol has it
        )  # fmt: skip
    except InputLimitError as exc:
        raise SketchsimError(f"{exc}; use fewer --samples") from None
    # identities: the protocol's source and the family's, so that resume never
    # shows the results of other code under the same spec
    out = cell.to_dict() | {"identity": r.identity, "family_identity": fam_id}
    out["evidence"] = "exhaustive" if out["mode"] == "exhaustive" else "sampled"
    if plan.prove and out["found"] and out["mode"] != "exhaustive":
        out |= prove_cell(r, family, out["param"], out["value"], plan.prove)
    return out


def prove_cell(resolved, family, param: str, value: int, budget: float) -> dict:
    """``prove`` of a sampled decoded cell at its value: ``{"prove", "evidence"}``.

    Covered: the built-in ``trained`` protocol varying ``bits`` on a causal file trained
    on F(q, s), or on MQAR as :mod:`sketchsim.prove.mqar` covers; other cells record
    ``not covered`` and why.
    """
    from sketchsim.runs.capacity import prove_evidence
    from sketchsim.sketch.weights_file import load_weights

    params = resolved.params
    if resolved.protocol.name != "trained" or param != "bits":
        why = "prove covers the trained protocol's causal files, varying bits"
        return {"prove": {"verdict": "not covered", "reason": why}}
    w = load_weights(params["weights"], params.get("sha256") or None)
    return prove_evidence(w, family, value, params.get("rounding", "every"), budget)


def run(
    plan: FrontierPlan,
    resume=None,
    cluster=None,
    progress: Callable[[int, int], None] | None = None,
    checkpoint=None,
    log: Callable[[str], None] | None = None,
) -> FrontierRun:
    """Search every cell of ``plan``.

    Parameters
    ----------
    plan : FrontierPlan
    resume : path-like, optional
        Result file to resume from and rewrite after each cell: cells measured
        there with the same settings, protocol source and family are kept.
    cluster : None, str, ClusterSpec or distributed.Client
        Run the cells as Dask tasks (the same cells as here).
    progress : callable, optional
        ``progress(done, total)`` in cells.
    checkpoint : path-like, optional
        Rewrite this file after each cell without resuming from it.
    log : callable, optional
        Receives one line naming the cluster.
    """
    from sketchsim.sketch.family_plugins import family_identity
    from sketchsim.sketch.frontier import check_vary, parse_vary
    from sketchsim.sketch.inputs import build_family, check_support, resolve_protocols

    vary = parse_vary(plan.vary)
    resolved = resolve_protocols(plan.protocols)
    check_vary(vary, [r.protocol for _, r in resolved])
    grid = [(q, s) for q in plan.qs for s in plan.ss]
    families = {qs: build_family(plan.family, *qs, plan.samples, plan.seed)[0] for qs in grid}
    for family in families.values():
        check_support(resolved, family)
    store = Checkpoint(
        resume if resume is not None else checkpoint,
        "frontier",
        plan.params(vary),
        "cells",
        _cell_key,
        lambda c: cell_problem(c, vary),
        match={"parameters": plan.params(vary)},
        label="cell",
        resume=resume is not None,
    )
    fam_ids = {qs: family_identity(plan.family, families[qs]) for qs in grid}
    units = [(q, s, spec) for q, s in grid for spec, _ in resolved]
    slots = [
        store.get(unit_key(q, s, spec, r.identity, fam_ids[q, s]))
        for q, s in grid
        for spec, r in resolved
    ]
    todo = [i for i, cell in enumerate(slots) if cell is None]
    result = FrontierRun(vary, resumed=len(slots) - len(todo))

    def finished(i: int, cell: dict) -> None:
        slots[i] = cell
        store.save([c for c in slots if c is not None], False)

    identities = dict(resolved)

    def cell_args(i: int, client) -> tuple:
        q, s, spec = units[i]
        ident = identities[spec].identity
        if client is None:  # this process has the family and its identity already
            return plan, q, s, spec, (families[q, s], fam_ids[q, s]), ident
        return plan, q, s, spec, None, ident

    with open_cluster(cluster, log=log) as (client, _spec):
        result.cells = run_units(
            cell_args,
            measure_cell,
            len(units),
            resumed=slots,
            finished=finished,
            client=client,
            progress=progress,
        )
    store.save(result.cells, True)
    return result
