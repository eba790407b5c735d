"""Command-line interface: thin click commands that parse, call the library, render."""

from __future__ import annotations

import sys

import click
from rich.panel import Panel
from rich.table import Table

import sketchsim
from sketchsim import report
from sketchsim.attention import CONSTRUCTIONS, softmax_threshold
from sketchsim.errors import SketchsimError


class SketchsimGroup(click.Group):
    """A click group whose errors are one line on stderr with exit code 2."""

    def main(self, args=None, prog_name=None, **extra):
        extra.pop("standalone_mode", None)
        try:
            rv = super().main(args=args, prog_name=prog_name, standalone_mode=False, **extra)
        except click.exceptions.Exit as exc:
            sys.exit(exc.exit_code)
        except click.exceptions.Abort:
            report.err_console.print("aborted")
            sys.exit(1)
        except click.ClickException as exc:
            _fail(exc.format_message())
        except SketchsimError as exc:
            _fail(str(exc))
        sys.exit(rv if isinstance(rv, int) else 0)


def _fail(message: str) -> None:
    message = " ".join(str(message).split())
    click.echo(f"error: {message}", err=True)
    sys.exit(2)


@click.group(cls=SketchsimGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(sketchsim.__version__, prog_name="sketchsim")
def main():
    """Sketch simulator for kernel attention on Boolean Min-IP.

    Exhaustive checks of attention constructions, transcript-bit measurements of
    multilayer sketch protocols, and certified feature-rank bounds.
    """


def _positive(name):
    def check(ctx, param, value):
        if value is not None and value <= 0:
            raise click.BadParameter(f"{name} must be > 0, got {value}", param_hint=f"--{name}")
        return value

    return check


@main.command()
@click.option("--m", "m", type=int, default=8, show_default=True, help="Token width m.")
@click.option("--n", "n", type=int, default=3, show_default=True, help="Sequence length N.")
@click.option(
    "--construction",
    type=click.Choice(CONSTRUCTIONS),
    default="softmax",
    show_default=True,
    help="Head to check (THEORY section 3).",
)
@click.option(
    "--beta",
    type=float,
    default=2.0,
    show_default=True,
    callback=_positive("beta"),
    help="Inverse temperature of softmax / onehot.",
)
@click.option("--causal", is_flag=True, help="Score only the final position.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="Write results here.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
def verify(m, n, construction, beta, causal, json_path, quiet):
    """Check a construction on every one of the 2^(m*n) inputs."""
    from sketchsim.verify import check_verify_size
    from sketchsim.verify import verify as run_verify

    check_verify_size(m, n)
    with report.progress_bar(f"verify {construction}", 1 << (m * n), not quiet) as update:
        res = run_verify(m, n, construction, beta, causal, progress=update)
    head = Panel.fit(
        f"m = {res.m}, N = {res.n}, construction [bold]{res.construction}[/bold]"
        + (f", beta = {res.beta:g}" if res.beta is not None else "")
        + f", feature rank r = {res.rank:,}"
        + (", causal final query" if causal else "")
        + (
            f"\nsoftmax exactness threshold ln(2(N-1)) = {softmax_threshold(n):.4f}"
            if construction != "rank1"
            else ""
        ),
        title="sketchsim verify",
    )
    table = Table()
    for col in ("inputs", "max |y - t|", "exact fraction", "verdict"):
        table.add_column(col, justify="right")
    table.add_row(
        f"{res.inputs:,}",
        f"{res.max_abs_error:.6g}",
        f"{res.exact_fraction:.6f}",
        report.verdict(res.counterexample is None, "exact", "fails"),
    )
    report.console.print(head, table)
    if res.counterexample:
        ce = res.counterexample
        rows = "\n".join(f"  x{k + 1} = {''.join(map(str, t))}" for k, t in enumerate(ce["tokens"]))
        report.console.print(
            f"[red]counterexample[/red] (input #{ce['index']}):\n{rows}\n"
            f"  position {ce['position']}: target {ce['target']}, output {ce['output']:.6g}"
        )
    else:
        report.console.print("[green]no counterexample[/green]")
    report.console.print(f"[dim]{res.seconds:.2f} s[/dim]")
    if json_path:
        payload = res.to_dict()
        params = {"m": m, "n": n, "construction": construction, "beta": beta, "causal": causal}
        report.write_json_atomic(json_path, report.result_payload("verify", params, payload))


@main.command()
def protocols():
    """List every protocol found: built-ins, installed plug-ins."""
    from sketchsim.plugins import discover

    table = Table(title="sketch protocols")
    for col in ("name", "source", "description", "parameters"):
        table.add_column(col)
    for item in discover():
        if item.protocol is None:
            table.add_row(item.name, item.source, f"[red]{item.error}[/red]", "")
            continue
        params = ", ".join(p.describe() for p in item.protocol.params) or "-"
        table.add_row(item.name, item.source, item.protocol.description, params)
    report.console.print(table)


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
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="Write results here.")
@click.option("--resume", is_flag=True, help="Keep protocols already measured in --json.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
def transcript(q, s, specs, samples, exhaustive, seed, json_path, resume, quiet):
    """Measure transcript bits of sketch protocols on F(q,s) against q*log2(s+1)."""
    import json

    from sketchsim.plugins import discover, resolve_spec
    from sketchsim.sketch.family import HardFamily
    from sketchsim.transcript import DEFAULT_SPECS, choose_answers, measure

    if resume and not json_path:
        raise click.UsageError("--resume needs --json PATH")
    family = HardFamily(q, s, seed)
    found = discover()
    resolved = [(spec, *resolve_spec(spec, found)) for spec in (specs or DEFAULT_SPECS)]
    mode, T = choose_answers(family, exhaustive, samples)
    header = {
        "q": q,
        "s": s,
        "m": family.m,
        "n_tokens": family.n_tokens,
        "bound_bits": family.bound_bits,
        "mode": mode,
        "inputs": int(T.shape[0]),
        "seed": seed,
    }
    params = {
        "q": q,
        "s": s,
        "samples": samples,
        "mode": mode,
        "seed": seed,
        "protocols": [spec for spec, *_ in resolved],
    }
    done = {}
    if resume and json_path:
        done = _load_resumable(json_path, header)
    report.console.print(
        Panel.fit(
            f"F(q={q}, s={s}): m = {family.m} bits, N = {family.n_tokens} tokens, "
            f"answers in 0..{s}\nbound q*log2(s+1) = [bold]{family.bound_bits:.2f}[/bold] bits; "
            f"{mode} mode, {T.shape[0]:,} inputs, seed {seed}",
            title="sketchsim transcript",
        )
    )
    results = []
    for spec, proto, proto_params, source in resolved:
        key = json.dumps([proto.name, proto_params], sort_keys=True)
        if key in done:
            results.append(done[key])
            continue
        with report.progress_bar(spec, T.shape[0], not quiet) as update:
            rep = measure(family, T, proto, proto_params, source, progress=update)
        rep.spec = spec
        results.append(rep.to_dict())
        if json_path:
            payload = {**header, "protocols": results, "complete": False}
            report.write_json_atomic(
                json_path, report.result_payload("transcript", params, payload)
            )
    _render_transcript(family, mode, results)
    if json_path:
        payload = {**header, "protocols": results, "complete": True}
        report.write_json_atomic(json_path, report.result_payload("transcript", params, payload))


def _load_resumable(path, header) -> dict:
    import json
    from pathlib import Path

    p = Path(path)
    if not p.exists():
        return {}
    try:
        old = json.loads(p.read_text())
    except (OSError, ValueError) as exc:
        raise SketchsimError(f"cannot resume from {path}: {exc}") from None
    if any(old.get(k) != v for k, v in header.items() if k != "bound_bits"):
        raise SketchsimError(f"cannot resume from {path}: it was made with other q/s/seed/mode")
    return {
        json.dumps([r["name"], r["params"]], sort_keys=True): r for r in old.get("protocols", [])
    }


def _render_transcript(family, mode, results) -> None:
    table = Table(
        caption="distinct transcripts counted by 128-bit fingerprint; "
        "certificates re-checked on exact transcripts"
    )
    cols = (
        "protocol",
        "declared bits",
        "distinct",
        "log2 distinct",
        "entropy bits",
        "correct",
        ">= bound",
        "failure shown by",
    )
    for col in cols:
        table.add_column(col, justify="left" if col == "protocol" else "right")
    for r in results:
        cert = "-"
        if r["collision"]:
            cert = "[red]same transcript, different answers[/red]"
        elif r["wrong_inputs"]:
            cert = f"[red]{r['wrong_inputs']:,} wrong inputs[/red]"
        slow = " [yellow](python engine)[/yellow]" if r["engine"] != "jit" else ""
        table.add_row(
            (r["spec"] or r["name"]) + slow,
            f"{r['declared_bits']:,.2f}",
            f"{r['distinct_transcripts']:,}",
            f"{r['log2_distinct']:.2f}",
            f"{r['entropy_bits']:.2f}",
            report.verdict(
                r["correct_fraction"] == 1.0,
                f"{r['correct_fraction']:.4f}",
                f"{r['correct_fraction']:.4f}",
            ),
            report.verdict(r["meets_bound"]),
            cert,
        )
    report.console.print(table)
    if mode == "sampled":
        report.console.print(
            f"[dim]sampled mode: {family.size:.3g} inputs exist, so distinct counts are capped by "
            f"the sample; collision certificates need exhaustive mode (small q, s)[/dim]"
        )
    for r in results:
        c = r["collision"]
        if c:
            report.console.print(
                f"[bold]{r['spec'] or r['name']}[/bold]: inputs #{c['inputs'][0]} and "
                f"#{c['inputs'][1]} have the same transcript but answers differ at query "
                f"{c['position']}; the protocol answers {c['protocol_answer']} on both\n"
                f"  t = {_answers_text(c['answers_a'])}\n  t = {_answers_text(c['answers_b'])}"
            )
        elif r["first_failure"]:
            f = r["first_failure"]
            report.console.print(
                f"[bold]{r['spec'] or r['name']}[/bold]: first wrong input #{f['input']}, query "
                f"{f['position']}: target {f['target']}, answered {f['answer']}"
            )
        if not r["meets_bound"] and r["correct_fraction"] == 1.0:
            note = (
                "[red]THEOREM VIOLATED: correct on every input below the bound[/red]"
                if mode == "exhaustive"
                else "[yellow]below the bound but no failure among the sampled inputs[/yellow]"
            )
            report.console.print(f"[bold]{r['spec'] or r['name']}[/bold]: {note}")


def _register_certify_commands() -> None:
    from sketchsim import cli_certify, cli_experiments

    for cmd in (cli_certify.codes, cli_certify.witness, cli_certify.certify, cli_certify.bound):
        main.add_command(cmd)
    main.add_command(cli_experiments.sweep)
    main.add_command(cli_experiments.reproduce)


_register_certify_commands()
