"""The ``sweep`` command: trained heads against the certified bound (torch extra)."""

from __future__ import annotations

from pathlib import Path

import click

from sketchsim.cli import render
from sketchsim.cli.app import main
from sketchsim.cli.cluster import cluster_option
from sketchsim.cli.options import (
    check_resume,
    json_option,
    parse_list,
    refuse_unused,
    resume_option,
    split_list,
    split_specs,
)
from sketchsim.cli.paths import CheckedCommand, OutputPath, PlotPath
from sketchsim.errors import SketchsimError
from sketchsim.experiments.suite_options import check_plan_memory, one_thread_on_cluster
from sketchsim.runs.clusters import training_client
from sketchsim.sketch.specs import parse_int


def _ints(text: str, name: str, checked: bool = True) -> list[int]:
    values = parse_list(text, parse_int, name, "integers")
    if checked and min(values) < 1:
        raise SketchsimError(f"{name} must list integers >= 1, got {text!r}")
    return sorted(set(values))


def _floats(text: str, name: str) -> list[float]:
    import math

    values = parse_list(text, float, name, "numbers")
    # above 1e6 a float32 Adam step (lr / bias correction) overflows inside torch
    if not all(math.isfinite(v) and 0 < v <= 1e6 for v in values):
        raise SketchsimError(f"{name} must list finite numbers in (0, 1e6], got {text!r}")
    return sorted(set(values))


PLAN_DEFAULT = "Default: the suite's plan (as reproduce runs it)."

SUITES = ("witness", "ood", "capacity")
#: sweep options that say where or how the runs go, not what they train.
_RUNNING = {"suite", "json_path", "plot_path", "resume", "weights_dir", "device", "threads",
            "allow_large", "cluster", "cluster_timeout"}  # fmt: skip


def _suites_reading(name: str) -> tuple[str, ...]:
    """The suites that read the sweep option ``name`` (the refusal tables below)."""
    if name in _SUITE_ONLY:
        return (_SUITE_ONLY[name],)
    from sketchsim.experiments.suite_options import READ_BY

    return READ_BY.get(name, SUITES)


class SweepCommand(CheckedCommand):
    """``sweep``, whose help lists its options by the suites that read them."""

    def format_options(self, ctx, formatter):
        sections: dict[str, list] = {}
        for param in self.get_params(ctx):
            row = param.get_help_record(ctx)
            if row is None:
                continue
            if param.name in _RUNNING or param.name == "help":
                title = "Where and how the runs go"
            else:
                suites = _suites_reading(param.name)
                title = (
                    "Options of every suite"
                    if suites == SUITES
                    else f"Options of --suite {' and '.join(suites)} only"
                )
            sections.setdefault(title, []).append(row)
        order = ["Options of every suite"] + [
            t for t in sections if t.startswith("Options of --suite")
        ] + ["Where and how the runs go"]  # fmt: skip
        for title in order:
            if title in sections:
                with formatter.section(title):
                    formatter.write_dl(sections[title])


