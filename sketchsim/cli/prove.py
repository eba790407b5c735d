"""``prove`` and ``check-proof``: right on every input of the family, decided (theory.md 5.5)."""

from __future__ import annotations

import click

from sketchsim.cli import render
from sketchsim.cli.app import main
from sketchsim.cli.options import json_option
from sketchsim.cli.paths import OutputPath
from sketchsim.errors import SketchsimError


@main.command()
@click.argument("weights", type=click.Path(dir_okay=False))
@click.option("--bits", type=int, required=True, help="Register bits K (1..32).")
@click.option("--rounding", type=click.Choice(["every", "cut"]), default="every",
              show_default=True, help="Every update in registers, or the cut only.")  # fmt: skip
@click.option("--budget", type=float, default=60.0, show_default=True,
              help="Seconds before the verdict is unknown.")  # fmt: skip
@json_option()
@click.option("--proof", "proof_path", type=OutputPath((".json",)),
              help="Write the proof (when proved) for `sketchsim check-proof`.")  # fmt: skip
def prove(weights, bits, rounding, budget, json_path, proof_path):
    """Prove or refute that a causal weights file answers every input of its family right.

    Bounds the model over boxes of answer values and splits boxes until every query's
    answer is decided (docs/theory.md 5.5). Verdicts: proved, refuted (a counterexample
    the engine answers wrong) or unknown (the budget ran out). Exit 0 for any verdict.
    """
    from sketchsim.runs.prove import run

    with render.progress_bar("prove", 1) as update:
        result = run(weights, bits, rounding, budget, json_path, proof_path, progress=update)
    from sketchsim.tables.prove import show_prove

    show_prove(render.console, result)


@main.command("check-proof")
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("--weights", type=click.Path(dir_okay=False), help="Also check it is this file's.")
def check_proof(path, weights):
    """Re-verify a proof file leaf by leaf with the standard library; exit 2 when invalid.

    Shares no code with the prover (sketchsim/prove/check_proof.py); NumPy only checks that
    the layout is the family's.
    """
    from sketchsim.prove.check_proof import ProofInvalid
    from sketchsim.runs.prove import check

    try:
        checked = check(path, weights)
    except ProofInvalid as exc:
        raise SketchsimError(f"{path}: invalid proof: {exc}") from None
    from sketchsim.tables.prove import show_checked

    show_checked(render.console, checked)
