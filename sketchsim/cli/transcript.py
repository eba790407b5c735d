"""``sketchsim protocols`` and ``sketchsim transcript``: the main job."""

from __future__ import annotations

from contextlib import ExitStack

import click
from rich.table import Table

from sketchsim import config
from sketchsim.cli import render
from sketchsim.cli.app import main
from sketchsim.cli.cluster import cluster_option
from sketchsim.cli.familyopts import choose_inputs, render_header
from sketchsim.cli.paths import OutputPath
from sketchsim.errors import SketchsimError
from sketchsim.results import result_payload, write_json_atomic
from sketchsim.sketch.inputs import build_family, check_support


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
@click.option("--json", "json_path", type=OutputPath(), help="Write results here.")
@click.option("--resume", is_flag=True, help="Keep protocols already measured in --json.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
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

    from sketchsim.sketch.plugins import discover, resolve
    from sketchsim.sketch.transcript import measure

    if resume and not json_path:
        raise click.UsageError("--resume needs --json PATH")
    family, default_specs = build_family(family_spec, q, s, samples, seed)
    found = discover()
    resolved = [(spec, resolve(spec, found)) for spec in (specs or default_specs)]
    check_support(resolved, family)
    with ExitStack() as stack:
        if cluster is None:
            mode, T = choose_inputs(family, exhaustive, samples)
            n_inputs = int(T.shape[0])

            def run(spec, r, update):
                rep = measure(family, T, r.protocol, r.params, r.source, progress=update)
                return rep, None

            units, extra = n_inputs, {}
        else:
            mode, n_inputs, run, units, extra = _cluster_runner(
                stack, cluster, family, family_spec, exhaustive, samples, len(resolved)
            )
        header = {
            "q": q,
            "s": s,
            "m": family.m,
            "n_tokens": family.n_tokens,
            "bound_bits": family.bound_bits,
            "mode": mode,
            "inputs": n_inputs,
            "seed": seed,
            "family": family.name,
            "family_params": family.options(),
        }
        params = {
            "q": q,
            "s": s,
            "samples": samples,
            "mode": mode,
            "seed": seed,
            "family": family_spec,
            "protocols": [spec for spec, _ in resolved],
        }
        done = {}
        if resume and json_path:
            done = _load_resumable(json_path, header)
        render_header(family, mode, n_inputs, seed)
        results = []
        for spec, r in resolved:
            key = _resume_key(r.protocol.name, r.params, r.identity)
            if key in done:
                results.append(done[key])
                if not quiet:
                    render.err_console.print(f"[dim]{spec}: resumed from {json_path}[/dim]")
                continue
            with render.progress_bar(spec, units, not quiet, plain=cluster is not None) as update:
                rep, stats = run(spec, r, update)
            rep.spec = spec
            if not quiet:  # one line per protocol, also when stderr is not a terminal
                render.err_console.print(
                    f"[dim]{spec}: {n_inputs:,} inputs in {rep.seconds:.1f} s[/dim]"
                )
            # identity: the protocol's source (file hash, module version), so that resume
            # never reports another protocol's results under the same name
            entry = {**rep.to_dict(), "identity": r.identity}
            if stats is not None:
                entry["cluster"] = stats
            results.append(entry)
            if json_path:
                payload = {**header, "protocols": results, "complete": False, **extra}
                write_json_atomic(json_path, result_payload("transcript", params, payload))
    _render_transcript(family, mode, results, verbose)
    if json_path:
        payload = {**header, "protocols": results, "complete": True, **extra}
        write_json_atomic(json_path, result_payload("transcript", params, payload))


def _cluster_runner(stack, cluster, family, family_spec, exhaustive, samples, n_protocols):
    """Connect to the cluster (kept open by ``stack``) and say what the run will cost.

    Returns ``(mode, inputs, run, progress units, extra JSON fields)`` where
    ``run(spec, resolved, update)`` measures one protocol on the cluster.
    """
    import numpy as np

    from sketchsim.cluster.client import connect, worker_threads
    from sketchsim.cluster.transcript import estimate, measure_on_cluster, plan_cluster_inputs
    from sketchsim.estimates import duration_words
    from sketchsim.sketch.transcript import InputLimitError

    try:
        mode, n_inputs = plan_cluster_inputs(family, exhaustive, samples)
    except InputLimitError as exc:
        raise SketchsimError(f"{exc}; {_limit_hint(exc)}") from None
    client = stack.enter_context(
        connect(cluster, log=lambda msg: render.err_console.print(f"[dim]{msg}[/dim]"))
    )
    workers = worker_threads(client) if cluster.kind != "local" else cluster.workers
    answer_bytes = family.q * np.dtype(family.answer_dtype).itemsize
    est = estimate(n_inputs, n_protocols, workers, mode, answer_bytes)
    render.err_console.print(
        f"[dim]{n_inputs:,} {mode} inputs x {n_protocols} protocols on {workers} worker "
        f"threads: {est['map_tasks']:,} map tasks (about {_size(est['map_bytes'])} each), "
        f"{_size(est['shuffle_bytes'])} shuffled into {est['partitions']:,} fingerprint "
        f"ranges (about {_size(est['reduce_bytes'])} per reduce task) per protocol; nominal "
        f"time {duration_words(est['seconds'])} at {config.TRANSCRIPT_RATE_PER_CORE:,.0f} "
        "inputs/s per worker (protocols differ; the progress shows the measured rate)[/dim]"
    )
    answers = family.sample_answers(n_inputs) if mode == "sampled" else None

    def run(spec, r, update):
        return measure_on_cluster(
            client,
            family,
            family_spec,
            spec,
            r,
            mode,
            n_inputs,
            answers=answers,
            workers=workers,
            progress=update,
        )

    extra = {"cluster": {"address": cluster.describe(), "worker_threads": workers}}
    return mode, n_inputs, run, est["map_tasks"] + est["partitions"], extra


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n:,.1f} TiB"


