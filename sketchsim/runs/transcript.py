"""The main job as a library run: protocols on one family, each measured once, resumable.

``run(TranscriptPlan(...), resume=PATH, cluster="local:2")`` measures every
protocol of the plan on the family, here or sharded over a Dask cluster (the
same report either way), writing the result file after each protocol.  The
run object computes what the table shows (:meth:`TranscriptRun.verdicts`: each
protocol's verdicts, its entropy ratio and interval; the inputs run, the
collision check's reach), so that the CLI only formats them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field

from sketchsim import config
from sketchsim.checkpoint import Checkpoint, unit_key
from sketchsim.errors import SketchsimError
from sketchsim.runs.clusters import cluster_threads, describe, open_cluster
from sketchsim.units import run_units

__all__ = [
    "TranscriptPlan",
    "TranscriptRun",
    "ProtocolVerdicts",
    "entropy_halfwidth",
    "run",
    "limit_hint",
]


@dataclass(frozen=True)
class TranscriptPlan:
    """What ``sketchsim transcript`` measures.

    Parameters
    ----------
    q, s : int
        ``q`` independent answers in ``0..s``; the bound is ``q log2(s+1)`` bits.
    protocols : str or sequence of str
        Protocol specs (a single string is one spec); empty: the family's default set.
    family : str
        Family spec (``hard`` is F(q, s)).
    samples : int
        Inputs drawn in sampled mode.
    exhaustive : bool, optional
        Enumerate all ``(s+1)^q`` inputs; default when there are at most 2^20.
    seed : int
        Bit layout and sampling.
    """

    q: int = 64
    s: int = 7
    protocols: str | Sequence[str] = ()
    family: str = "hard"
    samples: int = 100_000
    exhaustive: bool | None = None
    seed: int = 0

    def __post_init__(self):
        specs = self.protocols  # one spec string is one protocol, not one per character
        object.__setattr__(self, "protocols", (specs,) if isinstance(specs, str) else tuple(specs))

    def params(self, specs) -> dict:
        """The parameters recorded in the result file."""
        return {
            "q": self.q,
            "s": self.s,
            "samples": self.samples,
            "seed": self.seed,
            "family": self.family,
            "protocols": list(specs),
        }


@dataclass
class TranscriptRun:
    """Protocols measured on one family: the family, the input mode and one entry each.

    ``entries`` are the JSON ``protocols`` entries (report fields plus the
    protocol's and the family's identity); ``reports`` the report objects of
    the protocols measured in this run (resumed ones have only their entry).
    """

    family: object
    mode: str
    inputs: int
    header: dict = field(default_factory=dict)
    entries: list = field(default_factory=list)
    reports: list = field(default_factory=list)
    extra: dict = field(default_factory=dict)
    resumed: list = field(default_factory=list)

    def to_dict(self) -> dict:
        """JSON-ready: the header, the mode and every protocol's entry."""
        return {**self.header, "protocols": self.entries, **self.extra}

    @property
    def bound_bits(self) -> float:
        """The family's bound in bits (``q log2(s+1)`` on F(q, s))."""
        return self.family.bound_bits

    @property
    def exact(self) -> bool:
        """Every input of the family was run (exhaustive mode): the verdicts are proofs."""
        return self.mode == "exhaustive"

    @property
    def inputs_run(self) -> int:
        """Inputs each protocol was run on (the most over the entries; 0 without any)."""
        return max((int(r.get("inputs", 0)) for r in self.entries), default=0)

    @property
    def confidence(self) -> float:
        """Confidence of the entry entropy's interval (``config.ENTROPY_CONFIDENCE``)."""
        return config.ENTROPY_CONFIDENCE

    @property
    def collision_reach(self) -> float | None:
        """The per-pair collision probability the sample's collision check detects
        (:func:`sketchsim.sketch.verdicts.collision_power` of :attr:`inputs_run`)."""
        from sketchsim.sketch.verdicts import collision_power

        return collision_power(self.inputs_run)

    def verdicts(self) -> list[ProtocolVerdicts]:
        """Every entry's verdicts and statistics, in the order the protocols were given."""
        return [ProtocolVerdicts.of(r, self.bound_bits, self.exact) for r in self.entries]


