"""A trained suite's plan run: its run specs and data, the runs, and the summary.

:func:`build_runs` turns a :class:`~sketchsim.experiments.plan.SuitePlan` into run
specs and the data each run trains and is evaluated on (the witness family, or the
OOD scales' pools; :func:`capacity_specs` for the capacity suite);
:func:`run_plan` trains them (resumable, or as Dask tasks) and returns a
:class:`SweepResult` with the per-cell statistics the tables show.
"""

from __future__ import annotations

from dataclasses import dataclass

from sketchsim.errors import SketchsimError
from sketchsim.experiments.plan import SuitePlan, check_sizes, parse_arch
from sketchsim.experiments.stats import interval_transition, scale_trend, with_intervals

__all__ = ["build_runs", "capacity_specs", "run_plan", "SweepResult"]


def _witness_data(plan: SuitePlan, family):
    """``(data, header, bound, context, sizes, scales)`` of the witness suite."""
    from sketchsim.certify import build_witness, certify, load_family
    from sketchsim.certify.codes import hadamard_code
    from sketchsim.experiments.suites import random_triples, witness_split
    from sketchsim.minip.token_ids import token_ids

    if family is None:
        family = (
            load_family(plan.family_path)
            if plan.family_path
            else build_witness(hadamard_code(24), "hadamard", 12)
        )
    if len(family.tokens) == 0:
        raise SketchsimError(f"the family {plan.family_path or ''} has no inputs", param="family")
    bound = certify(family, eps_list=()).certified_rank["0.5"]
    split = witness_split(family)
    header = {
        "family_sha256": family.sha256(),
        "inputs": len(family.tokens),
        "m": family.m,
        "certified_rank": bound,
        "random_triples": plan.triples,
    }
    context = {"family_sha256": family.sha256(), "random_triples": plan.triples}
    randoms: dict = {}

    def data(spec):
        if spec.train_on == "family":
            return split, None, None
        if spec.seed not in randoms:
            randoms[spec.seed] = random_triples(family.m, plan.triples, spec.seed)
        return randoms[spec.seed], split, None

    return data, header, bound, context, [(family.m, token_ids(family.tokens)[1])], [""]


def _ood_data(plan: SuitePlan):
    from sketchsim.experiments.suites import ood_splits, parse_scales

    parsed = parse_scales(plan.scales)
    names = [f"{m}:{p}:{t}" for m, p, t in parsed]
    cache: dict = {}

    def data(spec):
        key = (spec.scale, spec.seed)
        if key not in cache:
            m, p, t = (int(v) for v in spec.scale.split(":"))
            cache[key] = ood_splits(m, p, t, spec.seed)
        return cache[key][0], None, cache[key][1]

    return data, {"scales": names}, None, {}, [(m, 0) for m, _, _ in parsed], names


def build_runs(plan: SuitePlan, family=None):
    """Run specs and data of a plan: ``(specs, data, header, bound, context)``.

    ``data(spec)`` returns the ``(train, evaluate, test)`` splits of a run;
    ``bound`` is the witness family's certified rank (None for OOD);
    ``context`` is part of every run's resume key (the data's hash).
    """
    from sketchsim.experiments.sweep import RunSpec

    plan.validate()
    if plan.suite == "capacity":
        from sketchsim.experiments.sweep import capacity_header

        return capacity_specs(plan), None, capacity_header(plan), None, {}
    if plan.suite == "witness":
        data, header, bound, context, sizes, scales = _witness_data(plan, family)
    else:
        data, header, bound, context, sizes, scales = _ood_data(plan)
    check_sizes(plan, sizes)
    header = {**plan.header(), **header}
    proto = dict(
        loss=plan.loss,
        stop_below=plan.stop_below,
        heads=plan.heads,
        eps=plan.eps,
        dtype=plan.dtype,
        encoding=plan.encoding,
    )
    specs = []
    for scale in scales:
        for model in plan.models:
            steps = plan.steps
            if model == "softmax":
                cells, seeds = [("-", 0)], plan.softmax_seeds
                steps = plan.softmax_steps or plan.steps
            elif model == "signed":
                cells, seeds = [("signed", r) for r in plan.ranks], plan.seeds
            else:
                cells = [(f, r) for f in plan.feature_maps for r in plan.ranks]
                seeds = plan.seeds
            for fmap, r in cells:
                for lr in plan.lrs:
                    for seed in range(seeds):
                        specs.append(
                            RunSpec(
                                plan.suite,
                                scale,
                                model,
                                fmap,
                                r,
                                seed,
                                lr=lr,
                                steps=steps,
                                train_on=plan.source(model),
                                **proto,
                            )
                        )
    return specs, data, header, bound, context


