"""``sketchsim certify``: the certified rank per head error, from a
:class:`~sketchsim.runs.certify.CertifyRun`."""

from __future__ import annotations

from rich.panel import Panel
from rich.table import Table

__all__ = ["show_certify", "show_checked", "show_code", "show_witness"]


def show_certify(console, result, position_independent: bool, proof_path=None) -> None:
    """One row per head-error level; the proof file's line when one was written."""
    cert = result.certificate
    table = Table(
        caption=f"{cert.inputs:,} inputs, m = {cert.m}, {cert.queries} queries, "
        f"{cert.edges:,} domination edges; maps: "
        + (
            "position-independent"
            if position_independent
            else "position-dependent (both orders needed)"
        )
    )
    for col in ("head error", "pairs", "n^2 / (n + sum P^2)", "certified r >="):
        table.add_column(col, justify="right")
    for key in cert.certified_rank:
        label = "< 1/2 (limit)" if key == "0.5" else f"<= {key}"
        table.add_row(
            label,
            str(cert.pairs[key]),
            f"{cert.bound[key]:.3f}",
            f"[bold]{cert.certified_rank[key]}[/bold]",
        )
    console.print(table)
    if proof_path:
        proof = result.proof
        console.print(
            f"certificate written to {proof_path}: {proof['claimed']['pairs']} pairs, "
            f"{len(proof['chains']):,} chains, r >= {proof['claimed']['certified_rank']} "
            "(check it with `sketchsim check-certificate`)"
        )


def show_code(console, kind: str, stats: dict) -> None:
    """A code's size, weights and minimum distance (:func:`~sketchsim.certify.codes.code_stats`)."""
    from sketchsim.certify.codes import STATS_MAX_WORDS

    table = Table(title=f"{kind} code")
    for col in ("m", "size", "weight", "min distance"):
        table.add_column(col, justify="right")
    table.add_row(
        str(stats["m"]),
        f"{stats['size']:,}",
        ",".join(map(str, stats["weights"])),
        str(stats["min_distance"])
        if stats["min_distance"] is not None
        else ("-" if stats["size"] < 2 else f"not computed (> {STATS_MAX_WORDS:,} words)"),
    )
    console.print(table)


def show_witness(console, plan, result) -> None:
    """The witness family built (:class:`~sketchsim.runs.witness.WitnessPlan`) and its bound."""
    from sketchsim.runs.witness import PAPER_WITNESS_BOUND, PAPER_WITNESS_INPUTS

    cert = result.certificate
    console.print(
        Panel.fit(
            f"{result.inputs:,} inputs of length 3, m = {plan.m}, {result.meta['codewords']} "
            f"codewords of a {plan.code} code{' with chains' if plan.chains else ''}"
            f"{' (packed)' if plan.packed else ''}\n"
            f"certified r >= [bold]{result.certified_rank}[/bold] for every head with error "
            f"< 1/2 (bound {cert.bound['0.5']:.3f} from {cert.pairs['0.5']} pairs)\n"
            f"paper's witness suite: {PAPER_WITNESS_INPUTS:,} inputs, r >= {PAPER_WITNESS_BOUND}",
            title=f"sketchsim witness -> {plan.out}",
        )
    )


def show_checked(console, checked) -> None:
    """What a certificate that re-checked proves
    (:func:`~sketchsim.certify.check.check_certificate`)."""
    kind = "strictly below 1/2" if checked.strict else f"at most {checked.eps}"
    console.print(
        f"valid: {checked.pairs} pairs, {checked.chains:,} chains checked; every head with "
        f"error {kind} has r >= {checked.rank} (bound {checked.bound} = "
        f"{float(checked.bound):.4f})"
    )