def entropy_halfwidth(entry: dict) -> float | None:
    """Half the width of an entry's (or a layer's) entry-entropy interval.

    Parameters
    ----------
    entry : dict
        A protocol entry or one of its ``layers``.

    Returns
    -------
    float or None
        None without an interval, or when the interval is a point (exhaustive mode).
    """
    ci = entry.get("entry_entropy_ci")
    if not ci or ci[0] == ci[1]:
        return None
    return (ci[1] - ci[0]) / 2


@dataclass(frozen=True)
class ProtocolVerdicts:
    """What the table and the notes under it say of one protocol entry.

    Attributes
    ----------
    name : str
        The spec as given, else the protocol's name.
    entry : dict
        The JSON ``protocols`` entry the rest is computed from.
    jit : bool
        Measured by the compiled engine (else the pure-Python one).
    correct : bool
        Right on every input run (``correct_fraction`` is 1).
    decodable : bool or None
        Proved (True), refuted (False) or neither (None); ``decodable_reason`` says why.
    decodable_reason : str
    entropy_halfwidth : float or None
        Half the entry entropy's interval (:func:`entropy_halfwidth`).
    entropy_ratio : float or None
        Entry entropy / bound; None without an entry entropy or a bound.
    entropy_verdict : {"below", "under", "over"} or None
        ``"below"``: the entropy argument refutes the protocol (the entry's
        ``entry_entropy_below_bound``); ``"under"``: a ratio under 1 without
        that flag, an undersampled estimate biased low (no verdict);
        ``"over"``: at or above the bound; None without an entry entropy or a bound.
    entropy_upper : float or None
        In sampled mode, the upper end of the entry entropy's interval (what the
        entropy argument compares with the bound).
    refuted_otherwise : bool
        Not decodable, neither by a verified collision nor by the entropy
        argument (``decodable_reason`` names how).
    decodable_not_decoded : bool
        Proved decodable, yet its readout is wrong on some input.
    correct_below_bound : bool
        Correct on every input run with fewer declared bits than the bound
        (exhaustive: a violation of the theorem; sampled: not yet a failure).
    undersampled : int
        In sampled mode, entries taking more than n/10 values (their estimates are unreliable).
    layer_halfwidths : tuple of (float or None)
        :func:`entropy_halfwidth` of each of the entry's ``layers``.
    """

    name: str
    entry: dict
    jit: bool
    correct: bool
    decodable: bool | None
    decodable_reason: str
    entropy_halfwidth: float | None
    entropy_ratio: float | None
    entropy_verdict: str | None
    entropy_upper: float | None
    refuted_otherwise: bool
    decodable_not_decoded: bool
    correct_below_bound: bool
    undersampled: int
    layer_halfwidths: tuple = ()

    @classmethod
    def of(cls, r: dict, bound: float, exact: bool) -> ProtocolVerdicts:
        """The verdicts of entry ``r`` measured against ``bound`` bits (``exact``: exhaustive)."""
        from sketchsim.sketch.verdicts import decodable_verdict

        value, reason = decodable_verdict(r)
        bits = r.get("entry_entropy_bits")
        below = bool(r.get("entry_entropy_below_bound"))
        ratio = bits / bound if bits is not None and bound else None
        if bits is None:
            verdict = None
        elif below:
            verdict = "below"
        elif not bound:
            verdict = None
        else:
            # under 1 without the flag: an undersampled estimate, biased low (no verdict)
            verdict = "under" if bits < bound else "over"
        ci = r.get("entry_entropy_ci") or [None, None]
        correct = r["correct_fraction"] == 1.0
        return cls(
            name=r["spec"] or r["name"],
            entry=r,
            jit=r["engine"] == "jit",
            correct=correct,
            decodable=value,
            decodable_reason=reason,
            entropy_halfwidth=entropy_halfwidth(r) if bits is not None else None,
            entropy_ratio=ratio,
            entropy_verdict=verdict,
            entropy_upper=None if exact else ci[1],
            refuted_otherwise=value is False and not r["collision"] and not below,
            decodable_not_decoded=value is True and bool(r.get("wrong_inputs")),
            correct_below_bound=not r["meets_bound"] and correct,
            undersampled=0 if exact else int(r.get("undersampled_entries") or 0),
            layer_halfwidths=tuple(
                entropy_halfwidth(lay) if "entry_entropy_bits" in lay else None
                for lay in r.get("layers", [])
            ),
        )


