"""``sketchsim families`` and ``sketchsim frontier``: family plug-ins and the bits frontier."""

from __future__ import annotations

import click
from rich.table import Table

from sketchsim.cli import render
from sketchsim.cli.app import main
from sketchsim.cli.paths import OutputPath
from sketchsim.errors import SketchsimError
from sketchsim.results import result_payload, write_json_atomic


@main.command()
def families():
    """List every input family found: built-ins, installed plug-ins."""
    from sketchsim.sketch.family_plugins import discover_families

    table = Table(title="input families")
    for col in ("name", "source", "description", "parameters", "default protocols"):
        table.add_column(col)
    for item in discover_families():
        if item.family is None:
            table.add_row(item.name, item.source, f"[red]{item.error}[/red]", "", "")
            continue
        fam = item.family
        params = ", ".join(p.describe() for p in fam.params) or "-"
        table.add_row(
            item.name, item.source, fam.description, params, ", ".join(fam.default_protocols)
        )
    render.console.print(table)


def _int_list(text: str, flag: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise click.UsageError(
            f"{flag} must be a comma-separated list of integers, got {text!r}"
        ) from None
    if not values:
        raise click.UsageError(f"{flag} is empty")
    return values


@main.command()
@click.option(
    "--protocol",
    "specs",
    multiple=True,
    default=("kernel",),
    show_default=True,
    help="NAME[:k=v,...], path/file.py:NAME[:...] or pkg.module:NAME[:...]; repeatable.",
)
@click.option("--vary", "vary_text", required=True, help="NAME=LO..HI, e.g. bits=1..16.")
@click.option("--q", "q_text", default="4,8,16", show_default=True, help="Comma-separated q.")
@click.option("--s", "s_text", default="3,7", show_default=True, help="Comma-separated s.")
@click.option(
    "--family",
    "family_spec",
    default="hard",
    show_default=True,
    help="Input family: NAME[:k=v,...] (see `sketchsim families`).",
)
@click.option(
    "--samples",
    type=int,
    default=20_000,
    show_default=True,
    help="Inputs drawn per cell when (s+1)^q is above 2^20.",
)
@click.option(
    "--search",
    type=click.Choice(["auto", "bisect", "scan"]),
    default="auto",
    show_default=True,
    help="auto: bisect parameters declared monotone, scan the others.",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Bit layout and sampling.")
@click.option("--json", "json_path", type=OutputPath(), help="Write results here.")
@click.option("--plot", "plot_path", type=OutputPath((".png",)), help="Bits vs bound (PNG).")
@click.option("--resume", is_flag=True, help="Keep cells already measured in --json.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
def frontier(
    specs,
    vary_text,
    q_text,
    s_text,
    family_spec,
    samples,
    search,
    seed,
    json_path,
    plot_path,
    resume,
    quiet,
):
    """Smallest parameter value correct on every input, per (q, s), against the bound."""
    from sketchsim.sketch.frontier import frontier_cell, parse_vary
    from sketchsim.sketch.inputs import build_family, check_support
    from sketchsim.sketch.plugins import discover, resolve
    from sketchsim.sketch.transcript import InputLimitError

    if resume and not json_path:
        raise click.UsageError("--resume needs --json PATH")
    vary = parse_vary(vary_text)
    qs, ss = _int_list(q_text, "--q"), _int_list(s_text, "--s")
    found = discover()
    resolutions = [(spec, resolve(spec, found)) for spec in specs]
    resolved = [(spec, r.protocol, r.params, r.source) for spec, r in resolutions]
    identity = {spec: r.identity for spec, r in resolutions}
    families = {}
    for q in qs:
        for s in ss:
            families[q, s], _ = build_family(family_spec, q, s, samples, seed)
    check_support(resolved, next(iter(families.values())))
    params = {
        "protocols": list(specs),
        "vary": str(vary),
        "q": qs,
        "s": ss,
        "family": family_spec,
        "samples": samples,
        "search": search,
        "seed": seed,
    }
    done = _load_cells(json_path, params, vary) if resume and json_path else {}
    cells = []
    total = len(families) * len(resolved)
    with render.progress_bar("frontier", total, not quiet) as update:
        for (q, s), family in families.items():
            for spec, proto, proto_params, source in resolved:
                key = _cell_key(q, s, spec, identity[spec])
                if key in done:
                    cells.append(done[key])
                else:
                    try:
                        cell = frontier_cell(
                            family, proto, proto_params, vary, spec, source, samples, search
                        )
                    except InputLimitError as exc:
                        raise SketchsimError(f"{exc}; use fewer --samples") from None
                    # identity: the protocol's source (file hash, module version), so that
                    # resume never shows the results of other code under the same spec
                    cells.append(cell.to_dict() | {"identity": identity[spec]})
                update(len(cells), total)
                if json_path:
                    write_json_atomic(
                        json_path,
                        result_payload("frontier", params, {"cells": cells, "complete": False}),
                    )
    if json_path:  # the results first: a plot can never lose them
        write_json_atomic(
            json_path, result_payload("frontier", params, {"cells": cells, "complete": True})
        )
    _render_frontier(cells, vary)
    if plot_path:
        _plot_frontier(cells, vary, plot_path)
        render.console.print(f"plot written to {plot_path}")


def _cell_key(q, s, spec, identity) -> str:
    import json

    return json.dumps([q, s, spec, identity])


# What the table and the plot read from a resumed cell, with their JSON types.
_CELL_FIELDS = {
    "q": int,
    "s": int,
    "spec": str,
    "protocol": str,
    "identity": str,
    "value": (int, None),
    "found": bool,
    "mode": str,
    "inputs": int,
    "search": str,
    "monotone": (bool, None),
    "bound_bits": float,
    "declared_bits": (float, None),
    "used_bits": (float, None),
    "entry_entropy_bits": (float, None),
    "declared_ratio": (float, None),
    "evaluated": dict,
    "verdict": str,
    "decodable_found": bool,
    "decodable_value": (int, None),
    "decodable_declared_bits": (float, None),
    "decodable_declared_ratio": (float, None),
    "evaluated_decodable": dict,
}


def _cell_problem(c, vary) -> str | None:
    """What is wrong with a resumed cell (types, and its own search record), or None."""
    from sketchsim.results import field_problem

    problem = field_problem(c, _CELL_FIELDS)
    if problem:
        return problem
    if c["mode"] not in ("exhaustive", "sampled") or c["inputs"] < 1:
        return f"has mode {c['mode']!r} over {c['inputs']} inputs"
    if c["search"] not in ("fixed", "bisection", "scan"):
        return f"has an unknown search {c['search']!r}"
    rates = c["evaluated"]
    if not all(isinstance(v, int | float) and 0 <= v <= 1 for v in rates.values()):
        return "has correct fractions outside [0, 1]"
    if c["search"] == "fixed":
        consistent = c["value"] is None and c["found"] == (rates.get("None") == 1)
    else:
        tried = {}
        for key, rate in rates.items():
            try:
                tried[int(key)] = rate
            except ValueError:
                return f"has an evaluated value {key!r} that is not an integer"
        right = sorted(v for v, rate in tried.items() if rate == 1)
        if c["found"]:
            value = c["value"]
            consistent = (
                value is not None
                and vary.lo <= value <= vary.hi
                and right[:1] == [value]
                and (value - 1 in tried or value == min(tried))  # the first correct one
            )
        else:
            consistent = c["value"] is None and not right
    if not consistent:
        return "does not match its own evaluations (value, found, evaluated)"
    if c["found"] != (c["declared_bits"] is not None):
        return "has bits without a correct value, or a correct value without bits"
    carried = c["evaluated_decodable"]
    if not all(isinstance(v, bool) for v in carried.values()) or set(carried) != set(rates):
        return "has decodable verdicts that do not match its evaluations"
    value = c["decodable_value"]
    if c["search"] == "fixed":
        consistent = value is None and c["decodable_found"] == (carried.get("None") is True)
    else:
        consistent = c["decodable_found"] == (value is not None) and (
            value is None or carried.get(str(value)) is True
        )
    if not consistent:
        return "does not match its own decodable evaluations"
    return None


def _load_cells(path, params, vary) -> dict:
    """Cells of an earlier run with the same settings, each checked, by (q, s, spec, identity)."""
    from pathlib import Path

    from sketchsim.results import read_json

    if not Path(path).exists():
        return {}
    old = read_json(path)
    if not isinstance(old, dict) or not isinstance(old.get("cells"), list):
        raise SketchsimError(f"cannot resume from {path}: not a frontier result")
    from sketchsim.machine import portable_value

    if old.get("parameters") != portable_value(params):  # recorded without machine paths
        raise SketchsimError(f"cannot resume from {path}: it was made with other settings")
    done = {}
    for i, c in enumerate(old["cells"], 1):
        problem = _cell_problem(c, vary)
        if problem:
            hint = " (made by an older sketchsim? run without --resume)" * problem.startswith(
                "has no"
            )
            raise SketchsimError(f"cannot resume from {path}: cell {i} {problem}{hint}")
        done[_cell_key(c["q"], c["s"], c["spec"], c["identity"])] = c
    return done


def _num(x, fmt: str = ",.2f") -> str:
    return "-" if x is None else format(x, fmt)


def _render_frontier(cells, vary) -> None:
    table = Table(
        title=f"bits frontier: smallest {vary.name} in {vary.lo}..{vary.hi}, decoded and decodable",
        caption="decoded: the protocol's own readout is right on every input run; decodable: no "
        "two inputs with different answers share a transcript (some readout exists). "
        "x bound: declared bits / q*log2(s+1)",
    )
    cols = (
        "q",
        "s",
        "protocol",
        f"{vary.name} decoded",
        "declared",
        "x bound",
        f"{vary.name} decodable",
        "declared ",
        "x bound ",
        "inputs",
        "search",
        "bound",
        "verdict",
    )
    for col in cols:
        table.add_column(
            col, justify="left" if col in ("protocol", "search", "verdict") else "right"
        )
    for c in cells:
        search = c["search"]
        if c["search"] == "scan" and c["monotone"] is False:
            search += " [yellow](not monotone)[/yellow]"
        inputs = f"{c['inputs']:,} " + ("all" if c["mode"] == "exhaustive" else "sampled")
        table.add_row(
            str(c["q"]),
            str(c["s"]),
            c["spec"] or c["protocol"],
            _value(c["search"], c["found"], c["value"]),
            _num(c["declared_bits"]),
            _num(c["declared_ratio"], ".2f"),
            _value(c["search"], c.get("decodable_found", False), c.get("decodable_value")),
            _num(c.get("decodable_declared_bits")),
            _num(c.get("decodable_declared_ratio"), ".2f"),
            inputs,
            search,
            _num(c["bound_bits"]),
            c.get("verdict") or "-",
        )
    render.console.print(table)


def _value(search: str, found: bool, value) -> str:
    if search == "fixed":
        return "(none)" if found else "[red]no[/red]"
    return str(value) if found else "[red]none[/red]"


def _plot_frontier(cells, vary, path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 5.5))
    lines: dict[str, list] = {}
    for c in cells:
        if c["found"] and c["declared_bits"]:
            lines.setdefault(c["spec"] or c["protocol"], []).append(c)
    xs = [c["bound_bits"] for pts in lines.values() for c in pts]
    markers = "osD^v<>ph*"
    for i, (name, pts) in enumerate(lines.items()):
        color = f"C{i % 10}"
        # one line per s through growing q, so equal bounds from different (q, s) don't zigzag
        for j, s in enumerate(sorted({c["s"] for c in pts})):
            row = sorted((c for c in pts if c["s"] == s), key=lambda c: c["q"])
            x = [c["bound_bits"] for c in row]
            ax.plot(
                x,
                [c["declared_bits"] for c in row],
                "-",
                marker=markers[j % len(markers)],
                color=color,
                label=f"{name} declared" if j == 0 else None,
            )
            ax.plot(
                x,
                [c["entry_entropy_bits"] for c in row],
                ":",
                color=color,
                alpha=0.6,
                label=f"{name} entry entropy" if j == 0 else None,
            )
    if xs:
        grid = [min(xs), max(xs)]
        ax.plot(grid, grid, "k--", lw=1, label="bound (diagonal)")
    else:  # nothing to draw on log axes
        ax.text(0.5, 0.5, f"no value in {vary} is correct", ha="center", transform=ax.transAxes)
    ax.plot(
        [],
        [],
        " ",
        label="markers: s = " + ", ".join(str(s) for s in sorted({c["s"] for c in cells})),
    )
    if xs:
        ax.set_xscale("log")
        ax.set_yscale("log")
    ax.set_xlabel("bound q*log2(s+1) (bits)")
    ax.set_ylabel(f"bits at the smallest correct {vary.name}")
    ax.set_title(f"bits frontier ({vary})")
    ax.legend(fontsize=7)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