def _limit_hint(exc) -> str:
    if exc.kind == "exhaustive":
        return "sample instead: use --samples N (without --exhaustive)"
    return "use fewer --samples, or set SKETCHSIM_MAX_MEMORY_GB to raise the limit"


# Fields of a resumed protocol entry that the table reads, with their JSON types.
_RESUME_FIELDS = {
    "name": str,
    "params": dict,
    "identity": str,
    "spec": str,
    "engine": str,
    "declared_bits": (int, float),
    "distinct_transcripts": int,
    "log2_distinct": (int, float),
    "entropy_bits": (int, float),
    "correct_fraction": (int, float),
    "meets_bound": bool,
    "wrong_inputs": int,
    "collision": (dict, type(None)),
    "first_failure": (dict, type(None)),
}
_COLLISION_FIELDS = ("inputs", "answers_a", "answers_b", "position", "protocol_answer")
_FAILURE_FIELDS = ("input", "position", "target", "answer")


def _resume_key(name, params, identity) -> str:
    import json

    return json.dumps([name, params, identity], sort_keys=True)


def _load_resumable(path, header) -> dict:
    """Finished protocols of a previous run, keyed by (name, params, source identity).

    Raises
    ------
    SketchsimError
        When the file is not a transcript result of the same q/s/seed/mode, or an
        entry lacks a field or has one of the wrong type.
    """
    from pathlib import Path

    p = Path(path)
    if not p.exists():
        return {}
    from sketchsim.results import read_json

    try:
        old = read_json(p)
    except SketchsimError as exc:
        raise SketchsimError(f"cannot resume: {exc}") from None
    if not isinstance(old, dict) or not isinstance(old.get("protocols", []), list):
        raise SketchsimError(
            f"cannot resume from {path}: not a transcript result (a JSON object with a "
            f"'protocols' list), got {type(old).__name__}"
        )
    if any(old.get(k) != v for k, v in header.items() if k != "bound_bits"):
        raise SketchsimError(f"cannot resume from {path}: it was made with other q/s/seed/mode")
    done = {}
    for i, entry in enumerate(old.get("protocols", []), 1):
        problem = _entry_problem(entry)
        if problem:
            raise SketchsimError(f"cannot resume from {path}: protocol entry {i} {problem}")
        done[_resume_key(entry["name"], entry["params"], entry["identity"])] = entry
    return done


def _entry_problem(entry) -> str | None:
    if not isinstance(entry, dict):
        return f"is a {type(entry).__name__}, not an object"
    for key, kind in _RESUME_FIELDS.items():
        if key not in entry:
            return f"has no {key!r} (made by an older sketchsim? measure again without --resume)"
        value = entry[key]
        if not isinstance(value, kind) or (kind in (int, (int, float)) and isinstance(value, bool)):
            return f"has {key} = {value!r:.40}, of the wrong type"
    for key, fields in (("collision", _COLLISION_FIELDS), ("first_failure", _FAILURE_FIELDS)):
        if entry[key] is not None and not all(f in entry[key] for f in fields):
            return f"has a malformed {key!r}"
    return None


def _fmt_ci(r) -> str:
    ci = r.get("entry_entropy_ci")
    if not ci or ci[0] == ci[1]:
        return f"{r['entry_entropy_bits']:,.2f}"
    return f"{r['entry_entropy_bits']:,.2f} ± {(ci[1] - ci[0]) / 2:,.2f}"


def _entropy_verdict(r, bound: float) -> str:
    if "entry_entropy_bits" not in r:
        return "-"
    if r.get("entry_entropy_below_bound"):
        return "[red]below: cannot be correct[/red]"
    return render.verdict(True, f"{r['entry_entropy_bits'] / bound:.2f}x" if bound else "yes")