# Fields of a resumed protocol entry that the table reads, with their JSON types.
_RESUME_FIELDS = {
    "name": str,
    "params": dict,
    "identity": str,
    "family_identity": str,
    "spec": str,
    "engine": str,
    "declared_bits": float,
    "distinct_transcripts": int,
    "log2_distinct": float,
    "entropy_bits": float,
    "correct_fraction": float,
    "meets_bound": bool,
    "wrong_inputs": int,
    "collision": (dict, None),
    "first_failure": (dict, None),
    # three-valued since issue #33: an older entry's sampled ``true`` is not resumed
    "decodable": (bool, None),
    "decodable_reason": str,
}
_COLLISION_FIELDS = ("inputs", "answers_a", "answers_b", "position", "protocol_answer")
_FAILURE_FIELDS = ("input", "position", "target", "answer")


def _entry_key(entry: dict, _file=None) -> str:
    return unit_key(entry["name"], entry["params"], entry["identity"], entry["family_identity"])


def _entry_problem(entry) -> str | None:
    from sketchsim.results import field_problem

    problem = field_problem(entry, _RESUME_FIELDS)
    if problem:
        return problem
    for key, fields in (("collision", _COLLISION_FIELDS), ("first_failure", _FAILURE_FIELDS)):
        if entry[key] is not None and not all(f in entry[key] for f in fields):
            return f"has a malformed {key!r}"
    return None


def limit_hint(exc) -> str:
    """What to do about an :class:`~sketchsim.sketch.input_plan.InputLimitError`."""
    if exc.kind == "exhaustive":
        return "sample instead: use --samples N (without --exhaustive)"
    return "use fewer --samples, or set SKETCHSIM_MAX_MEMORY_GB to raise the limit"


def run(
    plan: TranscriptPlan,
    resume=None,
    cluster=None,
    progress: Callable[[str, int, int], None] | None = None,
    checkpoint=None,
    log: Callable[[str], None] | None = None,
    on_start: Callable[[TranscriptRun], None] | None = None,
    on_protocol: Callable[[str, dict, bool], None] | None = None,
) -> TranscriptRun:
    """Measure every protocol of ``plan`` on its family.

    Parameters
    ----------
    plan : TranscriptPlan
    resume : path-like, optional
        Result file to resume from and to rewrite after each protocol: entries
        measured there with the same settings, protocol source and family are kept.
    cluster : None, str, ClusterSpec or distributed.Client
        Shard the inputs over a Dask cluster; the reports equal this process's.
    progress : callable, optional
        ``progress(spec, done, total)`` while a protocol is measured.
    checkpoint : path-like, optional
        Rewrite this file after each protocol without resuming from it.
    log : callable, optional
        Receives the cluster's connection and plan, one line each.
    on_start : callable, optional
        Called with the (empty) run once the family and the inputs are known.
    on_protocol : callable, optional
        ``on_protocol(spec, entry, resumed)`` after each protocol.
    """
    from sketchsim.sketch import prewarm
    from sketchsim.sketch.family_plugins import family_identity
    from sketchsim.sketch.input_plan import InputLimitError
    from sketchsim.sketch.inputs import build_family, check_support, resolve_protocols

    say = log or (lambda msg: None)
    family, default_specs = build_family(plan.family, plan.q, plan.s, plan.samples, plan.seed)
    resolved = resolve_protocols(plan.protocols or default_specs)
    check_support(resolved, family)
    fam_id = family_identity(plan.family, family)
    with open_cluster(cluster, log=say) as (client, spec), ExitStack() as stack:
        try:
            if client is None:
                measure_one, mode, n_inputs, units, extra, T = _local(plan, family)
            else:
                measure_one, mode, n_inputs, units, extra = _clustered(
                    plan, family, client, spec, len(resolved), say
                )
                T = None
        except InputLimitError as exc:
            raise SketchsimError(f"{exc}; {limit_hint(exc)}") from None
        header = {
            "q": plan.q,
            "s": plan.s,
            "m": family.m,
            "n_tokens": family.n_tokens,
            "bound_bits": family.bound_bits,
            "mode": mode,
            "inputs": n_inputs,
            "seed": plan.seed,
            "family": family.name,
            "family_params": family.options(),
        }
        store = Checkpoint(
            resume if resume is not None else checkpoint,
            "transcript",
            plan.params(spec for spec, _ in resolved),
            "protocols",
            _entry_key,
            _entry_problem,
            match={k: v for k, v in header.items() if k != "bound_bits"},
            label="protocol entry",
            mismatch="other q/s/seed/mode",
            resume=resume is not None,
        )
        result = TranscriptRun(family, mode, n_inputs, header, extra=extra)
        if on_start is not None:
            on_start(result)
        keys = [unit_key(r.protocol.name, r.params, r.identity, fam_id) for _, r in resolved]
        if T is None:
            helper = prewarm.Prewarm()
        else:  # the engine loops of the protocols to measure, compiled beside this process
            pending = [
                item for item, key in zip(resolved, keys, strict=True) if store.get(key) is None
            ]
            family_args = (plan.family, plan.q, plan.s, plan.samples, plan.seed)
            helper = prewarm.start(family_args, family, pending, T)
        stack.callback(helper.close)
        entries = [store.get(key) for key in keys]  # resumed, or None: to measure
        was_resumed = [old is not None for old in entries]
        reported = 0  # on_protocol has seen the protocols before this index

        def report_up_to(stop: int) -> None:
            nonlocal reported
            for i in range(reported, stop):
                if on_protocol is not None:
                    on_protocol(resolved[i][0], entries[i], was_resumed[i])
            reported = max(reported, stop)

        def measure_unit(i: int):
            spec_text, r = resolved[i]
            report_up_to(i)
            update = None
            if progress is not None:
                progress(spec_text, 0, units)

                def update(done, total):
                    progress(spec_text, done, total)

            helper.wait(spec_text)
            rep, stats = measure_one(spec_text, r, update)
            rep.spec = spec_text
            result.reports.append(rep)
            # identities: the protocol's source and the family's (file hash, module
            # version, token digest), so that resume never reports other code's results
            entry = {**rep.to_dict(), "identity": r.identity, "family_identity": fam_id}
            if stats is not None:
                entry["cluster"] = stats
            return entry

        def finished(i: int, entry: dict) -> None:
            entries[i] = entry
            store.save([e for e in entries if e is not None], False, **header, **extra)
            report_up_to(i + 1)

        # one protocol at a time in this process (with a cluster, each one's inputs shard)
        run_units([(i,) for i in range(len(resolved))], measure_unit,
                  resumed=entries, finished=finished)  # fmt: skip
        report_up_to(len(resolved))
        result.entries.extend(entries)
        result.resumed.extend(t for (t, _), old in zip(resolved, was_resumed, strict=True) if old)
        store.save(result.entries, True, **header, **extra)
    return result


