"""The ``sweep`` command: trained heads against the certified bound (torch extra)."""

from __future__ import annotations

from contextlib import contextmanager

import click
from rich.table import Table

from sketchsim.cli import render
from sketchsim.cli.app import main
from sketchsim.cli.cluster import cluster_option
from sketchsim.cli.paths import OutputPath
from sketchsim.config import OOD_STOP_BELOW
from sketchsim.errors import SketchsimError
from sketchsim.results import write_json_atomic
from sketchsim.sketch.specs import parse_int


def _ints(text: str, name: str) -> list[int]:
    try:
        values = [parse_int(v) for v in text.split(",") if v.strip()]
    except (ValueError, OverflowError):
        raise SketchsimError(f"{name} must be comma-separated integers, got {text!r}") from None
    if not values or min(values) < 1:
        raise SketchsimError(f"{name} must list integers >= 1, got {text!r}")
    return sorted(set(values))


def _floats(text: str, name: str) -> list[float]:
    import math

    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise SketchsimError(f"{name} must be comma-separated numbers, got {text!r}") from None
    # above 1e6 a float32 Adam step (lr / bias correction) overflows inside torch
    if not values or not all(math.isfinite(v) and 0 < v <= 1e6 for v in values):
        raise SketchsimError(f"{name} must list finite numbers in (0, 1e6], got {text!r}")
    return sorted(set(values))


def _bounded(value: int, name: str, low: int, high: int, allow_large: bool) -> int:
    if value < low:
        raise SketchsimError(f"{name} must be >= {low}, got {value}")
    if value > high and not allow_large:
        raise SketchsimError(
            f"{name} = {value:,} is above the limit {high:,}; pass --allow-large to go past it"
        )
    return value


