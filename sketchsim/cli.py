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
        rows = "\n".join("  x%d = %s" % (k + 1, "".join(map(str, t))) for k, t in enumerate(ce["tokens"]))
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


if __name__ == "__main__":  # pragma: no cover
    main()