def _local(plan: TranscriptPlan, family):
    from sketchsim.sketch.input_plan import choose_answers
    from sketchsim.sketch.measure import measure

    mode, T = choose_answers(family, plan.exhaustive, plan.samples)

    def measure_one(spec, r, update):
        return measure(family, T, r.protocol, r.params, r.source, progress=update), None

    return measure_one, mode, int(T.shape[0]), int(T.shape[0]), {}, T


def _clustered(plan: TranscriptPlan, family, client, spec, n_protocols: int, say):
    from sketchsim.cluster.sharded_measure import estimate, measure_on_cluster, plan_cluster_inputs
    from sketchsim.estimates import byte_size, duration_words
    from sketchsim.sketch.input_plan import answer_bytes

    mode, n_inputs = plan_cluster_inputs(family, plan.exhaustive, plan.samples)
    workers = cluster_threads(client, spec)
    est = estimate(n_inputs, n_protocols, workers, mode, answer_bytes(family))
    say(
        f"{n_inputs:,} {mode} inputs x {n_protocols} protocols on {workers} worker "
        f"threads: {est['map_tasks']:,} map tasks (about {byte_size(est['map_bytes'])} each), "
        f"{byte_size(est['shuffle_bytes'])} shuffled into {est['partitions']:,} fingerprint "
        f"ranges (about {byte_size(est['reduce_bytes'])} per reduce task) per protocol; nominal "
        f"time {duration_words(est['seconds'])} at {config.TRANSCRIPT_RATE_PER_CORE:,.0f} "
        "inputs/s per worker (protocols differ; the progress shows the measured rate)"
    )
    answers = family.sample_answers(n_inputs) if mode == "sampled" else None

    def measure_one(spec_text, r, update):
        return measure_on_cluster(
            client,
            family,
            plan.family,
            spec_text,
            r,
            mode,
            n_inputs,
            answers=answers,
            workers=workers,
            progress=update,
        )

    extra = {"cluster": {"address": describe(client, spec), "worker_threads": workers}}
    return measure_one, mode, n_inputs, est["map_tasks"] + est["partitions"], extra