@main.command()
@click.option(
    "--suite", type=click.Choice(["witness", "ood"]), default="witness", show_default=True
)
@click.option(
    "--family",
    type=click.Path(dir_okay=False),
    help="Witness family .npz (default: `sketchsim witness` defaults).",
)
@click.option("--ranks", default="1,2,4,8,16,32,64", show_default=True)
@click.option("--seeds", type=int, default=3, show_default=True, help="Seeds 0..S-1.")
@click.option(
    "--feature-map",
    default=None,
    help="Comma list: table (witness default), favor (ood default), mlp, elu1, relu, relu2, "
    "hedgehog, expmap.",
)
@click.option(
    "--model",
    "models",
    multiple=True,
    type=click.Choice(["kernel", "signed", "softmax"]),
    help="Repeatable (default: kernel and softmax).",
)
@click.option(
    "--scales",
    default="8:64:2000,12:256:2000,16:1024:2000",
    show_default=True,
    help="ood: m:pool:triples per scale.",
)
@click.option(
    "--accuracy",
    type=float,
    default=0.95,
    show_default=True,
    help="ood: test accuracy that marks the transition, in (0, 1].",
)
@click.option("--steps", type=int, default=2000, show_default=True, help="Training steps cap.")
@click.option(
    "--lr",
    default=None,
    help="Learning rate, or a comma list (a grid). Default: 0.03 (witness), 0.01 (ood).",
)
@click.option(
    "--loss",
    type=click.Choice(["mse", "minimax"]),
    default="mse",
    show_default=True,
    help="minimax: smooth max of the squared errors.",
)
@click.option(
    "--stop-below",
    type=float,
    default=None,
    help="Stop once every training error is below this (0.5: as soon as exact). "
    "Default: 0.5 (witness), 0.05 (ood: a margin for unseen tokens, chosen on a "
    "validation split).",
)
@click.option("--heads", type=int, default=1, show_default=True, help="Heads whose outputs add.")
@click.option(
    "--eps", type=float, default=1e-6, show_default=True, help="Kernel normalizer epsilon."
)
@click.option(
    "--dtype", type=click.Choice(["float32", "float64"]), default="float32", show_default=True
)
@click.option(
    "--encoding",
    type=click.Choice(["pm1", "01"]),
    default="pm1",
    show_default=True,
    help="Token encoding fed to the heads (2x-1 or x).",
)
@click.option(
    "--train-on",
    type=click.Choice(["auto", "family", "random"]),
    default="auto",
    show_default=True,
    help="witness: train on the family, or on random triples of its width and evaluate on "
    "the family; auto: softmax on random triples, kernels on the family.",
)
@click.option(
    "--triples",
    type=int,
    default=4000,
    show_default=True,
    help="witness: random training triples (train-on random).",
)
@click.option(
    "--threads",
    type=int,
    default=1,
    show_default=True,
    help="Torch CPU threads (1 suits these tiny models).",
)
@click.option(
    "--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True
)
@click.option("--json", "json_path", type=OutputPath())
@click.option("--plot", "plot_path", type=OutputPath((".png",)), help="PNG of error vs r.")
@click.option("--resume", is_flag=True, help="Skip runs already in --json.")
@click.option("--allow-large", is_flag=True, help="Go past the size limits.")
@cluster_option
def sweep(
    suite,
    family,
    ranks,
    seeds,
    feature_map,
    models,
    scales,
    accuracy,
    steps,
    lr,
    loss,
    stop_below,
    heads,
    eps,
    dtype,
    encoding,
    train_on,
    triples,
    threads,
    device,
    json_path,
    plot_path,
    resume,
    allow_large,
    cluster,
):
    """Train heads over feature ranks and seeds; compare with the certified bound."""
    import math

    from sketchsim import config
    from sketchsim.experiments import require_torch

    torch = require_torch()
    from sketchsim.experiments.sweep import run_sweep

    if resume and not json_path:
        raise click.UsageError("--resume needs --json PATH")
    _bounded(seeds, "--seeds", 1, config.SWEEP_MAX_SEEDS, allow_large)
    _bounded(steps, "--steps", 1, config.SWEEP_MAX_STEPS, allow_large)
    _bounded(heads, "--heads", 1, 64, allow_large)
    _bounded(threads, "--threads", 1, 256, False)
    _one_thread_on_cluster(cluster, threads)
    _bounded(triples, "--triples", 3, 1_000_000, False)
    if not (math.isfinite(eps) and 0 <= eps <= 1):
        raise SketchsimError(f"--eps must be a finite number in [0, 1], got {eps}")
    suite_defaults = {"witness": ("0.03", 0.5), "ood": ("0.01", OOD_STOP_BELOW)}[suite]
    lr = suite_defaults[0] if lr is None else lr
    stop_below = suite_defaults[1] if stop_below is None else stop_below
    if not (math.isfinite(stop_below) and 0 < stop_below <= 0.5):
        raise SketchsimError(f"--stop-below must be in (0, 0.5], got {stop_below}")
    if not (math.isfinite(accuracy) and 0 < accuracy <= 1):
        raise SketchsimError(f"--accuracy must be in (0, 1], got {accuracy}")
    lrs = _floats(lr, "--lr")
    rank_list = _ints(ranks, "--ranks")
    models = models or ("kernel", "softmax")
    fmaps = _maps(feature_map, suite)
    torch.set_num_threads(threads)
    specs, data, header, bound, context = _plan(
        suite,
        family,
        rank_list,
        seeds,
        fmaps,
        models,
        scales,
        dict(
            steps=steps,
            loss=loss,
            stop_below=stop_below,
            heads=heads,
            eps=eps,
            dtype=dtype,
            encoding=encoding,
        ),
        lrs,
        train_on,
        triples,
        allow_large,
    )
    header.update(
        {
            "steps": steps,
            "lr": lrs,
            "loss": loss,
            "stop_below": stop_below,
            "heads": heads,
            "eps": eps,
            "dtype": dtype,
            "encoding": encoding,
            "threads": threads,
            "accuracy": accuracy if suite == "ood" else None,
        }
    )
    with _cluster_client(cluster, device) as client:
        with render.progress_bar(f"sweep {suite}", len(specs)) as update:
            rows = run_sweep(
                specs, data, json_path, header, device, resume, update, context, client=client
            )
    _render(suite, rows, bound, accuracy, json_path, plot_path, header)


def _one_thread_on_cluster(cluster, threads):
    if cluster is not None and threads != 1:
        raise SketchsimError(
            "--threads sets the in-process torch threads; with --cluster every run uses one "
            "torch thread per worker (start more workers instead)"
        )


@contextmanager
def _cluster_client(cluster, device):
    """A Dask client for ``--cluster`` (None without it); says where the runs go."""
    if cluster is None:
        yield None
        return
    from sketchsim.cluster.client import connect
    from sketchsim.experiments.sweep import task_resources

    def note(msg):
        render.err_console.print(f"[dim]{msg}[/dim]")

    with connect(cluster, log=note) as client:
        if task_resources(client, device):
            note("each training run requests the worker resource GPU=1")
        elif device == "cuda":
            note(
                "no worker advertises a GPU resource (dask worker --resources GPU=1): "
                "runs share the workers' GPUs"
            )
        yield client