@main.command(cls=SweepCommand)
@click.option(
    "--suite",
    type=click.Choice(["witness", "ood", "capacity"]),
    default="witness",
    show_default=True,
)
@click.option(
    "--family",
    type=click.Path(dir_okay=False),
    help="Witness family .npz (default: `sketchsim witness` defaults); capacity: comma list "
    "of families (hard, mqar).",
)
@click.option("--q", "qs", default=None, help="capacity: comma list of q. " + PLAN_DEFAULT)
@click.option("--s", "ss", default=None, help="capacity: comma list of s. " + PLAN_DEFAULT)
@click.option("--layers", default=None, help="capacity: comma list of layer counts (1, 2).")
@click.option("--value-widths", default=None, help="capacity: comma list of value widths d.")
@click.option(
    "--model-plugin",
    "model_plugins",
    multiple=True,
    help="capacity: a user layer, entry point NAME or file.py:NAME (repeatable).",
)
@click.option(
    "--arch",
    "archs",
    default=None,
    help="capacity: comma list of architectures (beside --model's; without --model, the only "
    "ones): linear, based, gla, deltanet, gated-deltanet, mamba, window[:W] (W tokens; plain "
    "window: the whole input), retention, softmax (the dense reference).",
)
@click.option("--ranks", default=None, help="Comma list of feature ranks. " + PLAN_DEFAULT)
@click.option(
    "--seeds", type=int, default=None, help="Seeds 0..S-1 of every model. " + PLAN_DEFAULT
)
@click.option(
    "--feature-map",
    default=None,
    help="Comma list: table (witness default), elu1 (ood default), mlp, relu, relu2, favor, "
    "hedgehog, expmap; capacity: elu1, relu, softplus, signed, and for --arch linear elu1sum.",
)
@click.option(
    "--model",
    "models",
    multiple=True,
    type=click.Choice(["kernel", "signed", "softmax"]),
    help="Repeatable (default: kernel and softmax).",
)
@click.option("--scales", default=None, help="ood: m:pool:triples per scale. " + PLAN_DEFAULT)
@click.option(
    "--accuracy",
    type=float,
    default=None,
    help="ood: test accuracy that the 95% interval's lower end must reach at the transition "
    "(default 0.95).",
)
@click.option(
    "--steps",
    type=int,
    default=None,
    help="Training steps cap of every model. Default: the suite's plan (ood: 1,000, softmax "
    "4,000, each chosen on validation).",
)
@click.option(
    "--lr",
    default=None,
    help="Learning rate, or a comma list (a grid). Default: 0.03 (witness), 0.01 (ood).",
)
@click.option("--loss", type=click.Choice(["mse", "minimax"]), default=None,
              help="minimax: smooth max of the squared errors (default mse).")  # fmt: skip
@click.option(
    "--stop-below",
    type=float,
    default=None,
    help="Stop once every training error is below this (0.5: as soon as exact). "
    "Default: 0.5 (witness), 0.05 (ood: a margin for unseen tokens, chosen on a "
    "validation split).",
)
@click.option(
    "--heads", default=None, help="Heads whose outputs add (default 1); capacity: a comma list."
)
@click.option("--eps", type=float, default=None, help="Kernel normalizer epsilon (default 1e-6).")
@click.option("--dtype", type=click.Choice(["float32", "float64"]), default=None)
@click.option("--encoding", type=click.Choice(["pm1", "01"]), default=None,
              help="Token encoding fed to the heads (2x-1 or x; default pm1).")  # fmt: skip
@click.option(
    "--train-on",
    type=click.Choice(["auto", "family", "random"]),
    default=None,
    help="witness: train on the family, or on random triples of its width and evaluate on "
    "the family; auto (default): softmax on random triples, kernels on the family.",
)
@click.option("--triples", type=int, default=None,
              help="witness: random training triples (default 4000).")  # fmt: skip
@click.option("--threads", type=click.IntRange(1, 256), default=1, show_default=True,
              help="Torch CPU threads (1 suits these tiny models).")  # fmt: skip
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto",
              show_default=True)  # fmt: skip
@json_option("Write every run here (rewritten after each run).")
@click.option("--plot", "plot_path", type=PlotPath(), help="PNG of the metric vs r.")
@resume_option("Skip runs already in --json.")
@click.option("--allow-large", is_flag=True,
              help="Go past the size limits (capacity: and past the memory estimate).")  # fmt: skip
@click.option("--train-bits", type=click.IntRange(1, 32), default=None,
              help="capacity: train with the state in K-bit registers in the forward pass "
              "(straight-through gradients); default: float, rounded when measured.")  # fmt: skip
@click.option("--train-bits-from", "qat_from", type=click.Choice(["start", "fit"]), default=None,
              help="capacity, with --train-bits: at K bits from the first step (default), or "
              "in float until the stop rule holds, then at K bits.")  # fmt: skip
@click.option("--train-noise", type=click.IntRange(1, 32), default=None, help="capacity, "
              "one-layer --arch: train with one K-bit step of noise on the cut state.")  # fmt: skip
@click.option("--rebase-at", type=click.IntRange(1), default=None, help="capacity, one-layer "
              "--arch: change the model to its readout basis at this step.")  # fmt: skip
@click.option("--rebase-lr", type=float, default=None, help="capacity, with --rebase-at and "
              "--schedule constant: the rate after the change (default --lr).")  # fmt: skip
@click.option("--weight-l1", type=float, default=None, help="capacity: add this times the "
              "L1 norm of every weight matrix to the loss (default 0).")  # fmt: skip
