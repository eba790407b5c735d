"""Sweeps over (model, feature rank, seed): rows, summaries, transition points, plots.

Results live in one JSON file rewritten atomically after every run.  Every run
is keyed by everything that determines it (its :class:`RunSpec`, which holds
the model, map, rank, seed, heads and the whole training protocol, plus the
sweep's context: suite data hash and code version); with ``resume`` the runs
of the file whose key matches are reused after validation, the others are run.
With a Dask client every run is one cluster task, and each is written to the
file as it completes (docs/cluster.md).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import numpy as np
import torch

from sketchsim.errors import SketchsimError
from sketchsim.experiments.models import make_head
from sketchsim.experiments.suites import Split
from sketchsim.experiments.train import fit, metrics, pick_device
from sketchsim.minip.token_ids import token_ids
from sketchsim.units import run_units

__all__ = [
    "Run",
    "RunSpec",
    "train_one",
    "train_task",
    "task_resources",
    "run_sweep",
    "save_weights",
    "load_runs",
    "CAPACITY_UNREAD",
    "capacity_header",
]

DTYPES = {"float32": torch.float32, "float64": torch.float64}


@dataclass(frozen=True)
class RunSpec:
    """One training run: what to train, on which data, with which protocol.

    ``train_on`` says where the training inputs come from: ``family`` (the
    witness family itself), ``random`` (random length-3 triples of the family's
    width, evaluated on the family) or ``pool`` (the OOD train pool).
    """

    suite: str
    scale: str
    model: str
    feature_map: str
    rank: int
    seed: int
    heads: int = 1
    steps: int = 2000
    lr: float = 0.01
    loss: str = "mse"
    encoding: str = "pm1"
    eps: float = 1e-6
    dtype: str = "float32"
    train_on: str = "family"
    stop_below: float = 0.5

    def key(self, context: dict | None = None) -> str:
        """Canonical JSON of the spec and the sweep's context (data hash, code version)."""
        return json.dumps({"spec": asdict(self), "context": context or {}}, sort_keys=True)


@dataclass
class Run:
    """A finished run.

    ``sequence_error``, ``position_error`` and ``max_abs_error`` are measured on
    the suite's evaluation set (the witness family; the OOD train split), the
    ``train_*`` fields on what the head was trained on, ``test_*`` on the OOD
    test split.  A non-finite output counts as wrong and makes ``finite`` false.
    """

    spec: dict
    sequence_error: float
    position_error: float
    max_abs_error: float
    train_sequence_error: float
    train_max_abs_error: float
    test_sequence_error: float | None
    test_accuracy: float | None
    trained_on: str
    finite: bool
    steps: int
    seconds: float
    device: str


_RUN_FIELDS = {f.name for f in fields(Run)}
_SPEC_FIELDS = {f.name for f in fields(RunSpec)}


def _tensors(split: Split, device, dtype):
    ids, vocab = token_ids(split.tokens)
    x = torch.tensor(split.tokens, dtype=dtype, device=device)
    t = torch.tensor(split.targets, dtype=dtype, device=device)
    return x, torch.tensor(ids, device=device), t, vocab


def _evaluate(head, split: Split, dev, dtype, ids=None) -> tuple[float, float, float]:
    x, _, t, _ = _tensors(split, dev, dtype)
    with torch.no_grad():
        y = head(x, ids)
    if split.scored is not None:
        y = y[:, split.scored : split.scored + 1]
    return metrics(y, t)