def _maps(text, suite):
    from sketchsim.experiments.feature_maps import REGISTRY

    names = [v.strip() for v in (text or ("table" if suite == "witness" else "favor")).split(",")]
    allowed = [name for name, cls in REGISTRY.items() if cls.nonnegative]
    for name in names:
        if name not in allowed:
            raise SketchsimError(f"--feature-map must list names from {', '.join(allowed)}")
        if suite == "ood" and REGISTRY[name].reads_ids:
            raise SketchsimError("the ood suite tests unseen tokens: use a parametric feature map")
    return list(dict.fromkeys(names))


def _check_size(model, m, r, fmap, vocab, heads, allow_large):
    from sketchsim import config
    from sketchsim.experiments.models import head_parameters

    n = head_parameters(model, m, r, fmap, vocab, heads)
    if r > config.SWEEP_MAX_RANK and not allow_large:
        raise SketchsimError(
            f"--ranks {r:,} is above the limit {config.SWEEP_MAX_RANK:,} (a {model} head "
            f"would have about {n:,} parameters); pass --allow-large to go past it"
        )
    if n > config.SWEEP_MAX_PARAMS and not allow_large:
        raise SketchsimError(
            f"a {model} head with r = {r:,} has about {n:,} parameters, above the limit "
            f"{config.SWEEP_MAX_PARAMS:,}; pass --allow-large to go past it"
        )


def _plan(
    suite,
    family_path,
    ranks,
    seeds,
    fmaps,
    models,
    scales,
    proto,
    lrs,
    train_on,
    triples,
    allow_large,
):
    from sketchsim.experiments.suites import (
        ood_splits,
        parse_scales,
        random_triples,
        witness_split,
    )
    from sketchsim.experiments.sweep import RunSpec

    if suite == "witness":
        from sketchsim.certify import build_witness, certify, load_family
        from sketchsim.certify.codes import hadamard_code

        family = (
            load_family(family_path)
            if family_path
            else build_witness(hadamard_code(24), "hadamard", 12)
        )
        if len(family.tokens) == 0:
            raise SketchsimError(f"the family {family_path} has no inputs")
        bound = certify(family, eps_list=()).certified_rank["0.5"]
        split = witness_split(family)
        from sketchsim.minip.token_ids import token_ids

        vocab = token_ids(family.tokens)[1]
        sizes = [(family.m, vocab)]
        scale_names = [""]
        header = {
            "suite": "witness",
            "family_sha256": family.sha256(),
            "inputs": len(family.tokens),
            "m": family.m,
            "certified_rank": bound,
            "random_triples": triples,
        }
        context = {"family_sha256": family.sha256(), "random_triples": triples}
        cache = {}

        def data(spec):
            if spec.train_on == "family":
                return split, None, None
            if spec.seed not in cache:
                cache[spec.seed] = random_triples(family.m, triples, spec.seed)
            return cache[spec.seed], split, None
    else:
        parsed = parse_scales(scales)
        scale_names = [f"{m}:{p}:{t}" for m, p, t in parsed]
        sizes = [(m, 0) for m, _, _ in parsed]
        cache = {}
        bound = None
        header = {"suite": "ood", "scales": scale_names}
        context = {}

        def data(spec):
            key = (spec.scale, spec.seed)
            if key not in cache:
                m, p, t = (int(v) for v in spec.scale.split(":"))
                cache[key] = ood_splits(m, p, t, spec.seed)
            return cache[key][0], None, cache[key][1]

    for m, vocab in sizes:
        for model in models:
            for fmap in fmaps if model == "kernel" else ["signed"]:
                for r in ranks:
                    _check_size(model, m, r, fmap, vocab, proto["heads"], allow_large)

    def source(model):
        if suite == "ood":
            return "pool"
        if train_on != "auto":
            return train_on
        return "random" if model == "softmax" else "family"

    header.update(
        {
            "ranks": ranks,
            "seeds": seeds,
            "feature_maps": fmaps,
            "models": list(models),
            "train_on": {model: source(model) for model in models},
        }
    )
    specs = []
    for scale in scale_names:
        for model in models:
            if model == "softmax":
                cells = [("-", 0)]
            elif model == "signed":
                cells = [("signed", r) for r in ranks]
            else:
                cells = [(f, r) for f in fmaps for r in ranks]
            for fmap, r in cells:
                for lr in lrs:
                    for seed in range(seeds):
                        specs.append(
                            RunSpec(
                                suite,
                                scale,
                                model,
                                fmap,
                                r,
                                seed,
                                lr=lr,
                                train_on=source(model),
                                **proto,
                            )
                        )
    return specs, data, header, bound, context