@click.option("--schedule", type=click.Choice(["onecycle", "constant"]), default=None,
              help="capacity: learning-rate schedule (default onecycle: a warm-up over 30% of "
              "the steps, then annealed; constant: --lr throughout).")  # fmt: skip
@click.option("--keep", type=click.Choice(["last", "best"]), default=None,
              help="capacity: keep the model after the last step (default), or the step's "
              "model with the most training inputs right.")  # fmt: skip
@click.option("--train-rounding", type=click.Choice(["every", "cut"]), default=None,
              help="capacity, with --train-bits: round a causal state after every token "
              "(default), or only after the last data token (the transcript).")  # fmt: skip
@click.option("--train-inputs", type=click.IntRange(1), default=None, help="capacity: training "
              "inputs per run (default 512; every input when the family has fewer).")  # fmt: skip
@click.option("--batch", is_flag=True, default=None, help="capacity: train the causal float "
              "runs that differ only in seed and --lr as one batched model (vmap).")  # fmt: skip
@click.option(
    "--save-weights",
    "weights_dir",
    type=OutputPath(directory=True),
    help="Keep every head trained here for `sketchsim audit` (not with --cluster), or every "
    "capacity model for `sketchsim capacity` (with --cluster: a folder the workers share).",
)
@cluster_option
def sweep(suite, family, qs, ss, layers, value_widths, model_plugins, ranks, seeds, feature_map,
          models, archs, scales, accuracy, steps, lr, loss, stop_below, heads, eps, dtype,
          encoding, train_on, triples, threads, device, json_path, plot_path, resume,
          allow_large, train_bits, qat_from, train_noise, rebase_at, rebase_lr, weight_l1, schedule,
          train_inputs, batch, keep, train_rounding, weights_dir, cluster):  # fmt: skip
    """Train heads over feature ranks and seeds; compare with the certified bound.

    With no flags a suite runs the plan ``reproduce`` runs
    (sketchsim/experiments/plan.py); every flag overrides one field of it.
    """
    from sketchsim.api import sweep as run_sweep
    from sketchsim.experiments import require_torch

    require_torch()
    from sketchsim.experiments.plan import default_plan, once, refuse_without_bits

    check_resume(resume, json_path)
    if weights_dir and cluster is not None and suite != "capacity":
        raise click.UsageError("--save-weights keeps heads trained in this process, not --cluster")
    one_thread_on_cluster(cluster, threads)
    _refuse_foreign(suite, family, scales)
    heads = _ints(heads, "--heads", checked=False) if heads is not None else None  # plan checks
    if heads and len(heads) > 1 and suite != "capacity":
        raise SketchsimError("--heads takes one number outside the capacity suite")
    capacity = suite == "capacity"
    refuse_without_bits(suite, train_bits, train_rounding, qat_from)
    plan = default_plan(suite).with_(
        archs=_names(archs, "--arch") if archs is not None else None,
        qs=tuple(_ints(qs, "--q")) if qs is not None else None,
        ss=tuple(_ints(ss, "--s")) if ss is not None else None,
        layer_counts=tuple(_ints(layers, "--layers")) if layers is not None else None,
        value_widths=(
            tuple(_ints(value_widths, "--value-widths")) if value_widths is not None else None
        ),
        head_counts=tuple(heads) if heads and capacity else None,
        # each family, model and plug-in once, in the order given (as --arch)
        families=once(split_specs(family, "--family")) if family and capacity else None,
        model_plugins=once(model_plugins) or None,
        ranks=tuple(_ints(ranks, "--ranks")) if ranks is not None else None,
        seeds=seeds,
        softmax_seeds=seeds,
        feature_maps=_names(feature_map, "--feature-map"),
        # --arch alone: only its architectures (the plan's default models are not added)
        models=once(models) or (() if archs is not None and capacity else None),
        scales=scales,
        accuracy=accuracy,
        steps=steps,
        softmax_steps=steps,
        lrs=tuple(_floats(lr, "--lr")) if lr is not None else None,
        loss=loss,
        stop_below=stop_below,
        heads=heads[0] if heads and not capacity else None,
        eps=eps,
        dtype=dtype,
        encoding=encoding,
        train_on=train_on,
        triples=triples,
        family_path=None if capacity else family,
        threads=threads,
        allow_large=allow_large or None,
        train_bits=train_bits,
        schedule=schedule,
        train_inputs=train_inputs,
        keep=keep,
        train_rounding=train_rounding,
        qat_from=qat_from,
        weight_l1=weight_l1,
        train_noise=train_noise,
        rebase_at=rebase_at,
        rebase_lr=rebase_lr,
        batch=batch,
    )
    _refuse_unread(plan, cluster)
    if capacity and not plan.allow_large:  # before anything is allocated (#47)
        check_plan_memory(plan, device, weights_dir is not None)
    with training_client(cluster, device, log=_note) as client:
        with render.progress_bar(f"sweep {suite}", 1, plain=client is not None) as update:
            result = run_sweep(
                plan,
                json_path,
                resume,
                device,
                client=client,
                progress=update,
                save_weights=weights_dir,
            )
    _render(result, json_path, plot_path)


