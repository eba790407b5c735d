"""Commands for codes, witness families and certified rank bounds (THEORY section 4)."""

from __future__ import annotations

import sys

import click

from sketchsim.cli import render
from sketchsim.cli.app import main
from sketchsim.cli.cluster import cluster_option
from sketchsim.cli.options import json_option
from sketchsim.cli.options import plan_default as _D
from sketchsim.cli.paths import OutputPath
from sketchsim.errors import SketchsimError
from sketchsim.runs.bound import BoundPlan


@main.command()
@click.option("--m", "m", type=int, required=True, help="Token width (code length).")
@click.option(
    "--kind",
    type=click.Choice(["hadamard", "golay-octads", "golay-dodecads", "greedy", "random"]),
    default="hadamard",
    show_default=True,
)
@click.option("--d", "d", type=int, help="Minimum distance (greedy, random; default 2*(m//4)).")
@click.option("--w", "w", type=int, help="Weight (greedy, random; default m//2).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed (random).")
@click.option("--out", type=OutputPath((".npy", ".txt")), help="Write the code (.npy, or .txt).")
def codes(m, kind, d, w, seed, out):
    """Build a constant-weight code and print its size, weight and minimum distance."""
    from sketchsim.certify.codes import code_stats, make_code, save_code

    if m < 1:
        raise SketchsimError(f"--m must be >= 1, got {m}")
    if not 0 <= seed < 2**63:
        raise SketchsimError(f"--seed must be in 0..2^63-1, got {seed}")
    source = click.get_current_context().get_parameter_source("seed")
    if kind != "random" and source is click.core.ParameterSource.COMMANDLINE:
        raise SketchsimError(f"--seed applies to random codes; a {kind} code has no randomness")
    code = make_code(kind, m, d, w, seed)
    stats = code_stats(code)
    from sketchsim.tables.certify import show_code

    show_code(render.console, kind, stats)
    if out:
        save_code(code, out)


@main.command()
@click.option("--m", "m", type=int, default=24, show_default=True, help="Token width.")
@click.option(
    "--code",
    "kind",
    type=click.Choice(["hadamard", "golay-octads", "golay-dodecads", "greedy", "random"]),
    default="hadamard",
    show_default=True,
)
@click.option(
    "--codewords",
    type=int,
    default=12,
    show_default=True,
    help="Codewords used (0: all), chosen with the seed.",
)
@click.option("--d", "d", type=int, help="Minimum distance (greedy, random; default 2*(m//4)).")
@click.option("--w", "w", type=int, help="Weight (greedy, random; default m//2).")
@click.option(
    "--complements/--no-complements",
    default=False,
    show_default=True,
    help="hadamard: add the complements of the rows to the code.",
)
@click.option("--chains", is_flag=True, help="Cross long gaps in steps (THEORY Lemma 3).")
@click.option("--both-orders/--no-both-orders", default=True, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option(
    "--packed",
    is_flag=True,
    help="Store tokens as integer keys and certify in blocks (families past the in-memory "
    "limit, up to 10^8 inputs; m <= 64).",
)
@click.option("--out", type=OutputPath((".npz",)), required=True, help="Family .npz file.")
@json_option()
def witness(
    m, kind, codewords, d, w, complements, chains, both_orders, seed, packed, out, json_path
):
    """Build a length-3 witness family from a code and certify it."""
    from sketchsim.runs.witness import WitnessPlan
    from sketchsim.runs.witness import run as run_witness

    plan = WitnessPlan(
        m, kind, codewords, d, w, complements, chains, both_orders, seed, packed, out
    )
    result = run_witness(plan, json_path=json_path)
    from sketchsim.tables.certify import show_witness

    show_witness(render.console, plan, result)


@main.command()
@click.argument("path", type=click.Path(dir_okay=False))
@click.option(
    "--eps",
    "eps_list",
    type=float,
    multiple=True,
    help="Error levels below 1/2 (default 0.1 0.25 0.4 0.49); the limit is always shown.",
)
@click.option(
    "--position-independent",
    is_flag=True,
    help="Certify only heads whose maps ignore position (one order suffices).",
)
@json_option()
@click.option(
    "--certificate",
    "proof_path",
    type=OutputPath((".json",)),
    help="Write the proof at the limit eps -> 1/2 (family, pairs, every chain) for "
    "`sketchsim check-certificate`.",
)
def certify(path, eps_list, position_independent, json_path, proof_path):
    """Certified lower bound on the feature rank r for a length-3 family file.

    The JSON's family_sha256 (also written into --certificate files) is the
    sha256 of the family's tokens as a uint8 array (inputs, 3, m) in C order,
    followed by the scored position in decimal: it covers the inputs and their
    order, not the file's bytes, metadata or targets. check-certificate
    recomputes it from the tokens and inputs in the certificate.
    """
    from sketchsim.runs.certify import CertifyPlan
    from sketchsim.runs.certify import run as run_certify

    plan = CertifyPlan(path, eps_list, position_independent)
    result = run_certify(plan, json_path=json_path, proof_path=proof_path)
    from sketchsim.tables.certify import show_certify

    show_certify(render.console, result, position_independent, proof_path)


@main.command("check-certificate")
@click.argument("path", type=click.Path(dir_okay=False))
def check_certificate(path):
    """Re-verify a certificate file with exact rationals; print the bound it proves.

    Independent of the code that wrote it (sketchsim/certify/check.py imports only
    the standard library). Exit 0 when every step holds; exit 1 naming the first
    step that does not; exit 2 when the file is not a certificate.
    """
    import sys

    from sketchsim.certify.check import (
        CertificateInvalid,
        CertificateMalformed,
        load_certificate,
    )
    from sketchsim.certify.check import (
        check_certificate as run_check,
    )

    try:
        checked = run_check(load_certificate(path))
    except CertificateMalformed as exc:
        raise SketchsimError(str(exc)) from None
    except CertificateInvalid as exc:
        click.echo(f"REJECTED: {exc}", err=True)
        sys.exit(1)
    from sketchsim.tables.certify import show_checked

    show_checked(render.console, checked)


@main.command()
@click.option("--m", "m", type=int, required=True, help="Token width (first).")
@click.option("--to", "m2", type=int, help="Last token width (default: --m).")
@click.option("--step", type=int, default=_D(BoundPlan, "step"), show_default=True,
              help="Step between widths.")  # fmt: skip
@click.option("--seed", type=int, default=_D(BoundPlan, "seed"), show_default=True,
              help="Seed of the random codes.")  # fmt: skip
@click.option(
    "--export",
    "export_dir",
    type=OutputPath(directory=True),
    help="Build each row's witness family (m <= 32), write DIR/bound-m{m}.npz and certify it.",
)
@click.option(
    "--certificates",
    is_flag=True,
    help="With --export: also write DIR/bound-m{m}.cert.json and re-check it (small families).",
)
@json_option()
@cluster_option
def bound(m, m2, step, seed, export_dir, certificates, json_path, cluster):
    """Best certified rank bound per m, its growth, the 2^m endpoint and softmax temperatures."""
    from sketchsim.runs.bound import run as run_bound

    plan = BoundPlan(m, m2, step, seed, export_dir, certificates)
    plan.validate()
    with render.progress_bar("bound", len(plan.widths)) as update:
        result = run_bound(plan, cluster=cluster, progress=update, json_path=json_path)
    from sketchsim.tables.bound import show_bound

    show_bound(render.console, render.err_console, result, export_dir)
    if any(r.status == "below" for r in result.realized):
        sys.exit(1)