def _render(suite, rows, bound, accuracy, json_path, plot_path, header):
    from sketchsim.experiments.sweep import plot_sweep, spread, summarize, transition

    metric = "sequence_error" if suite == "witness" else "test_accuracy"
    summary = summarize(rows, metric)
    errs = summarize(rows, "max_abs_error") if suite == "witness" else None
    trained_on = header.get("train_on", {})
    title = (
        "witness suite: sequence error on the family"
        if suite == "witness"
        else "ood suite: exact-sequence accuracy on disjoint test tokens"
    )
    table = Table(
        title=title,
        caption=(f"certified r >= {bound} for every head with error < 1/2" if bound else None),
    )
    cols = ["scale", "model", "r", "trained on", "runs", "mean", "min", "max"]
    if errs:
        cols.append("max |y-t| (mean)")
    for col in cols:
        left = col in ("scale", "model", "trained on")
        table.add_column(col, justify="left" if left else "right")
    for k, row in enumerate(summary):
        model = row["model"] + (f" ({row['feature_map']})" if row["model"] != "softmax" else "")
        cells = [
            row["scale"] or "-",
            model,
            str(row["rank"] or "-"),
            {"random": "random triples", "pool": "train pool"}.get(
                trained_on.get(row["model"], ""), trained_on.get(row["model"], "")
            ),
            str(row["seeds"]),
            f"{row['mean']:.3f}",
            f"{row['min']:.3f}",
            f"{row['max']:.3f}",
        ]
        if errs:
            cells.append(f"{errs[k]['mean']:.3f}")
        table.add_row(*cells)
    render.console.print(table)
    extra = {}
    if len(header.get("lr", [])) > 1:
        grid = spread(rows, metric, lower=suite == "witness")
        extra["lr_grid"] = grid
        grid_table = Table(title="learning-rate grid: best over the grid; mean ± std over seeds")
        for col in ("scale", "model", "r", "best lr", "best", "mean ± std"):
            grid_table.add_column(col)
        for g in grid:
            model = g["model"] + (f" ({g['feature_map']})" if g["model"] != "softmax" else "")
            grid_table.add_row(
                g["scale"] or "-",
                model,
                str(g["rank"] or "-"),
                f"{g['best_lr']:g}",
                f"{g['best']:.3f}",
                f"{g['mean']:.3f} ± {g['std']:.3f}",
            )
        render.console.print(grid_table)
    if suite == "ood":
        trans = transition(summary, accuracy)
        extra["transition"] = trans
        for scale, r in trans.items():
            render.console.print(
                f"scale {scale}: smallest r with mean test accuracy >= "
                f"{accuracy:g}: [bold]{r if r is not None else 'none'}[/bold]"
            )
    if plot_path:
        ylabel = "sequence error" if suite == "witness" else "test exact-sequence accuracy"
        plot_sweep(summary, plot_path, ylabel, title, bound)
    if json_path:
        import json
        from pathlib import Path

        data = json.loads(Path(json_path).read_text())
        data.update({"summary": summary, **extra})
        write_json_atomic(json_path, data)


@main.command()
@click.option(
    "--quick",
    is_flag=True,
    help="Small sizes (1 seed, 1,000-triple OOD scales); aimed at 10 minutes on 2 idle CPU cores.",
)
@click.option(
    "--out", "out_dir", type=OutputPath(directory=True), default="results", show_default=True
)
@click.option(
    "--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True
)
@click.option(
    "--threads",
    type=click.IntRange(1, 256),
    default=1,
    show_default=True,
    help="Torch CPU threads for the training runs (1 suits these tiny models).",
)
@cluster_option
def reproduce(quick, out_dir, device, threads, cluster):
    """Run the whole story and put the paper's numbers beside ours.

    With --cluster the training runs of both sweeps are cluster tasks.
    """
    from dataclasses import replace
    from pathlib import Path

    from sketchsim.api import reproduce as run
    from sketchsim.experiments.reproduce import Settings

    _one_thread_on_cluster(cluster, threads)
    with _cluster_client(cluster, device) as client:
        rows = run(
            Path(out_dir),
            quick,
            log=lambda msg: render.err_console.print(f"[dim]{msg}[/dim]"),
            device=device,
            settings=replace(Settings.of(quick), threads=threads),
            client=client,
        )
    table = Table(title="paper vs measured", caption=f"report: {Path(out_dir) / 'report.md'}")
    for col in ("claim", "paper", "measured", "agrees"):
        table.add_column(col)
    for r in rows:
        color = "green" if r.agrees == "yes" else ("red" if r.agrees == "NO" else "yellow")
        table.add_row(r.claim, r.paper, r.measured, f"[{color}]{r.agrees}[/{color}]")
    render.console.print(table)
