"""``sketchsim protocols`` and ``sketchsim transcript``: the main job."""

from __future__ import annotations

from contextlib import ExitStack

import click

from sketchsim.cli import options as opt
from sketchsim.cli import render
from sketchsim.cli.app import main
from sketchsim.cli.cluster import cluster_option
from sketchsim.runs.transcript import TranscriptPlan

_D = opt.plan_default


@main.command()
def protocols():
    """List every protocol found: built-ins, installed plug-ins."""
    from sketchsim.sketch.plugins import discover
    from sketchsim.tables.plugins import show_protocols

    show_protocols(render.console, discover())


@main.command()
@click.option("--q", "q", type=int, default=_D(TranscriptPlan, "q"), show_default=True,
              help="Independent answers.")  # fmt: skip
@click.option("--s", "s", type=int, default=_D(TranscriptPlan, "s"), show_default=True,
              help="Answers lie in 0..s.")  # fmt: skip
@opt.protocol_option(more=" Default: a built-in set.")
@opt.samples_option(_D(TranscriptPlan, "samples"), "Inputs drawn in sampled mode.")
@click.option(
    "--exhaustive/--sampled",
    default=None,
    help="Enumerate all (s+1)^q inputs (default when at most 2^20).",
)
@opt.seed_option
@opt.json_option("Write results here.")
@opt.resume_option("Keep protocols already measured in --json.")
@opt.quiet_option
@opt.family_option
@click.option("--verbose", is_flag=True, help="Per-layer declared, used and entry-entropy bits.")
@cluster_option
def transcript(
    q, s, specs, samples, exhaustive, seed, json_path, resume, quiet, family_spec, verbose, cluster
):
    """Measure transcript bits of sketch protocols against the bound q*log2(s+1)."""
    from sketchsim.runs.transcript import run as run_transcript
    from sketchsim.tables.transcript import show_header, show_transcript

    opt.check_resume(resume, json_path)
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
            on_start=lambda r: show_header(render.console, r.family, r.mode, r.inputs, seed),
            on_protocol=None if quiet else _done_line(json_path),
        )
    show_transcript(render.console, result, verbose)


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