def _render_transcript(family, mode, results, verbose: bool = False) -> None:
    exhaustive = mode == "exhaustive"
    bound = family.bound_bits
    table = Table(
        title=f"bound {bound:,.2f} bits",
        caption=(
            "distinct transcripts counted by 128-bit fingerprint; certificates re-checked on exact "
            "transcripts"
            if exhaustive
            else "entry entropy: Miller-Madow estimate ± half its "
            f"{100 * config.ENTROPY_CONFIDENCE:.0f}% interval; distinct/entropy columns are "
            "capped by the sample (in the JSON only)"
        ),
    )
    cols = ["protocol", "declared bits", "used bits", "entry entropy"]
    if exhaustive:
        cols += ["distinct", "log2 distinct", "entropy bits"]
    cols += ["correct", "decodable", ">= bound", "entry H / bound", "failure shown by"]
    for col in cols:
        table.add_column(col, justify="left" if col == "protocol" else "right")
    for r in results:
        cert = "-"
        if r["collision"]:
            cert = "[red]same transcript, different answers[/red]"
        elif r["wrong_inputs"]:
            cert = f"[red]{r['wrong_inputs']:,} wrong inputs[/red]"
        slow = " [yellow](python engine)[/yellow]" if r["engine"] != "jit" else ""
        row = [
            (r["spec"] or r["name"]) + slow,
            f"{r['declared_bits']:,.2f}",
            f"{r['used_bits']:,.2f}" if "used_bits" in r else "-",
            _fmt_ci(r) if "entry_entropy_bits" in r else "-",
        ]
        if exhaustive:
            row += [
                f"{r['distinct_transcripts']:,}",
                f"{r['log2_distinct']:.2f}",
                f"{r['entropy_bits']:.2f}",
            ]
        row += [
            render.verdict(
                r["correct_fraction"] == 1.0,
                f"{r['correct_fraction']:.4f}",
                f"{r['correct_fraction']:.4f}",
            ),
            render.verdict(r.get("decodable", r["collision"] is None)),
            render.verdict(r["meets_bound"]),
            _entropy_verdict(r, bound),
            cert,
        ]
        table.add_row(*row)
    render.console.print(table)
    if verbose:
        _render_layers(results)
    if not exhaustive:
        render.console.print(
            f"[dim]sampled mode: {family.size_text()} inputs exist; a protocol whose entry entropy "
            "is below the bound (upper end of its interval) cannot be correct on this "
            "distribution; 'correct' and 'decodable' hold for the sampled inputs only (the "
            "JSON has the 95% upper bound on the error rate); a collision certificate is shown "
            "when two sampled inputs share a transcript[/dim]"
        )
    for r in results:
        name = r["spec"] or r["name"]
        if r.get("decodable") and not r.get("decoded", True):
            render.console.print(
                f"[bold]{name}[/bold]: decodable but not decoded: no two inputs with different "
                "answers share a transcript, so some readout is right; this protocol's is not"
            )
        c = r["collision"]
        if c:
            render.console.print(
                f"[bold]{name}[/bold]: inputs #{c['inputs'][0]} and "
                f"#{c['inputs'][1]} have the same transcript but answers differ at query "
                f"{c['position']}; the protocol answers {c['protocol_answer']} on both\n"
                f"  t = {_answers_text(c['answers_a'])}\n  t = {_answers_text(c['answers_b'])}"
            )
        elif r["first_failure"]:
            f = r["first_failure"]
            render.console.print(
                f"[bold]{name}[/bold]: first wrong input #{f['input']}, query "
                f"{f['position']}: target {f['target']}, answered {f['answer']}"
            )
        if r.get("entry_entropy_below_bound"):
            render.console.print(
                f"[bold]{name}[/bold]: entry entropy {r['entry_entropy_bits']:,.2f} < bound "
                f"{bound:,.2f} bits: [red]cannot be correct on this distribution[/red]"
            )
        if r.get("undersampled_entries") and not exhaustive:
            render.console.print(
                f"[dim]{name}: {r['undersampled_entries']:,} entries take more than n/10 values; "
                "their entropy estimates are unreliable (more samples help)[/dim]"
            )
        if not r["meets_bound"] and r["correct_fraction"] == 1.0:
            note = (
                "[red]THEOREM VIOLATED: correct on every input below the bound[/red]"
                if exhaustive
                else "[yellow]below the bound but no failure among the sampled inputs[/yellow]"
            )
            render.console.print(f"[bold]{name}[/bold]: {note}")


def _render_layers(results) -> None:
    table = Table(title="per layer")
    for col in ("protocol", "layer", "channel", "speakers", "declared", "used", "entry entropy"):
        table.add_column(col, justify="left" if col in ("protocol", "channel") else "right")
    for r in results:
        for i, lay in enumerate(r.get("layers", []), 1):
            table.add_row(
                r["spec"] or r["name"],
                str(i),
                lay["channel"],
                f"{lay['speakers']:,}",
                f"{lay['bits']:,.2f}",
                f"{lay['used_bits']:,.2f}" if "used_bits" in lay else "-",
                _fmt_ci(lay) if "entry_entropy_bits" in lay else "-",
            )
    render.console.print(table)