def train_one(
    spec: RunSpec,
    train: Split,
    evaluate: Split | None = None,
    test: Split | None = None,
    device: str = "cpu",
    save_to: str | Path | None = None,
) -> Run:
    """Train one head on ``train``; score it on ``evaluate`` (default: ``train``) and ``test``.

    With ``save_to`` (a folder) the trained head is kept there for
    ``sketchsim audit``: :func:`save_weights` writes its spec, weights, the
    inputs it is judged on and the accuracy reported for it.
    """
    dev = pick_device(device)
    dtype = DTYPES[spec.dtype]
    x, ids, t, vocab = _tensors(train, dev, dtype)
    m = train.tokens.shape[-1]
    head = make_head(
        spec.model,
        m,
        spec.rank,
        spec.feature_map,
        vocab=vocab,
        heads=spec.heads,
        seed=spec.seed,
        eps=spec.eps,
        encoding=spec.encoding,
    ).to(dtype)
    res = fit(
        head,
        x,
        ids,
        t,
        steps=spec.steps,
        lr=spec.lr,
        seed=spec.seed,
        device=str(dev),
        scored=train.scored,
        loss=spec.loss,
        stop_below=spec.stop_below,
    )
    seq, pos, mx = res.sequence_error, res.position_error, res.max_abs_error
    if evaluate is not None:
        seq, pos, mx = _evaluate(head, evaluate, dev, dtype)
    test_seq = test_acc = None
    if test is not None:
        test_seq = _evaluate(head, test, dev, dtype)[0]
        test_acc = 1.0 - test_seq
    finite = all(math.isfinite(v) for v in (mx, res.max_abs_error))
    if save_to is not None:
        judged = test if test is not None else (evaluate if evaluate is not None else train)
        acc = 1.0 - (test_seq if test is not None else seq)
        save_weights(save_to, spec, head, judged, acc, m, vocab)
    return Run(
        asdict(spec),
        seq,
        pos,
        mx,
        res.sequence_error,
        res.max_abs_error,
        test_seq,
        test_acc,
        spec.train_on,
        finite,
        res.steps,
        res.seconds,
        res.device,
    )


def save_weights(
    folder: str | Path, spec: RunSpec, head, judged: Split, accuracy: float, m: int, vocab: int
) -> Path:
    """Keep a trained head for :mod:`sketchsim.experiments.audit` (one ``.pt`` file per run).

    The file holds the spec, the weights (on the CPU), the split the head is
    judged on (tokens, targets, scored position) and the exact-sequence
    accuracy reported for it there; its name is a hash of the spec.
    """
    import hashlib

    from sketchsim.results import atomic_path

    key = hashlib.sha256(spec.key().encode()).hexdigest()[:16]
    path = Path(folder) / f"run-{spec.model}-r{spec.rank}-s{spec.seed}-{key}.pt"
    state = {k: v.detach().cpu() for k, v in head.state_dict().items()}
    payload = {
        "spec": asdict(spec),
        "state_dict": state,
        "tokens": torch.from_numpy(np.ascontiguousarray(judged.tokens)),
        "targets": torch.from_numpy(np.ascontiguousarray(judged.targets)),
        "scored": judged.scored,
        "accuracy": float(accuracy),
        "m": int(m),
        "vocab": int(vocab),
    }
    with atomic_path(path, suffix=".pt") as tmp:
        torch.save(payload, tmp)
    return path


def _run_problem(entry) -> str | None:
    """What is wrong with a resumed run entry (fields and their values), or None."""
    if not isinstance(entry, dict) or not isinstance(entry.get("spec"), dict):
        return "is not an object with a spec"
    missing = _RUN_FIELDS - set(entry)
    if missing:
        return f"lacks {', '.join(sorted(missing))}"
    if set(entry["spec"]) != _SPEC_FIELDS:
        return "has a spec with other fields than this version's"
    try:
        RunSpec(**entry["spec"])
    except TypeError:
        return "has a malformed spec"
    for name in ("sequence_error", "position_error", "train_sequence_error"):
        v = entry[name]
        if not isinstance(v, int | float) or isinstance(v, bool) or not 0 <= v <= 1:
            return f"has {name} = {v!r}, not a rate in [0, 1]"
    for name in ("max_abs_error", "train_max_abs_error"):
        v = entry[name]
        if v is not None and (not isinstance(v, int | float) or isinstance(v, bool) or v < 0):
            return f"has {name} = {v!r}, not an error >= 0 or null"
    for name in ("test_sequence_error", "test_accuracy"):
        v = entry[name]
        if v is not None and (not isinstance(v, int | float) or not 0 <= v <= 1):
            return f"has {name} = {v!r}, not a rate in [0, 1] or null"
    if not isinstance(entry["finite"], bool) or not isinstance(entry["steps"], int):
        return "has finite or steps of the wrong type"
    return None


