"""``sketchsim transcript``: the header panel, the protocols' table, the per-layer table
and the notes under them, from a :class:`~sketchsim.runs.transcript.TranscriptRun`."""

from __future__ import annotations

from rich import box
from rich.panel import Panel
from rich.table import Table

from sketchsim.tables.common import verdict

__all__ = ["show_header", "show_transcript"]


def show_header(console, family, mode: str, inputs: int, seed: int) -> None:
    """The panel printed before the protocols run: the family, the bound, the inputs."""
    console.print(
        Panel.fit(
            f"{family.describe()}: m = {family.m} bits, N = {family.n_tokens} tokens, "
            f"answers in 0..{family.s}\nbound q*log2(s+1) = [bold]{family.bound_bits:.2f}[/bold] "
            f"bits; {mode} mode, {inputs:,} inputs, seed {seed}",
            title=f"sketchsim transcript (family {family.name})",
        )
    )


def _answers_text(values) -> str:
    return "".join(map(str, values)) if max(values, default=0) < 10 else ",".join(map(str, values))


def _entropy_cell(bits: float, halfwidth: float | None) -> str:
    """An entry entropy and half its interval: ``15.70 ± 0.77`` (no interval: the value)."""
    if halfwidth is None:
        return f"{bits:,.2f}"
    return f"{bits:,.2f} ± {halfwidth:,.2f}"


def _ratio_cell(v) -> str:
    """The entry entropy / bound cell of :class:`~sketchsim.runs.transcript.ProtocolVerdicts`."""
    if v.entropy_verdict is None:
        return "-"
    if v.entropy_verdict == "below":
        return "[red]below[/red]"
    colour = "yellow" if v.entropy_verdict == "under" else "green"
    return f"[{colour}]{v.entropy_ratio:.2f}x[/{colour}]"


def _decodable_cell(value: bool | None) -> str:
    """The decodable verdict in a few words (the reason is printed under the table)."""
    if value is True:
        return "[green]yes[/green]"
    if value is None:
        return "[yellow]not refuted[/yellow]"
    return "[red]no[/red]"


