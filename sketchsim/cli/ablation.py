"""``sketchsim ablation``: why the learned softmax head failed, and the OOD screens.

The library part is :mod:`sketchsim.experiments.ablation`; this module parses,
prints the markdown tables docs/results.md quotes, and writes ``--json``.
"""

from __future__ import annotations

from types import SimpleNamespace

import click
import numpy as np

from sketchsim.cli.app import main
from sketchsim.cli.options import json_option, parse_list
from sketchsim.config import OOD_STOP_BELOW

#: Largest seeds, steps and triples an ablation run accepts (each trains seeds x variants heads).
ABLATION_MAX_SEEDS = 1_000
ABLATION_MAX_STEPS = 10_000_000
ABLATION_MAX_TRIPLES = 10_000_000


def _check_budget(args) -> None:
    """The options both screens share: seeds, steps and the learning rate."""
    import math

    from sketchsim.errors import SketchsimError

    if args.seeds < 1 or args.steps < 1:
        raise SketchsimError("--seeds and --steps must be >= 1")
    for flag, value, limit in (
        ("--seeds", args.seeds, ABLATION_MAX_SEEDS),
        ("--steps", args.steps, ABLATION_MAX_STEPS),
        ("--triples", args.triples, ABLATION_MAX_TRIPLES),
    ):
        if value > limit:
            raise SketchsimError(f"{flag} = {value:,} is above the limit {limit:,}")
    if args.triples < 1:
        raise SketchsimError(f"--triples must be >= 1, got {args.triples}")
    if not (math.isfinite(args.lr) and 0 < args.lr <= 1e6):
        raise SketchsimError(f"--lr must be in (0, 1e6], got {args.lr}")


def _save(path, command: str, params: dict, results: dict) -> None:
    """Write a screen's rows (each with its seed) atomically, with parameters and versions."""
    from sketchsim.results import result_payload, write_json_atomic

    write_json_atomic(path, result_payload(command, params, results))


def _screen_main(args) -> None:
    from sketchsim.errors import SketchsimError
    from sketchsim.experiments.ablation import screen_maps
    from sketchsim.experiments.suites import parse_scales

    ranks = tuple(parse_list(args.ranks, int, "--ranks", "integers"))
    if min(ranks) < 1:
        raise SketchsimError("--ranks must be >= 1")
    _check_budget(args)
    parse_scales(args.screen_maps)  # a bad scale is refused before any output
    print(f"validation split of the train pool of {args.screen_maps} ({args.seeds} seed(s))")
    rows = screen_maps(
        args.screen_maps,
        ranks,
        args.seeds,
        steps=args.steps,
        lr=args.lr,
        progress=lambda row: print(
            f"  {row['feature_map']} r={row['rank']} seed {row['seed']}: "
            f"{row['validation_accuracy']:.3f} ({row['seconds']:.0f} s)",
            flush=True,
        ),
    )
    print("| map | " + " | ".join(f"r = {r}" for r in ranks) + " |")
    print("|---|" + "---|" * len(ranks))
    for fmap in dict.fromkeys(row["feature_map"] for row in rows):
        cells = []
        for r in ranks:
            accs = [
                x["validation_accuracy"] for x in rows if (x["feature_map"], x["rank"]) == (fmap, r)
            ]
            cells.append(f"{np.mean(accs):.3f}")
        print(f"| {fmap} | " + " | ".join(cells) + " |")
    if args.json:
        params = {
            "scale": args.screen_maps,
            "ranks": list(ranks),
            "seeds": args.seeds,
            "steps": args.steps,
            "lr": args.lr,
            "stop_below": OOD_STOP_BELOW,
        }
        _save(args.json, "ablation --screen-maps", params, {"rows": rows})


def _screen_stop_main(args) -> None:
    from sketchsim.errors import SketchsimError
    from sketchsim.experiments.ablation import pick_margin, screen_stops
    from sketchsim.experiments.suites import parse_scales

    margins = tuple(parse_list(args.screen_stop, float, "--screen-stop", "numbers"))
    if not all(0 < s <= 0.5 for s in margins):
        raise SketchsimError("stop margins must be in (0, 0.5]")
    _check_budget(args)
    parse_scales(args.scales)
    print(f"validation splits of the train pools of {args.scales} ({args.seeds} seed(s))")
    rows = screen_stops(
        args.scales,
        margins,
        args.seeds,
        steps=args.steps,
        lr=args.lr,
        progress=lambda row: print(
            f"  {row['scale']} {row['model']} stop {row['stop_below']} seed {row['seed']}: "
            f"{row['validation_accuracy']:.3f} after {row['steps']} steps",
            flush=True,
        ),
    )
    scales = list(dict.fromkeys(row["scale"] for row in rows))
    print("| model | stop below | " + " | ".join(scales) + " | worst |")
    print("|---|---|" + "---|" * (len(scales) + 1))
    for model, s in dict.fromkeys((row["model"], row["stop_below"]) for row in rows):
        cells = []
        for sc in scales:
            accs = [
                x["validation_accuracy"]
                for x in rows
                if (x["model"], x["stop_below"], x["scale"]) == (model, s, sc)
            ]
            cells.append(" / ".join(f"{a:.3f}" for a in accs))
        worst = min(
            x["validation_accuracy"] for x in rows if (x["model"], x["stop_below"]) == (model, s)
        )
        print(f"| {model} | {s:g} | " + " | ".join(cells) + f" | {worst:.3f} |")
    kernel = [row for row in rows if row["model"] == "kernel"]
    if kernel:
        full = all(row["steps"] == args.steps for row in kernel)
        print(
            f"kernel runs that used all {args.steps} steps at the largest margin: "
            f"{sum(row['steps'] == args.steps for row in kernel)} of {len(kernel)}"
            + (" (so no margin changes them)" if full else "")
        )
    chosen = pick_margin(rows)
    print(f"chosen stop margin (highest worst validation accuracy): {chosen:g}")
    if args.json:
        params = {
            "scales": args.scales,
            "margins": list(margins),
            "seeds": args.seeds,
            "steps": args.steps,
            "lr": args.lr,
        }
        _save(args.json, "ablation --screen-stop", params, {"rows": rows, "chosen": chosen})