def _restored(entry: dict) -> dict:
    if entry["max_abs_error"] is None:  # written as null: non-finite output
        return {**entry, "max_abs_error": math.inf, "finite": False}
    return entry


def _run_key(entry: dict, file: dict) -> str:
    """A run's key with the context of the file it was read from (data hash, code version)."""
    return RunSpec(**entry["spec"]).key(file["context"])


def sweep_checkpoint(path, header: dict, context: dict, resume: bool):
    """The :class:`~sketchsim.checkpoint.Checkpoint` of a sweep file.

    A run is resumed only under the same spec *and* context (the suite's data
    hash and the code version): runs of other data are trained again.
    """
    from sketchsim.checkpoint import Checkpoint

    return Checkpoint(
        path,
        "sweep",
        header,
        "runs",
        _run_key,
        _run_problem,
        match={"context": lambda old: isinstance(old, dict)},
        label="run",
        what="sweep file",
        mismatch="no context (data hash, code version)",
        resume=resume,
    )


def load_runs(path: str | Path) -> dict[str, dict]:
    """Finished runs of a sweep file keyed by :meth:`RunSpec.key` with the file's own
    context (data hash, code version); every entry validated.

    Raises
    ------
    SketchsimError
        When the file is not JSON, not a sweep file, or any entry is malformed.
    """
    done = sweep_checkpoint(path, {}, {}, resume=True).done
    return {key: _restored(entry) for key, entry in done.items()}


def run_sweep(
    specs: Iterable[RunSpec],
    data: Callable[[RunSpec], tuple[Split, Split | None, Split | None]],
    path: str | Path | None,
    header: dict,
    device: str = "auto",
    resume: bool = False,
    progress: Callable[[int, int], None] | None = None,
    context: dict | None = None,
    client=None,
    retries: int = 2,
    weights_dir: str | Path | None = None,
) -> list[dict]:
    """Run every spec (reusing finished ones on resume), saving after each run.

    ``data(spec)`` returns ``(train, evaluate, test)`` splits; ``context``
    holds what the specs do not (hash of the suite's data, code version) and is
    part of every run's key.  The file is rewritten atomically after every
    finished run and holds every finished run (resumed ones included), in spec
    order; the last write marks it ``complete``.

    Parameters
    ----------
    client : distributed.Client, optional
        Run on a Dask cluster: one task per run, written to ``path`` as it
        completes (see :func:`sketchsim.cluster.client.connect`).  Each task trains
        with one torch thread, so its numbers are the in-process run's (CPU).
        Runs request the worker resource ``GPU=1`` when ``device`` is not
        ``cpu`` and the cluster's workers advertise GPUs (:func:`task_resources`).
    retries : int
        With ``client``: Dask retries a run whose task failed this many times.
    weights_dir : path, optional
        Keep every head trained here (in-process runs; resumed runs are not
        retrained, so they leave no weights).

    Returns
    -------
    list of dict
        One row per spec, in spec order.
    """
    import sketchsim

    specs = list(specs)
    context = {"sketchsim": sketchsim.__version__, **(context or {})}
    store = sweep_checkpoint(path, header, context, resume=bool(resume and path))
    rows: list[dict | None] = [store.get(spec.key(context)) for spec in specs]
    rows = [None if r is None else _restored(r) for r in rows]

    def save(complete: bool) -> None:
        finished = [r for r in rows if r is not None]
        store.save(finished, complete, header=header, context=context)

    if client is not None and weights_dir is not None:
        raise SketchsimError(
            "save_weights keeps heads trained in this process; run without a cluster",
            param="save_weights",
        )
    shared: dict[int, tuple] = {}

    def run_args(k: int, on) -> tuple:
        splits = data(specs[k])
        if on is None:
            return (specs[k], *splits, device, weights_dir)
        # each distinct split goes to the cluster once, as a task rather than scattered
        # data: a task's result lost with its worker is recomputed, scattered data is lost
        held = []
        for split in splits:
            if split is not None and id(split) not in shared:
                shared[id(split)] = (split, on.submit(_hold, split, pure=False))
            held.append(None if split is None else shared[id(split)][1])
        return (specs[k], *held, device)

    def failed(k: int, exc: Exception):
        spec = specs[k]
        if isinstance(exc, SketchsimError):
            return None
        if type(exc).__name__ == "KilledWorker":
            return SketchsimError(
                f"the run {spec.model} r = {spec.rank}, seed {spec.seed} lost its worker "
                "more often than the scheduler allows (distributed.scheduler.allowed-failures)"
            )
        # scheduler gone, task cancelled, a worker-side error
        return SketchsimError(
            f"the run {spec.model} r = {spec.rank}, seed {spec.seed} failed on the "
            f"cluster: {type(exc).__name__}: {exc}"
        )

    def finished(k: int, row: dict) -> None:
        rows[k] = row
        save(False)  # on disk before the next run is awaited

    run_units(
        run_args,
        _train_row,
        len(specs),
        resumed=rows,
        finished=finished,
        client=client,
        progress=progress,
        task=train_task,
        submit=None
        if client is None
        else {"retries": retries, "resources": task_resources(client, device)},
        failed=failed,
    )
    save(True)
    return rows