def show_transcript(console, result, verbose: bool = False) -> None:
    """Print a :class:`~sketchsim.runs.transcript.TranscriptRun`: the values it holds."""
    exhaustive = result.exact
    bound = result.bound_bits
    n = result.inputs_run
    conf = f"{100 * result.confidence:.0f}%"
    table = Table(
        box=box.SIMPLE_HEAD,
        collapse_padding=True,
        pad_edge=False,
        title=f"bound {bound:,.2f} bits, {n:,} "
        + ("inputs (all)" if exhaustive else "sampled inputs"),
        caption=(
            "decodable: yes = proved on every input; no = refuted (why: below); entropy x "
            "bound: entry entropy / bound"
            if exhaustive
            else f"entry entropy: Miller-Madow estimate ± half its {conf} interval; correct: "
            f"fraction of the {n:,} sampled inputs; decodable: not refuted = no collision "
            "among them, no = refuted (why: below); entropy x bound: entry entropy / bound"
        ),
    )
    cols = ["protocol", "declared bits", "used bits", "entry entropy"]
    if exhaustive:
        cols += ["log2 distinct", "entropy"]  # the count itself is in the JSON
    cols += ["correct", "decodable", ">= bound", "entropy x bound"]
    for col in cols:
        protocol = col == "protocol"
        table.add_column(
            col,
            justify="left" if protocol else "right",
            no_wrap=protocol,
            min_width=max(map(len, col.split())),  # headers wrap at spaces, never cut
        )
    verdicts = result.verdicts()
    for v in verdicts:
        r = v.entry
        slow = " [yellow](python)[/yellow]" if not v.jit else ""
        row = [
            v.name + slow,
            f"{r['declared_bits']:,.2f}",
            f"{r['used_bits']:,.2f}" if "used_bits" in r else "-",
            _entropy_cell(r["entry_entropy_bits"], v.entropy_halfwidth)
            if "entry_entropy_bits" in r
            else "-",
        ]
        if exhaustive:
            row += [
                f"{r['log2_distinct']:.2f}",
                f"{r['entropy_bits']:.2f}",
            ]
        row += [
            verdict(
                v.correct,
                f"{r['correct_fraction']:.4f}",
                f"{r['correct_fraction']:.4f}",
            ),
            _decodable_cell(v.decodable),
            verdict(r["meets_bound"]),
            _ratio_cell(v),
        ]
        table.add_row(*row)
    console.print(table)
    if verbose:
        _render_layers(console, verdicts)
    if exhaustive:
        console.print(
            f"[dim]exhaustive: all {n:,} inputs were run, so 'correct 1.0000' is correct on "
            "every input and decodable 'yes' is a proof (no two inputs with different answers "
            "share a transcript; distinct transcripts by 128-bit fingerprint, collisions "
            "re-checked on exact transcripts)[/dim]"
        )
    else:
        power = result.collision_reach
        reach = "-" if power is None else f"{power:.2g}"
        console.print(
            f"[dim]sampled: {n:,} inputs run, {result.family.size_text()} inputs exist. correct "
            f"1.0000 = correct on the {n:,} sampled inputs (the JSON has the 95% upper "
            "bound on the error rate), not on every input. decodable 'not refuted' = "
            f"not refuted ({n:,} inputs, "
            f"collision check reach {reach}): no two sampled inputs with different answers "
            "share a transcript; merges of two draws at least that likely would show, rarer "
            "ones need not. 'no' = refuted, by a verified collision or by the entropy argument "
            f"(the upper end of the entry entropy's {conf} interval below the bound: cannot be "
            "correct on this distribution), named below[/dim]"
        )
    for v in verdicts:
        r, name = v.entry, v.name
        if v.refuted_otherwise:
            console.print(f"[bold]{name}[/bold]: not decodable, {v.decodable_reason}")
        if v.decodable_not_decoded:
            console.print(
                f"[bold]{name}[/bold]: decodable but not decoded: no two inputs with different "
                "answers share a transcript, so some readout is right; this protocol's is not"
            )
        c = r["collision"]
        if c:
            console.print(
                f"[bold]{name}[/bold]: not decodable: inputs #{c['inputs'][0]} and "
                f"#{c['inputs'][1]} have the same transcript but answers differ at query "
                f"{c['position']}; the protocol answers {c['protocol_answer']} on both\n"
                f"  t = {_answers_text(c['answers_a'])}\n  t = {_answers_text(c['answers_b'])}"
            )
        elif r["first_failure"]:
            f = r["first_failure"]
            console.print(
                f"[bold]{name}[/bold]: {r['wrong_inputs']:,} wrong inputs; first #{f['input']}, "
                f"query {f['position']}: target {f['target']}, answered {f['answer']}"
            )
        if v.entropy_verdict == "below":
            upper = (
                f" (upper end of its {conf} interval {v.entropy_upper:,.2f})"
                if v.entropy_upper is not None
                else ""
            )
            console.print(
                f"[bold]{name}[/bold]: entry entropy {r['entry_entropy_bits']:,.2f}{upper} < "
                f"bound {bound:,.2f} bits: [red]cannot be correct on this distribution[/red]; "
                "not decodable (the entropy argument)"
            )
        if v.undersampled:
            console.print(
                f"[dim]{name}: {v.undersampled:,} entries take more than n/10 values; "
                "their entropy estimates are unreliable (more samples help)[/dim]"
            )
        if v.correct_below_bound:
            note = (
                "[red]THEOREM VIOLATED: correct on every input below the bound[/red]"
                if exhaustive
                else "[yellow]below the bound but no failure among the sampled inputs[/yellow]"
            )
            console.print(f"[bold]{name}[/bold]: {note}")


def _render_layers(console, verdicts) -> None:
    table = Table(title="per layer")
    for col in ("protocol", "layer", "channel", "speakers", "declared", "used", "entry entropy"):
        table.add_column(col, justify="left" if col in ("protocol", "channel") else "right")
    for v in verdicts:
        layers = v.entry.get("layers", [])
        for i, (lay, half) in enumerate(zip(layers, v.layer_halfwidths, strict=True), 1):
            table.add_row(
                v.name,
                str(i),
                lay["channel"],
                f"{lay['speakers']:,}",
                f"{lay['bits']:,.2f}",
                f"{lay['used_bits']:,.2f}" if "used_bits" in lay else "-",
                _entropy_cell(lay["entry_entropy_bits"], half)
                if "entry_entropy_bits" in lay
                else "-",
            )
    console.print(table)