@main.command()
@click.option("--seeds", type=int, default=2, show_default=True)
@click.option("--steps", type=int, default=2000, show_default=True)
@click.option("--lr", type=float, default=0.01, show_default=True, help="With the screens.")
@click.option("--triples", type=int, default=4000, show_default=True)
@click.option("--screen-maps", metavar="M:POOL:TRIPLES", help="Compare feature maps on validation.")
@click.option("--ranks", default="16,64", show_default=True, help="With --screen-maps.")
@click.option("--screen-stop", metavar="MARGINS", help="Comma list of stop margins to screen.")
@click.option(
    "--scales",
    default="8:64:2000,10:128:2000,12:256:2000",
    show_default=True,
    help="With --screen-stop.",
)
@json_option("Write the rows here.")
def ablation(seeds, steps, lr, triples, screen_maps, ranks, screen_stop, scales, json_path):
    """The softmax ablation on the witness family, or a validation screen (torch extra).

    Without a screen: trains the softmax head under each training variant and
    prints its error on the witness family beside the best constant-per-query
    answer.  ``--screen-maps`` compares the nonnegative feature maps, and
    ``--screen-stop`` the OOD stop margins, on validation splits drawn from the
    OOD train pools only (never the test pool).
    """
    from sketchsim.cli.options import refuse_unused
    from sketchsim.errors import SketchsimError
    from sketchsim.experiments import require_torch

    for flag, text in (("--screen-maps", screen_maps), ("--screen-stop", screen_stop)):
        if text is not None and not text.strip():
            raise SketchsimError(f"{flag} is empty")
    if screen_maps and screen_stop:
        raise SketchsimError("--screen-maps and --screen-stop are two runs; give one")
    used = {"seeds", "steps", "json_path"}
    used |= (
        {"screen_maps", "ranks", "lr"}
        if screen_maps
        else ({"screen_stop", "scales", "lr"} if screen_stop else {"triples"})
    )
    refuse_unused(
        used,
        {
            "lr": "with --screen-maps or --screen-stop",
            "ranks": "with --screen-maps",
            "scales": "with --screen-stop",
            "triples": "without a screen (the screens draw their own)",
        },
    )
    _check_budget(SimpleNamespace(seeds=seeds, steps=steps, lr=lr, triples=triples))
    torch = require_torch()
    from sketchsim.experiments.ablation import run_ablation

    args = SimpleNamespace(
        seeds=seeds,
        steps=steps,
        lr=lr,
        triples=triples,
        screen_maps=screen_maps,
        ranks=ranks,
        screen_stop=screen_stop,
        scales=scales,
        json=json_path,
    )
    torch.set_num_threads(1)
    if args.screen_maps or args.screen_stop:
        (_screen_main if args.screen_maps else _screen_stop_main)(args)
        return

    def start(inputs: int, base: float) -> None:
        print(f"witness family: {inputs} inputs; const-per-query MSE {base:.2f}")
        print("| training | seeds | family sequence error | family max error | family MSE |")
        print("|---|---|---|---|---|")

    def variant(v, got) -> None:
        seq = ", ".join(f"{g['family_sequence_error']:.3f}" for g in got)
        mx = ", ".join(f"{g['family_max_abs_error']:.2f}" for g in got)
        mse = ", ".join(f"{g['family_mse']:.2f}" for g in got)
        print(f"| {v.name} | {args.seeds} | {seq} | {mx} | {mse} |", flush=True)

    result = run_ablation(args.seeds, args.steps, args.triples, start, variant)
    base, rows = result["baseline_mse"], result["rows"]
    if args.json:
        params = {"seeds": args.seeds, "steps": args.steps, "triples": args.triples}
        _save(args.json, "ablation", params, {"baseline_mse": base, "rows": rows})
