"""``sketchsim ablation``: why the learned softmax head failed, and the OOD screens.

The run is :mod:`sketchsim.runs.ablation` (its plans validate, train and write
``--json``; the training is :mod:`sketchsim.experiments.ablation`); this module
parses the options and prints the markdown tables docs/results.md quotes.
"""

from __future__ import annotations

import click

from sketchsim.cli.app import main
from sketchsim.cli.options import json_option, parse_list
from sketchsim.cli.options import plan_default as _D
from sketchsim.runs.ablation import AblationPlan, ScreenMapsPlan, ScreenStopPlan


def _screen_maps(plan, json_path) -> None:
    from sketchsim.runs.ablation import run
    from sketchsim.tables.ablation import maps_row_line, maps_table

    plan.validate()  # a bad scale is refused before any output
    print(f"validation split of the train pool of {plan.scale} ({plan.seeds} seed(s))")
    result = run(
        plan, json_path=json_path, progress=lambda row: print(maps_row_line(row), flush=True)
    )
    print("\n".join(maps_table(plan, result)))


def _screen_stop(plan, json_path) -> None:
    from sketchsim.runs.ablation import run
    from sketchsim.tables.ablation import stop_row_line, stop_table

    plan.validate()
    print(f"validation splits of the train pools of {plan.scales} ({plan.seeds} seed(s))")
    result = run(
        plan, json_path=json_path, progress=lambda row: print(stop_row_line(row), flush=True)
    )
    print("\n".join(stop_table(plan, result)))


def _ablation(plan, json_path) -> None:
    from sketchsim.runs.ablation import run
    from sketchsim.tables.ablation import ablation_head, ablation_row

    def start(inputs: int, base: float) -> None:
        print("\n".join(ablation_head(inputs, base)))

    def variant(v, got) -> None:
        print(ablation_row(plan, v, got), flush=True)

    run(plan, json_path=json_path, on_start=start, on_variant=variant)


@main.command()
@click.option("--seeds", type=int, default=_D(AblationPlan, "seeds"), show_default=True)
@click.option("--steps", type=int, default=_D(AblationPlan, "steps"), show_default=True)
@click.option("--lr", type=float, default=_D(ScreenMapsPlan, "lr"), show_default=True,
              help="With the screens.")  # fmt: skip
@click.option("--triples", type=int, default=_D(AblationPlan, "triples"), show_default=True)
@click.option("--screen-maps", metavar="M:POOL:TRIPLES", help="Compare feature maps on validation.")
@click.option("--ranks", default=_D(ScreenMapsPlan, "ranks", joined=True), show_default=True,
              help="With --screen-maps; with --screen-stop, the elu1 head's one rank "
              "(default there 16; 0: softmax alone).")  # fmt: skip
@click.option("--screen-stop", metavar="MARGINS", help="Comma list of stop margins to screen.")
@click.option(
    "--scales",
    default=_D(ScreenStopPlan, "scales"),
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
    from sketchsim.cli.options import given, refuse_unused
    from sketchsim.errors import SketchsimError
    from sketchsim.experiments import require_torch
    from sketchsim.runs.ablation import (
        AblationPlan,
        ScreenMapsPlan,
        ScreenStopPlan,
        check_budget,
    )

    for flag, text in (("--screen-maps", screen_maps), ("--screen-stop", screen_stop)):
        if text is not None and not text.strip():
            raise SketchsimError(f"{flag} is empty")
    if screen_maps and screen_stop:
        raise SketchsimError("--screen-maps and --screen-stop are two runs; give one")
    used = {"seeds", "steps", "json_path"}
    used |= (
        {"screen_maps", "ranks", "lr"}
        if screen_maps
        else ({"screen_stop", "scales", "lr", "ranks"} if screen_stop else {"triples"})
    )
    refuse_unused(
        used,
        {
            "lr": "with --screen-maps or --screen-stop",
            "ranks": "with --screen-maps or --screen-stop",
            "scales": "with --screen-stop",
            "triples": "without a screen (the screens draw their own)",
        },
    )
    check_budget(seeds, steps, lr, triples)
    require_torch()
    if screen_maps:
        rank_list = tuple(parse_list(ranks, int, "--ranks", "integers"))
        _screen_maps(ScreenMapsPlan(screen_maps, rank_list, seeds, steps, lr), json_path)
    elif screen_stop:
        margins = tuple(parse_list(screen_stop, float, "--screen-stop", "numbers"))
        rank = parse_list(ranks, int, "--ranks", "integers") if given("ranks") else [16]
        if len(rank) != 1:
            raise SketchsimError("--ranks with --screen-stop is one rank (0: softmax alone)")
        _screen_stop(ScreenStopPlan(margins, scales, seeds, steps, lr, rank[0]), json_path)
    else:
        _ablation(AblationPlan(seeds, steps, triples), json_path)