def capacity_specs(plan: SuitePlan) -> list:
    """The capacity suite's runs: every family size, architecture and seed of the plan.

    Kernel models (``kernel`` with each map, ``signed``, each user layer) span
    layers x heads x ranks x value widths; the ``softmax`` reference (accuracy
    only: it has no fixed-size state) spans heads x value widths at the smallest
    layer count.
    """
    from sketchsim.experiments.capacity_suite import TRAIN_INPUTS, CapacitySpec

    kinds = []
    for model in plan.models:
        if model == "kernel":
            kinds += [("kernel", f, "", "", 0) for f in plan.feature_maps]
        elif model == "signed":
            kinds.append(("signed", "signed", "", "", 0))
        elif ("softmax", "-", "", "", 0) not in kinds:
            kinds.append(("softmax", "-", "", "", 0))
    if plan.archs:
        for text in plan.archs:
            kind, window = parse_arch(text)
            if kind == "softmax":
                if ("softmax", "-", "", "", 0) not in kinds:
                    kinds.append(("softmax", "-", "", "", 0))
            elif kind == "linear":
                kinds += [("causal", f, "", kind, 0) for f in plan.feature_maps]
            else:
                from sketchsim.sketch.causal import FIXED_MAPS

                kinds.append(("causal", FIXED_MAPS[kind], "", kind, window))
    for spec in plan.model_plugins:  # a plug-in's own map; a causal one's kind
        from sketchsim.experiments.model_plugins import declared_map, resolve_model

        layer = resolve_model(spec)
        kind = getattr(layer, "kind", None)
        kinds.append(("causal" if kind else "kernel", declared_map(layer), spec, kind or "", 0))
    specs = []
    for fam in plan.families:
        for q in plan.qs:
            for s in plan.ss:
                for model, fmap, plugin, arch, window in kinds:
                    if arch == "window" and not window:  # the whole input
                        from sketchsim.sketch.family_plugins import make_family

                        window = make_family(fam, q, s).context().n_tokens
                    ranks = (0,) if model == "softmax" else plan.ranks
                    seeds = plan.softmax_seeds if model == "softmax" else plan.seeds
                    steps = (plan.softmax_steps or plan.steps) if model == "softmax" else plan.steps
                    # the softmax reference at the smallest depth only (it is not measured)
                    depths = plan.layer_counts[:1] if model == "softmax" else plan.layer_counts
                    bits = 0 if model == "softmax" else plan.train_bits  # no state to train at K
                    for L in depths:
                        for H in plan.head_counts:
                            for r in ranks:
                                for d in plan.value_widths:
                                    for lr in plan.lrs:
                                        for seed in range(seeds):
                                            specs.append(CapacitySpec(
                                                fam, q, s, model, L, H, r, d, fmap, seed,
                                                steps=steps, lr=lr, stop_below=plan.stop_below,
                                                model_plugin=plugin,
                                                train_bits=bits,
                                                arch=arch,
                                                window=window,
                                                schedule=plan.schedule,
                                                train_inputs=plan.train_inputs or TRAIN_INPUTS,
                                                keep=plan.keep,
                                                train_rounding=plan.train_rounding,
                                                qat_from=plan.qat_from if bits else "start",
                                                weight_l1=plan.weight_l1,
                                                train_noise=plan.train_noise
                                                if model == "causal" else 0,
                                                rebase_at=plan.rebase_at
                                                if model == "causal" else 0,
                                                rebase_lr=plan.rebase_lr
                                                if model == "causal" else 0.0,
                                            ))  # fmt: skip
    return specs