def _train_row(spec, train, evaluate, test, device, weights_dir) -> dict:
    """One run in this process, as a JSON row."""
    return asdict(train_one(spec, train, evaluate, test, device, weights_dir))


def train_task(
    spec: RunSpec,
    train: Split,
    evaluate: Split | None,
    test: Split | None,
    device: str,
) -> dict:
    """One run as a cluster task: :func:`train_one` on one torch thread, as a JSON row.

    Dask runs one task per worker thread, so the cluster's parallelism is its
    workers; one torch thread per task also makes a CPU run bit-for-bit the
    in-process run with one thread.
    """
    torch.set_num_threads(1)
    return asdict(train_one(spec, train, evaluate, test, device))


def task_resources(client, device: str) -> dict | None:
    """Worker resources each training requests on ``client``'s cluster.

    ``{"GPU": 1}`` (each training gets a GPU of its own) when ``device`` is not
    ``cpu`` and some worker advertises a ``GPU`` resource (``dask worker
    --resources GPU=1``); otherwise None: the runs go to any worker (on
    ``cuda``, workers without the resource share their GPUs).
    """
    if device == "cpu":
        return None
    workers = client.scheduler_info().get("workers", {}).values()
    if any((w.get("resources") or {}).get("GPU", 0) >= 1 for w in workers):
        return {"GPU": 1}
    return None


def _hold(split: Split) -> Split:
    return split


#: Keys of :meth:`Plan.header` the capacity suite does not read: it trains float32
#: models with the mse loss on +-1 tokens (eps 1e-6) on the family's inputs, its
#: heads per layer are ``heads_grid``, and it has no accuracy threshold (#47).
CAPACITY_UNREAD = ("loss", "eps", "dtype", "encoding", "accuracy", "train_on", "heads")


def capacity_header(plan) -> dict:
    """The capacity suite's sweep-file header: the plan's parameters its runs apply, only.

    ``sweep`` refuses the options behind :data:`CAPACITY_UNREAD` with this suite,
    so every parameter recorded here was applied.
    """
    return {k: v for k, v in plan.header().items() if k not in CAPACITY_UNREAD}