#: Options only one suite reads (click's parameter names), refused elsewhere.
_SUITE_ONLY = {
    "qs": "capacity",
    "ss": "capacity",
    "layers": "capacity",
    "value_widths": "capacity",
    "model_plugins": "capacity",
    "archs": "capacity",
    "scales": "ood",
}


def _refuse_foreign(suite: str, family, scales) -> None:
    """Options the chosen suite would ignore, and empty values, are one error line."""
    used = {name for name, only in _SUITE_ONLY.items() if only == suite}
    refuse_unused(used, {name: f"with --suite {only}" for name, only in _SUITE_ONLY.items()})
    if family is not None and not family.strip(" ,"):
        raise SketchsimError("--family is empty")
    if scales is not None and not scales.strip(" ,"):
        raise SketchsimError("--scales is empty")


def _refuse_unread(plan, cluster) -> None:
    """Every option given that the plan's runs would not read is one error line (#47)."""
    from sketchsim.cli.options import given
    from sketchsim.experiments.suite_options import check_given, option_rules

    if cluster is None and given("cluster_timeout"):
        raise SketchsimError(
            "--cluster-timeout applies only with --cluster; this run would ignore it"
        )
    refuse_unused(*option_rules(plan.suite))
    check_given(plan, given)


def _note(msg: str) -> None:
    render.err_console.print(f"[dim]{msg}[/dim]")


def _names(text, flag: str):
    from sketchsim.experiments.plan import once

    return None if text is None else once(split_list(text, flag))


def _render(result, json_path, plot_path):
    from sketchsim.tables.sweep import show_sweep, sweep_title

    show_sweep(render.console, result)
    if plot_path and result.plan.suite != "capacity":
        from sketchsim.experiments.sweep_summary import plot_sweep

        suite = result.plan.suite
        ylabel = "sequence error" if suite == "witness" else "test exact-sequence accuracy"
        threshold = result.plan.accuracy if suite == "ood" else None
        plot_sweep(result.summary, plot_path, ylabel, sweep_title(suite), result.bound, threshold)


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

    from sketchsim.api import reproduce as run
    from sketchsim.experiments.reproduce import Settings

    one_thread_on_cluster(cluster, threads)
    with training_client(cluster, device, log=_note) as client:
        rows = run(
            Path(out_dir),
            quick,
            log=lambda msg: render.err_console.print(f"[dim]{msg}[/dim]"),
            device=device,
            settings=replace(Settings.of(quick), threads=threads),
            client=client,
        )
    from sketchsim.tables.reproduce import show_reproduce

    show_reproduce(render.console, rows, Path(out_dir) / "report.md")


@main.command()
@click.argument("folder", type=click.Path(file_okay=False, exists=True))
@json_option("Write every head's rows here.")
@click.option("--plot", "plot_path", type=PlotPath(), help="Accuracy vs state bits.")
def audit(folder, json_path, plot_path):
    """Bits of attention state each trained head uses (heads kept by sweep --save-weights).

    Quantizes every kernel head's state (numerator and normalizer) to k = 1..16
    bits per coordinate, re-evaluates it on the inputs the sweep judged it on, and
    reports accuracy against state bits beside float32; failing heads are
    re-evaluated in float64 (numerical or representational failure).
    """
    from sketchsim.runs.audit import run as run_audit

    rows = run_audit(folder, json_path=json_path).heads
    from sketchsim.tables.audit import show_audit

    show_audit(render.console, rows)
    if plot_path:
        from sketchsim.runs.plots import plot_audit

        plot_audit(rows, plot_path)
        render.console.print(f"plot written to {plot_path}")
