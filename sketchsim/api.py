"""The public Python API: what each command measures, without the terminal.

Every function here runs the command of the same name through the same
library run the CLI calls (:mod:`sketchsim.runs`: a plan, ``resume=``,
``cluster=``, ``progress=``), so both give the same results; the CLI adds
parsing, progress bars and rendering.  :func:`run` takes any plan.  Imported
lazily from :mod:`sketchsim` (``import sketchsim; sketchsim.verify(4, 3)``)::

    import sketchsim

    res = sketchsim.verify(4, 3, "rank1")          # THEORY section 3, all 2^12 inputs
    run = sketchsim.transcript(q=4, s=3)          # protocols on F(4, 3), exhaustively
    cert = sketchsim.certify("w.npz")             # certified feature-rank bound
    cells = sketchsim.run(FrontierPlan(vary="bits=1..8"), cluster="local:2")
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

# the defaults below are the run objects' own (written once there, read by the CLI too)
from sketchsim.runs.ablation import AblationPlan, ScreenMapsPlan, ScreenStopPlan
from sketchsim.runs.bound import BoundPlan
from sketchsim.runs.frontier import FrontierPlan
from sketchsim.runs.minrank import MinrankPlan
from sketchsim.runs.transcript import TranscriptPlan

__all__ = [
    "verify",
    "transcript",
    "frontier",
    "run",
    "bound",
    "minrank",
    "certify",
    "witness",
    "ablation",
    "sweep",
    "audit",
    "reproduce",
    "capacity",
    "info",
    "prove",
    "model_inputs",
]


def verify(
    m: int,
    n: int = 3,
    construction: str | None = None,
    beta: float = 2.0,
    causal: bool = False,
    progress: Callable[[int, int], None] | None = None,
    cluster=None,
    state=None,
    log: Callable[[str], None] | None = None,
    json_path=None,
):
    """Check a THEORY section 3 construction on all ``2^(m n)`` inputs.

    See :func:`sketchsim.runs.verify.run` (``cluster=`` shards the inputs over
    Dask, ``state`` keeps finished shards, ``log`` hears the cluster's plan);
    returns a ``VerifyResult``.  ``construction`` defaults to
    :data:`sketchsim.runs.verify.DEFAULT_CONSTRUCTION`, as ``sketchsim verify``'s does.
    ``json_path`` receives the file ``sketchsim verify --json`` writes.
    """
    from sketchsim.runs.verify import DEFAULT_CONSTRUCTION
    from sketchsim.runs.verify import run as run_verify

    construction = DEFAULT_CONSTRUCTION if construction is None else construction
    return run_verify(
        m, n, construction, beta, causal, progress,
        cluster=cluster, state=state, log=log, json_path=json_path,
    )  # fmt: skip


def transcript(
    q: int = TranscriptPlan.q,
    s: int = TranscriptPlan.s,
    protocols: str | Sequence[str] = (),
    family: str = TranscriptPlan.family,
    samples: int = TranscriptPlan.samples,
    exhaustive: bool | None = None,
    seed: int = TranscriptPlan.seed,
    progress: Callable[[str, int, int], None] | None = None,
    resume=None,
    cluster=None,
    json_path=None,
):
    """Run sketch protocols on a family and measure their transcripts against the bound.

    Parameters
    ----------
    q, s : int
        ``q`` independent answers in ``0..s``; the bound is ``q log2(s+1)`` bits.
    protocols : str or sequence of str
        Protocol specs (``kernel:bits=8``, ``path/file.py:NAME``); a single
        string is one spec; default: the family's default set.
    family : str
        Family spec (``hard`` is F(q, s); ``mqar``; plug-ins).
    samples : int
        Inputs drawn in sampled mode.
    exhaustive : bool, optional
        Enumerate all ``(s+1)^q`` inputs; default when there are at most 2^20.
    seed : int
        Bit layout and sampling.
    progress : callable, optional
        ``progress(spec, done, total)`` after each chunk.
    resume : path-like, optional
        Result file to resume from and rewrite after each protocol.
    cluster : None, str, ClusterSpec or distributed.Client
        Shard the inputs over a Dask cluster (``"local:2"``); the same reports.
    json_path : path-like, optional
        Receives the result file ``sketchsim transcript --json`` writes,
        rewritten after each protocol (without ``resume``, nothing is read from it).

    Returns
    -------
    sketchsim.runs.transcript.TranscriptRun
    """
    from sketchsim.runs.transcript import run as run_plan

    plan = TranscriptPlan(q, s, protocols, family, samples, exhaustive, seed)
    return run_plan(plan, resume=resume, cluster=cluster, progress=progress, checkpoint=json_path)


def frontier(
    protocol: str,
    vary: str,
    q: int,
    s: int,
    family: str = FrontierPlan.family,
    samples: int = FrontierPlan.samples,
    search: str = FrontierPlan.search,
    seed: int = FrontierPlan.seed,
    cluster=None,
    json_path=None,
):
    """The smallest value of a protocol parameter that is correct on F(q, s).

    ``vary`` is ``NAME=LO..HI`` (``bits=1..12``); returns a
    :class:`sketchsim.sketch.frontier.Cell`.  ``cluster`` runs the cell as a
    Dask task (for grids of cells, :func:`run` a
    :class:`~sketchsim.runs.frontier.FrontierPlan`); ``json_path`` receives the
    file ``sketchsim frontier --protocol PROTOCOL --q Q --s S --json`` writes.
    """
    from dataclasses import fields

    from sketchsim.runs.frontier import run as run_plan
    from sketchsim.sketch.frontier import Cell

    plan = FrontierPlan((protocol,), vary, (q,), (s,), family, samples, search, seed)
    (cell,) = run_plan(plan, cluster=cluster, checkpoint=json_path).cells
    return Cell(**{f.name: cell[f.name] for f in fields(Cell)})


def run(plan, resume=None, cluster=None, progress=None, json_path=None):
    """Run a plan of :mod:`sketchsim.runs` and return its result object.

    ``plan`` is a ``TranscriptPlan``, ``FrontierPlan``, ``MinrankPlan`` or
    ``BoundPlan``; ``resume`` a result file to resume from and rewrite after
    every unit (not for bounds); ``cluster`` None, ``"local:N"``,
    ``"tcp://HOST:PORT"`` or a Dask Client; ``progress`` the plan's callback;
    ``json_path`` receives the result file the command's ``--json`` writes
    (rewritten after every unit; nothing is read from it without ``resume``).
    """
    from sketchsim.runs import bound, frontier, minrank
    from sketchsim.runs import transcript as transcript_run

    if isinstance(plan, bound.BoundPlan):
        if resume is not None:
            raise TypeError("a bound run has nothing to resume (its rows take seconds)")
        return bound.run(plan, cluster=cluster, progress=progress, json_path=json_path)
    for module, kind in (
        (transcript_run, "TranscriptPlan"),
        (frontier, "FrontierPlan"),
        (minrank, "MinrankPlan"),
    ):
        if isinstance(plan, getattr(module, kind)):
            return module.run(
                plan, resume=resume, cluster=cluster, progress=progress, checkpoint=json_path
            )
    raise TypeError(f"not a plan sketchsim can run: {type(plan).__name__}")


def bound(m: int, to: int | None = None, step: int = BoundPlan.step, seed: int = BoundPlan.seed,
          cluster=None):  # fmt: skip
    """The best certified rank bound per width ``m..to`` and its growth fit.

    See :class:`sketchsim.runs.bound.BoundPlan`; returns a ``BoundRun``.
    """
    from sketchsim.runs.bound import run as run_plan

    return run_plan(BoundPlan(m, to, step, seed), cluster=cluster)


def minrank(
    widths: Sequence[int] = MinrankPlan.widths,
    seeds: int = MinrankPlan.seeds,
    steps: int = MinrankPlan.steps,
    causal: bool = False,
    train_max_m: int = MinrankPlan.train_max_m,
    out_dir=None,
    resume=None,
    cluster=None,
    progress: Callable[[int, int], None] | None = None,
):
    """Brackets of the smallest feature rank ``r*(m)`` at length 3, one row per width.

    See :class:`sketchsim.runs.minrank.MinrankPlan`; returns a ``MinrankRun``.
    """
    from sketchsim.runs.minrank import run as run_plan

    plan = MinrankPlan(tuple(widths), 3, causal, seeds, steps, train_max_m, out_dir)
    return run_plan(plan, resume=resume, cluster=cluster, progress=progress)


def certify(
    family,
    eps: Sequence[float] | None = None,
    positional: bool = True,
    json_path=None,
    proof_path=None,
):
    """Certified lower bound on the feature rank of any head solving a length-3 family.

    Parameters
    ----------
    family : path-like, Family or PackedFamily
        A :class:`sketchsim.certify.Family`, a
        :class:`sketchsim.certify.packed.PackedFamily` (certified block by
        block) or the path of a family file of either kind.
    eps : sequence of float, optional
        Error levels below 1/2 (default
        :data:`sketchsim.certify.certificate.DEFAULT_EPS`); the limit 1/2 is
        always certified.
    positional : bool
        False certifies only heads whose maps ignore position.
    json_path : path-like, optional
        Receives the result file ``sketchsim certify --json`` writes (the same
        file for the same arguments).
    proof_path : path-like, optional
        Receives the proof at the limit (``sketchsim certify --certificate``).

    Returns
    -------
    sketchsim.certify.Certificate
        See :func:`sketchsim.runs.certify.run` for the run object.
    """
    from sketchsim.runs.certify import CertifyPlan
    from sketchsim.runs.certify import run as run_plan

    plan = CertifyPlan(family, None if eps is None else tuple(eps), not positional)
    return run_plan(plan, json_path=json_path, proof_path=proof_path).certificate


def witness(
    m: int = 24,
    code: str = "hadamard",
    codewords: int = 12,
    out="witness.npz",
    d: int | None = None,
    w: int | None = None,
    complements: bool = False,
    chains: bool = False,
    both_orders: bool = True,
    seed: int = 0,
    packed: bool = False,
    json_path=None,
):
    """Build a length-3 witness family from a code, write it to ``out`` and certify it.

    See :class:`sketchsim.runs.witness.WitnessPlan` for the parameters;
    ``json_path`` receives the result file ``sketchsim witness --json``
    writes.  Returns a :class:`sketchsim.runs.witness.WitnessRun`.
    """
    from sketchsim.runs.witness import WitnessPlan
    from sketchsim.runs.witness import run as run_plan

    plan = WitnessPlan(
        m, code, codewords, d, w, complements, chains, both_orders, seed, packed, out
    )
    return run_plan(plan, json_path=json_path)


def ablation(
    seeds: int = AblationPlan.seeds,
    steps: int = AblationPlan.steps,
    triples: int = AblationPlan.triples,
    screen_maps: str | None = None,
    ranks: Sequence[int] = ScreenMapsPlan.ranks,
    screen_stop: Sequence[float] | None = None,
    scales: str = ScreenStopPlan.scales,
    lr: float = ScreenMapsPlan.lr,
    json_path=None,
    progress: Callable[[dict], None] | None = None,
    kernel_rank: int = ScreenStopPlan.kernel_rank,
):
    """The softmax ablation on the witness family, or one of its validation screens.

    Needs the torch extra; trains on one torch thread (as ``sketchsim ablation``).

    Parameters
    ----------
    seeds, steps : int
        Seeds per variant and training steps per head.
    triples : int
        Without a screen: random triples of the random-triple variants.
    screen_maps : str, optional
        ``M:POOL:TRIPLES``: compare the nonnegative feature maps at ``ranks``
        on that scale's validation split.
    screen_stop : sequence of float, optional
        Stop margins to screen on the validation splits of ``scales``; the ``elu1``
        head of rank ``kernel_rank`` is screened beside softmax (0: softmax alone).
    lr : float
        Learning rate of the screens.
    json_path : path-like, optional
        Receives the result file ``sketchsim ablation --json`` writes (the
        same file for the same arguments).
    progress : callable, optional
        Screens: ``progress(row)`` after each trained head.

    Returns
    -------
    AblationRun, ScreenMapsRun or ScreenStopRun
        See :mod:`sketchsim.runs.ablation`.
    """
    from sketchsim.runs.ablation import run as run_plan

    if screen_maps is not None and screen_stop is not None:
        raise ValueError("screen_maps and screen_stop are two runs; give one")
    if screen_maps is not None:
        plan = ScreenMapsPlan(screen_maps, tuple(ranks), seeds, steps, lr)
    elif screen_stop is not None:
        plan = ScreenStopPlan(tuple(screen_stop), scales, seeds, steps, lr, kernel_rank)
    else:
        plan = AblationPlan(seeds, steps, triples)
    return run_plan(plan, json_path=json_path, progress=progress)


def sweep(
    plan=None,
    path=None,
    resume: bool = False,
    device: str = "auto",
    family=None,
    client=None,
    progress: Callable[[int, int], None] | None = None,
    save_weights=None,
    cluster=None,
):
    """Train the heads of a plan (default: reproduce's OOD plan) and summarize them.

    Parameters
    ----------
    plan : SuitePlan or str, optional
        A :class:`sketchsim.experiments.plan.SuitePlan`, or a suite name for its
        default plan (``"witness"``, ``"ood"``).
    path : path-like, optional
        Sweep file written after every run (and resumed from with ``resume``).
    device : {"auto", "cpu", "cuda"}
    family : Family, optional
        Witness suite: train on this family instead of the plan's.
    client : distributed.Client, optional
        Run the training runs as Dask tasks.
    cluster : None, str or ClusterSpec, optional
        The same on a cluster opened (and closed) here: ``"local:2"``, ``"tcp://..."``.
    progress : callable, optional
        ``progress(done, total)`` after each run.
    save_weights : path-like, optional
        Keep every head trained (not resumed) in this folder for :func:`audit`; with
        the capacity suite, every model for :func:`capacity` (on a cluster, the
        workers write them: a folder they share).

    Returns
    -------
    sketchsim.experiments.suite_runs.SweepResult
    """
    from sketchsim.experiments import require_torch

    require_torch()
    from sketchsim.experiments.plan import default_plan
    from sketchsim.experiments.suite_runs import run_plan
    from sketchsim.runs.clusters import open_cluster

    if plan is None or isinstance(plan, str):
        plan = default_plan(plan or "ood")
    with open_cluster(cluster if client is None else client, need_torch=True) as (c, _):
        return run_plan(plan, path, resume, device, family, c, progress, save_weights)


def audit(folder, json_path=None) -> list[dict]:
    """Bit audit of the heads a sweep kept (``save_weights``): accuracy per bits of state.

    See :mod:`sketchsim.experiments.audit` and :func:`sketchsim.runs.audit.run`;
    ``json_path`` receives the file ``sketchsim audit --json`` writes.  Returns
    one row per weights file.
    """
    from sketchsim.runs.audit import run as run_audit

    return run_audit(folder, json_path=json_path).heads


def reproduce(
    out: str | Path = "results",
    quick: bool = True,
    log=print,
    device: str = "auto",
    settings=None,
    client=None,
):
    """Run every experiment into ``out`` and write ``report.md``; returns the table rows.

    See :func:`sketchsim.runs.reproduce.reproduce` (needs the torch extra);
    ``settings`` overrides the sizes of ``quick``, ``client`` is a Dask client.
    """
    from sketchsim.experiments import require_torch

    require_torch()
    from sketchsim.runs.reproduce import reproduce as run

    return run(Path(out), quick, log=log, device=device, settings=settings, client=client)


def capacity(
    folder,
    samples: int = 20_000,
    references: bool = True,
    progress=None,
    cluster=None,
    json_path=None,
    rounding: str = "every",
    prove: float | None = None,
) -> dict:
    """Saved models (``sweep --suite capacity --save-weights``) run as sketches: per file the
    smallest bits per state register decoding every input, its transcript bits and
    ``ratio = transcript_bits / q log2(s+1)``.

    See :mod:`sketchsim.runs.capacity` (no torch needed); returns
    ``{"rows", "summary", "references", "unreadable"}``, ``progress(done, total)``
    in files.  ``cluster`` (``"local:2"``, a ClusterSpec or a Client) measures
    each file as a Dask task; ``json_path`` receives the file ``sketchsim
    capacity --json`` writes; ``rounding``: a causal model's state rounded after every
    token (``every``) or only its transcript, at the ``cut``; ``prove``: seconds per file
    to prove or refute each sampled row at its K (``evidence``: proved or refuted).
    """
    from sketchsim.runs.capacity import capacity_dir
    from sketchsim.runs.clusters import open_cluster

    with open_cluster(cluster) as (client, _spec):
        return capacity_dir(
            folder, samples, references, progress, client, json_path, rounding, prove
        )


def info(json_path=None) -> dict:
    """The facts ``sketchsim info`` prints: versions, CPU kernels, caches, devices.

    ``json_path`` receives the file ``sketchsim info --json`` writes
    (:func:`sketchsim.runs.info.run`).  Imports torch and numba when installed.
    """
    from sketchsim.runs.info import run as run_info

    return run_info(json_path)


def prove(weights, bits: int, rounding: str = "every", budget: float = 60.0, json_path=None,
          proof_path=None, progress=None):  # fmt: skip
    """Prove or refute that a causal weights file answers every input of F(q, s) right.

    Returns :class:`sketchsim.runs.prove.ProveRun` (``verdict``: proved, refuted with
    its ``counterexample``, or unknown with its ``open_boxes``); ``proof_path`` receives
    the proof file ``sketchsim check-proof`` re-verifies (docs/theory.md 5.5).
    """
    from sketchsim.runs.prove import run as run_prove

    return run_prove(weights, bits, rounding, budget, json_path, proof_path, progress)


def model_inputs(weights, answers, bits: int, rounding: str = "every") -> dict:
    """A causal weights file run on chosen inputs: ``answers`` (B, q) answer vectors.

    Returns ``{"answers", "codes", "right"}``: the model's answers (B, q), its cut codes
    (B, L H E: layer, head, entry, docs/theory.md 5.3) and whether each input is answered
    right, computed by the engine every command runs::

        out = sketchsim.model_inputs("w.npz", [[0, 3, 7, 1]], bits=4, rounding="cut")
    """
    import numpy as np

    from sketchsim.errors import SketchsimError
    from sketchsim.sketch.causal import causal_inputs
    from sketchsim.sketch.weights_file import load_weights, weights_family

    w = load_weights(weights)
    if not w.causal:
        raise SketchsimError(f"{weights}: model_inputs runs causal weights files")
    family = weights_family(w)
    T = np.asarray(answers, dtype=np.int64)
    if T.ndim != 2 or T.shape[1] != family.q or T.min() < 0 or T.max() > family.s:
        raise SketchsimError(f"answers must be (B, {family.q}) with values in 0..{family.s}")
    got, codes = causal_inputs(w, family, bits, T, rounding)
    return {"answers": got, "codes": codes, "right": (got == T).all(axis=1)}
