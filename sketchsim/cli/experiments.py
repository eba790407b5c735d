"""The ``sweep`` command: trained heads against the certified bound (torch extra)."""

from __future__ import annotations

import click
from rich.table import Table

from sketchsim.cli import render
from sketchsim.cli.app import main
from sketchsim.cli.paths import OutputPath
from sketchsim.errors import SketchsimError
from sketchsim.results import write_json_atomic


def _ints(text: str, name: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise SketchsimError(f"{name} must be comma-separated integers, got {text!r}") from None
    if not values or min(values) < 1:
        raise SketchsimError(f"{name} must list integers >= 1, got {text!r}")
    return values


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
    help="table (witness default), mlp (ood default), elu1, relu, relu2, favor, hedgehog.",
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
    default="8:24:300,12:48:600,16:96:1200",
    show_default=True,
    help="ood: m:pool:triples per scale.",
)
@click.option(
    "--accuracy",
    type=float,
    default=0.95,
    show_default=True,
    help="ood: test accuracy that marks the transition.",
)
@click.option("--steps", type=int, default=1500, show_default=True, help="Training steps cap.")
@click.option("--lr", type=float, default=0.03, show_default=True)
@click.option(
    "--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True
)
@click.option("--json", "json_path", type=OutputPath())
@click.option("--plot", "plot_path", type=OutputPath((".png",)), help="PNG of error vs r.")
@click.option("--resume", is_flag=True, help="Skip runs already in --json.")
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
    device,
    json_path,
    plot_path,
    resume,
):
    """Train heads over feature ranks and seeds; compare with the certified bound."""
    from sketchsim.experiments import require_torch

    require_torch()
    from sketchsim.experiments.sweep import run_sweep

    if resume and not json_path:
        raise click.UsageError("--resume needs --json PATH")
    if seeds < 1 or steps < 1:
        raise SketchsimError("--seeds and --steps must be >= 1")
    rank_list = _ints(ranks, "--ranks")
    models = models or ("kernel", "softmax")
    fmap = feature_map or ("table" if suite == "witness" else "mlp")
    from sketchsim.experiments.models import FEATURE_MAPS

    if fmap not in FEATURE_MAPS or fmap == "signed":
        raise SketchsimError(f"--feature-map must be one of {', '.join(FEATURE_MAPS[:-1])}")
    if suite == "ood" and fmap == "table":
        raise SketchsimError("the ood suite tests unseen tokens: use a parametric feature map")
    specs, data, header, bound = _plan(suite, family, rank_list, seeds, fmap, models, scales)
    header.update({"steps": steps, "lr": lr, "accuracy": accuracy if suite == "ood" else None})
    with render.progress_bar(f"sweep {suite}", len(specs)) as update:
        rows = run_sweep(specs, data, json_path, header, steps, lr, device, resume, update)
    _render(suite, rows, bound, accuracy, json_path, plot_path, header)


def _plan(suite, family_path, ranks, seeds, fmap, models, scales):
    from sketchsim.experiments.suites import ood_splits, parse_scales, witness_split
    from sketchsim.experiments.sweep import RunSpec

    specs = []
    if suite == "witness":
        from sketchsim.certify import build_witness, certify, load_family
        from sketchsim.codes import hadamard_code

        family = (
            load_family(family_path)
            if family_path
            else build_witness(hadamard_code(24), "hadamard", 12)
        )
        bound = certify(family, eps_list=()).certified_rank["0.5"]
        split = witness_split(family)
        scale_names = [""]
        header = {
            "suite": "witness",
            "family_sha256": family.sha256(),
            "inputs": len(family.tokens),
            "m": family.m,
            "certified_rank": bound,
        }

        def data(spec):
            return split, None
    else:
        parsed = parse_scales(scales)
        scale_names = [f"{m}:{p}:{t}" for m, p, t in parsed]
        cache = {}
        bound = None
        header = {"suite": "ood", "scales": scale_names}

        def data(spec):
            key = (spec.scale, spec.seed)
            if key not in cache:
                m, p, t = (int(v) for v in spec.scale.split(":"))
                cache[key] = ood_splits(m, p, t, spec.seed)
            return cache[key]

    header.update({"ranks": ranks, "seeds": seeds, "feature_map": fmap, "models": list(models)})
    for scale in scale_names:
        for model in models:
            for seed in range(seeds):
                if model == "softmax":
                    specs.append(RunSpec(suite, scale, "softmax", "-", 0, seed))
                    continue
                for r in ranks:
                    specs.append(
                        RunSpec(
                            suite, scale, model, fmap if model == "kernel" else "signed", r, seed
                        )
                    )
    return specs, data, header, bound


def _render(suite, rows, bound, accuracy, json_path, plot_path, header):
    from sketchsim.experiments.sweep import plot_sweep, summarize, transition

    metric = "sequence_error" if suite == "witness" else "test_accuracy"
    summary = summarize(rows, metric)
    errs = summarize(rows, "max_abs_error") if suite == "witness" else None
    title = (
        "witness suite: sequence error on the family"
        if suite == "witness"
        else "ood suite: exact-sequence accuracy on disjoint test tokens"
    )
    table = Table(
        title=title,
        caption=(f"certified r >= {bound} for every head with error < 1/2" if bound else None),
    )
    cols = ["scale", "model", "r", "seeds", "mean", "min", "max"]
    if errs:
        cols.append("max |y-t| (mean)")
    for col in cols:
        table.add_column(col, justify="left" if col in ("scale", "model") else "right")
    for k, row in enumerate(summary):
        model = row["model"] + (f" ({row['feature_map']})" if row["model"] != "softmax" else "")
        cells = [
            row["scale"] or "-",
            model,
            str(row["rank"] or "-"),
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
@click.option("--quick", is_flag=True, help="Small sizes: about 10 minutes on 2 CPU cores.")
@click.option(
    "--out", "out_dir", type=OutputPath(directory=True), default="results", show_default=True
)
@click.option(
    "--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True
)
def reproduce(quick, out_dir, device):
    """Run the whole story and put the paper's numbers beside ours."""
    from pathlib import Path

    from sketchsim.reproduce import reproduce as run

    rows = run(
        Path(out_dir),
        quick,
        log=lambda msg: render.err_console.print(f"[dim]{msg}[/dim]"),
        device=device,
    )
    table = Table(title="paper vs measured", caption=f"report: {Path(out_dir) / 'render.md'}")
    for col in ("claim", "paper", "measured", "agrees"):
        table.add_column(col)
    for r in rows:
        color = "green" if r.agrees == "yes" else ("red" if r.agrees == "NO" else "yellow")
        table.add_row(r.claim, r.paper, r.measured, f"[{color}]{r.agrees}[/{color}]")
    render.console.print(table)