@dataclass
class SweepResult:
    """A trained sweep: its plan, every run, and the per-cell summary it reports.

    ``summary`` holds, per (scale, model, feature map, rank), the mean, min and
    max over seeds of the suite's metric (witness: sequence error; OOD: test
    accuracy) and its 95% interval (``ci_low``, ``ci_high``; None below three
    seeds).  For OOD, ``transition`` maps each scale to the smallest rank whose
    interval's lower end reaches ``plan.accuracy`` (and the bracket's lower end,
    :func:`~sketchsim.experiments.stats.interval_transition`), and ``trend``
    holds, per kernel rank, the slope of test accuracy per bit of ``m`` with its
    95% interval (:func:`~sketchsim.experiments.stats.scale_trend`; no threshold).
    """

    plan: SuitePlan
    header: dict
    runs: list
    summary: list
    bound: int | None = None
    max_abs_error: list | None = None
    transition: dict | None = None
    lr_grid: list | None = None
    trend: list | None = None

    @property
    def metric(self) -> str:
        """``sequence_error`` (witness), ``test_accuracy`` (OOD) or ``accuracy`` (capacity)."""
        if self.plan.suite == "capacity":
            return "accuracy"
        return "sequence_error" if self.plan.suite == "witness" else "test_accuracy"

    def to_dict(self) -> dict:
        """JSON-ready summary (the runs are in the sweep file)."""
        out = {"summary": self.summary, "certified_rank": self.bound}
        if self.transition is not None:
            out["transition"] = self.transition
        if self.trend is not None:
            out["trend"] = self.trend
        if self.lr_grid is not None:
            out["lr_grid"] = self.lr_grid
        return out


def run_plan(
    plan: SuitePlan,
    path=None,
    resume: bool = False,
    device: str = "auto",
    family=None,
    client=None,
    progress=None,
    weights_dir=None,
) -> SweepResult:
    """Train every run of ``plan`` (resuming from ``path``) and summarize with 95% intervals.

    See :func:`sketchsim.api.sweep` for the parameters.
    """
    import torch

    from sketchsim.experiments.sweep import run_sweep
    from sketchsim.experiments.sweep_summary import spread, summarize

    if client is None:
        torch.set_num_threads(plan.threads)
    if plan.suite == "capacity":
        return _run_capacity(plan, path, resume, device, client, progress, weights_dir)
    specs, data, header, bound, context = build_runs(plan, family)
    runs = run_sweep(
        specs,
        data,
        path,
        header,
        device,
        resume,
        progress,
        context,
        client=client,
        weights_dir=weights_dir,
    )
    metric = "sequence_error" if plan.suite == "witness" else "test_accuracy"
    summary = with_intervals(runs, metric, summarize(runs, metric))
    result = SweepResult(plan, header, runs, summary, bound)
    if plan.suite == "witness":
        result.max_abs_error = summarize(runs, "max_abs_error")
    else:
        result.transition = interval_transition(summary, plan.accuracy)
        result.trend = scale_trend(runs)
    if len(plan.lrs) > 1:  # best over the grid, and mean and spread over seeds
        result.lr_grid = spread(runs, metric, lower=plan.suite == "witness")
    if path:  # the summary beside the runs: the file says what the terminal said
        from sketchsim.results import read_json, write_json_atomic

        write_json_atomic(path, {**read_json(path), **result.to_dict()})
    return result


def _run_capacity(plan, path, resume, device, client, progress, weights_dir) -> SweepResult:
    from sketchsim.experiments.capacity_suite import run_capacity, summarize_capacity
    from sketchsim.experiments.memory import check_capacity_memory
    from sketchsim.experiments.sweep import capacity_header
    from sketchsim.experiments.train import pick_device

    specs = capacity_specs(plan)
    header = capacity_header(plan)
    dev = str(pick_device(device))
    if not plan.allow_large:
        check_capacity_memory(specs, dev, weights_dir is not None, batch=plan.batch)
    trainer = None
    if plan.batch:
        from sketchsim.experiments.batched_training import train_capacity_batch as trainer
    runs = run_capacity(specs, path, header, resume, dev, progress, weights_dir, client,
                        batch_trainer=trainer)  # fmt: skip
    result = SweepResult(plan, header, runs, summarize_capacity(runs))
    if path:
        from sketchsim.results import read_json, write_json_atomic

        write_json_atomic(path, {**read_json(path), "summary": result.summary})
    return result
