"""``sketchsim protocols`` and ``sketchsim transcript``: the main job."""

from __future__ import annotations

from contextlib import ExitStack

import click
from rich import box
from rich.table import Table

from sketchsim.cli import render
from sketchsim.cli.app import main
from sketchsim.cli.cluster import cluster_option
from sketchsim.cli.familyopts import render_header
from sketchsim.cli.options import check_resume, json_option, quiet_option, resume_option


@main.command()
def protocols():
    """List every protocol found: built-ins, installed plug-ins."""
    from sketchsim.sketch.plugins import discover

    table = Table(title="sketch protocols")
    for col in ("name", "source", "description", "parameters"):
        table.add_column(col)
    for item in discover():
        if item.protocol is None:
            table.add_row(item.name, item.source, f"[red]{item.error}[/red]", "")
            continue
        params = ", ".join(p.describe() for p in item.protocol.params) or "-"
        table.add_row(item.name, item.source, item.protocol.description, params)
    render.console.print(table)


def _answers_text(values) -> str:
    return "".join(map(str, values)) if max(values, default=0) < 10 else ",".join(map(str, values))


@main.command()
@click.option("--q", "q", type=int, default=64, show_default=True, help="Independent answers.")
@click.option("--s", "s", type=int, default=7, show_default=True, help="Answers lie in 0..s.")
@click.option(
    "--protocol",
    "specs",
    multiple=True,
    help="NAME[:k=v,...], path/file.py:NAME[:...] or pkg.module:NAME[:...]; repeatable. "
    "Default: a built-in set.",
)
@click.option(
    "--samples", type=int, default=100_000, show_default=True, help="Inputs drawn in sampled mode."
)
@click.option(
    "--exhaustive/--sampled",
    default=None,
    help="Enumerate all (s+1)^q inputs (default when at most 2^20).",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Bit layout and sampling.")
@json_option("Write results here.")
@resume_option("Keep protocols already measured in --json.")
@quiet_option
@click.option(
    "--family",
    "family_spec",
    default="hard",
    show_default=True,
    help="Input family: NAME[:k=v,...], path/file.py:NAME or pkg.module:NAME "
    "(see `sketchsim families`).",
)
@click.option("--verbose", is_flag=True, help="Per-layer declared, used and entry-entropy bits.")
@cluster_option
def transcript(
    q, s, specs, samples, exhaustive, seed, json_path, resume, quiet, family_spec, verbose, cluster
):
    """Measure transcript bits of sketch protocols against the bound q*log2(s+1)."""
    from sketchsim.runs.transcript import TranscriptPlan
    from sketchsim.runs.transcript import run as run_transcript

    check_resume(resume, json_path)
    plan = TranscriptPlan(q, s, tuple(specs), family_spec, samples, exhaustive, seed)
    with ExitStack() as stack:
        bars = _Bars(stack, not quiet, plain=cluster is not None)
        result = run_transcript(
            plan,
            resume=json_path if resume else None,
            checkpoint=json_path,
            cluster=cluster,
            progress=bars.update,
            log=_dim,
            on_start=lambda r: render_header(r.family, r.mode, r.inputs, seed),
            on_protocol=None if quiet else _done_line(json_path),
        )
    _render_transcript(result, verbose)


def _dim(msg: str) -> None:
    render.err_console.print(f"[dim]{msg}[/dim]")


def _done_line(json_path):
    """One line per protocol, also when stderr is not a terminal."""

    def line(spec: str, entry: dict, resumed: bool) -> None:
        if resumed:
            _dim(f"{spec}: resumed from {json_path}")
        else:
            _dim(f"{spec}: {entry['inputs']:,} inputs in {entry['seconds']:.1f} s")

    return line


class _Bars:
    """One progress bar per protocol, opened when its first update arrives."""

    def __init__(self, stack: ExitStack, enabled: bool, plain: bool):
        self.stack, self.enabled, self.plain = stack, enabled, plain
        self.spec, self.bar, self.inner = None, None, None

    def update(self, spec: str, done: int, total: int) -> None:
        if spec != self.spec:
            if self.inner is not None:
                self.inner.close()
            self.inner = ExitStack()
            self.spec = spec
            self.bar = self.inner.enter_context(
                render.progress_bar(spec, total, self.enabled, plain=self.plain)
            )
            self.stack.callback(self.inner.close)
        self.bar(done, total)


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


def _render_transcript(result, verbose: bool = False) -> None:
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
            render.verdict(
                v.correct,
                f"{r['correct_fraction']:.4f}",
                f"{r['correct_fraction']:.4f}",
            ),
            _decodable_cell(v.decodable),
            render.verdict(r["meets_bound"]),
            _ratio_cell(v),
        ]
        table.add_row(*row)
    render.console.print(table)
    if verbose:
        _render_layers(verdicts)
    if exhaustive:
        render.console.print(
            f"[dim]exhaustive: all {n:,} inputs were run, so 'correct 1.0000' is correct on "
            "every input and decodable 'yes' is a proof (no two inputs with different answers "
            "share a transcript; distinct transcripts by 128-bit fingerprint, collisions "
            "re-checked on exact transcripts)[/dim]"
        )
    else:
        power = result.collision_reach
        reach = "-" if power is None else f"{power:.2g}"
        render.console.print(
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
            render.console.print(f"[bold]{name}[/bold]: not decodable, {v.decodable_reason}")
        if v.decodable_not_decoded:
            render.console.print(
                f"[bold]{name}[/bold]: decodable but not decoded: no two inputs with different "
                "answers share a transcript, so some readout is right; this protocol's is not"
            )
        c = r["collision"]
        if c:
            render.console.print(
                f"[bold]{name}[/bold]: not decodable: inputs #{c['inputs'][0]} and "
                f"#{c['inputs'][1]} have the same transcript but answers differ at query "
                f"{c['position']}; the protocol answers {c['protocol_answer']} on both\n"
                f"  t = {_answers_text(c['answers_a'])}\n  t = {_answers_text(c['answers_b'])}"
            )
        elif r["first_failure"]:
            f = r["first_failure"]
            render.console.print(
                f"[bold]{name}[/bold]: {r['wrong_inputs']:,} wrong inputs; first #{f['input']}, "
                f"query {f['position']}: target {f['target']}, answered {f['answer']}"
            )
        if v.entropy_verdict == "below":
            upper = (
                f" (upper end of its {conf} interval {v.entropy_upper:,.2f})"
                if v.entropy_upper is not None
                else ""
            )
            render.console.print(
                f"[bold]{name}[/bold]: entry entropy {r['entry_entropy_bits']:,.2f}{upper} < "
                f"bound {bound:,.2f} bits: [red]cannot be correct on this distribution[/red]; "
                "not decodable (the entropy argument)"
            )
        if v.undersampled:
            render.console.print(
                f"[dim]{name}: {v.undersampled:,} entries take more than n/10 values; "
                "their entropy estimates are unreliable (more samples help)[/dim]"
            )
        if v.correct_below_bound:
            note = (
                "[red]THEOREM VIOLATED: correct on every input below the bound[/red]"
                if exhaustive
                else "[yellow]below the bound but no failure among the sampled inputs[/yellow]"
            )
            render.console.print(f"[bold]{name}[/bold]: {note}")


def _render_layers(verdicts) -> None:
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
    render.console.print(table)
