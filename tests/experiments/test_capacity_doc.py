"""docs/capacity.md: every number of its table comes from the committed result files.

``docs/capacity/sweep.json`` is ``sketchsim sweep --suite capacity`` (the default
plan) and ``docs/capacity/capacity.json`` is ``sketchsim capacity`` on the
weights it kept.  :func:`table_rows` renders the table from them; the doc must
hold exactly these rows (``python tests/experiments/test_capacity_doc.py``
prints them).
"""

import json
import math
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs"
SWEEP = DOCS / "capacity" / "sweep.json"
CAPACITY = DOCS / "capacity" / "capacity.json"


def _f(v, fmt):
    return "-" if v is None else format(v, fmt)


def table_rows(sweep: dict, capacity: dict) -> list[str]:
    """One markdown row per (family, q, s, architecture) of the sweep's summary."""
    measured = {(s["family"], s["q"], s["s"], s["architecture"]): s for s in capacity["summary"]}
    elements = {}
    for r in capacity["rows"]:
        elements[(r["family"], r["q"], r["s"], r["architecture"])] = r["state_elements"]
    out = []
    for s in sweep["summary"]:
        key = (s["family"], s["q"], s["s"], s["architecture"])
        m = measured.get(key)
        ci = "-" if s["ci_low"] is None else f"{s['ci_low']:.2f}-{s['ci_high']:.2f}"
        bound = f"{s['q'] * math.log2(s['s'] + 1):.0f}"
        if m is None:  # softmax: no fixed-size state, not run in the engine
            cells = ["-", "-", "-", "-", "-", "-"]
        else:
            n = elements[key]
            cells = [
                f"{m['decoded_seeds']}/{m['seeds']}",
                _f(m["bits_per_coordinate_min"], "d"),
                _f(m["transcript_bits_min"], ",.0f"),
                _f(m["ratio_min"], ".2f"),
                _f(m["ratio_mean"], ".2f"),
                f"{n:,} x 32 = {n * 32:,}",
            ]
        out.append(
            "| "
            + " | ".join(
                [
                    s["architecture"],
                    str(s["q"]),
                    str(s["s"]),
                    bound,
                    str(s["seeds"]),
                    f"{s['mean']:.3f}",
                    ci,
                    *cells,
                ]  # fmt: skip
            )
            + " |"
        )
    return out


def reference_rows(capacity: dict) -> list[str]:
    return [
        f"| {r['protocol']} | {r['q']} | {r['s']} | {r['transcript_bits']:,.0f} | "
        f"{r['ratio']:.2f} | {r['correct_fraction']:.4f} |"
        for r in capacity["references"]
    ]


def test_doc_table_is_the_committed_results():
    sweep = json.loads(SWEEP.read_text())
    capacity = json.loads(CAPACITY.read_text())
    text = (DOCS / "capacity.md").read_text()
    lines = {ln.strip() for ln in text.splitlines()}
    rows = table_rows(sweep, capacity) + reference_rows(capacity)
    assert rows and all(r in lines for r in rows), [r for r in rows if r not in lines][:3]
    # and nothing else in those tables: every table row of the Results section is one of them
    # (the later sections' tables are checked by tests/test_doc_numbers.py)
    section = text.split("\n## Results", 1)[1].split("\n## ", 1)[0]
    doc_rows = [ln.strip() for ln in section.splitlines() if ln.startswith("| ")
                and not ln.startswith("| arch") and not ln.startswith("| protocol")
                and not ln.startswith("| ---")]  # fmt: skip
    assert sorted(doc_rows) == sorted(rows)
    # the weights measured are the sweep's: one capacity row per saved kernel model
    saved = [r for r in sweep["runs"] if r["weights"]]
    assert len(capacity["rows"]) == len(saved)


def test_doc_prose_ranges_are_the_committed_results():
    capacity = json.loads(CAPACITY.read_text())
    text = " ".join((DOCS / "capacity.md").read_text().split())
    ok = [s for s in capacity["summary"] if s["decoded_seeds"]]
    ratios = [s["ratio_min"] for s in ok]
    ks = [s["bits_per_coordinate_min"] for s in ok]
    bits = [s["transcript_bits_min"] for s in ok]
    kernel = [r["ratio"] for r in capacity["references"] if r["protocol"].startswith("kernel")]
    elements = [r["state_elements"] * 32 for r in capacity["rows"]]
    bounds = [r["bound_bits"] for r in capacity["rows"]]
    for phrase in (
        f"**{min(ratios):.2f}x to {max(ratios):.2f}x**",
        f"registers {min(kernel):.2f}x to {max(kernel):.2f}x",
        f"**{min(ks)} to {max(ks)} bits**",
        f"is {min(elements):,}-{max(elements):,} bits",
        f"needs {min(bits):,.0f}-{max(bits):,.0f} of them",
        f"floor is {min(bounds):.0f}-{max(bounds):.0f}",
    ):
        assert phrase in text, phrase


def _minsec(seconds: float) -> str:
    return f"{int(seconds // 60)} min {round(seconds % 60)} s"


def test_doc_times_are_the_committed_timing():
    timing = json.loads((DOCS / "capacity" / "timing.json").read_text())
    text = " ".join((DOCS / "capacity.md").read_text().split())
    assert timing["machine"]["cpu_count"] == 2 and "EPYC" in timing["machine"]["cpu"]
    sweep, cap = timing["sweep"], timing["capacity"]
    assert f"**{_minsec(sweep['wall_s'])}** wall ({_minsec(sweep['cpu_s'])} CPU)" in text
    assert f"{_minsec(cap['wall_s'])} wall there ({_minsec(cap['cpu_s'])} CPU)" in text
    assert sweep["wall_s"] < 600  # the default plan's promise: within 10 minutes


def test_every_committed_capacity_files_summaries_are_what_the_code_derives():
    """A capacity file's ``frontier`` and ``summary`` are functions of its ``rows``: the
    committed ones must be what :func:`frontier_rows` and :func:`summarize_rows` make of
    them today (a model decoded on a sample counts: its ``decoded`` is None there)."""
    from sketchsim.runs.capacity import frontier_rows, summarize_rows

    files = [p for p in sorted(DOCS.glob("capacity/**/*.json"))
             if {"rows", "frontier", "summary"} <= set(json.loads(p.read_text()))]  # fmt: skip
    assert len(files) >= 10
    for path in files:
        data = json.loads(path.read_text())
        assert data["frontier"] == frontier_rows(data["rows"]), path
        assert data["summary"] == summarize_rows(data["rows"]), path


def test_the_frontier_plot_draws_from_the_committed_files(tmp_path):
    """docs/capacity/frontier.png's script: its sources exist and hold capacity rows,
    the frontier it draws is the committed files' own, and the plot is written."""
    import importlib.util

    from sketchsim.runs.capacity import frontier_rows
    from sketchsim.runs.plots import plot_trained_frontier, screen_points

    spec = importlib.util.spec_from_file_location(
        "make_frontier_plot", DOCS / "capacity" / "make_frontier_plot.py"
    )
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    rows = script.merged_rows()
    assert {r["s"] for r in rows} == {1, 3, 7} and max(r["q"] for r in rows) == 64
    decoded = [f for f in frontier_rows(rows) if f["best"]]
    # at s = 7, with the models prove refuted taken off (#61, docs/capacity.md): elu1sum at
    # q = 4 (proved), 8 and 16 (samples only), and Based at q = 16 (proved); GLA at 16,
    # linear-elu1 at 16 and elu1sum at 32 and 64 decoded samples only to be refuted
    s7 = {(f["q"], f["kind"]): f for f in decoded if f["s"] == 7}
    assert set(s7) == {(16, "based L1 H1"),
                       *((q, "linear-elu1sum L1 H1") for q in (4, 8, 16))}  # fmt: skip
    best = {q: s7[(q, "linear-elu1sum L1 H1")]["best"] for q in (4, 8, 16)}
    assert [round(best[q]["ratio"], 2) for q in best] == [1.33, 1.67, 1.33]
    assert best[4]["evidence"] == s7[(16, "based L1 H1")]["best"]["evidence"] == "proved"
    refuted = {(r["q"], r["architecture"]) for r in rows if r.get("evidence") == "refuted"}
    assert {(16, "gla L1 H1 r1 d16"), (64, "linear-elu1sum L1 H1 r1 d64")} <= refuted
    assert best[4]["state_basis"] == "readout"
    opens = {(p["q"], p["kind"]): p for p in screen_points(rows) if p["s"] == 7}
    # the kept F(32,7) DeltaNet at the cut: 0.999 at K = 6, as at K = 32 (docs/capacity.md)
    assert opens[(32, "deltanet L1 H1")]["bits_per_coordinate"] == 6
    assert opens[(32, "deltanet L1 H1")]["bits"] == 192
    for p in opens.values():
        row = next(r for r in rows if r["weights"] == p["weights"] and r["q"] == p["q"])
        below = [c["accuracy"] for c in row["curve"][: p["bits_per_coordinate"] - 1]]
        assert all(a < p["accuracy"] for a in below)
    plot_trained_frontier(rows, tmp_path / "f.png")
    assert (tmp_path / "f.png").stat().st_size > 10_000


GRID = DOCS / "capacity" / "frontier" / "s7" / "grid"


def grid_rows(sweep: dict, capacity: dict) -> list[str]:
    """docs/capacity.md's s = 7 grid table: one row per run of ``sweep``, with its cut
    measurement from ``capacity`` (by weights file)."""
    cut = {r["weights"]: r for r in capacity["rows"]}
    out = []
    for run in sweep["runs"]:
        m = cut[run["weights"]]
        top = m["curve"][-1]["accuracy"]
        at = next(c for c in m["curve"] if c["accuracy"] >= top)
        ratio = at["transcript_bits"] / m["bound_bits"]
        decoded = (f"K = {m['bits_per_coordinate']}: {m['transcript_bits']:.0f} bits, "
                   f"{m['ratio']:.2f}x" if m["bits_per_coordinate"] else
                   f"no ({m['correct_fraction']:.5f})" if top > 0 else "no")  # fmt: skip
        screen = (f"{top:.3f} from K = {at['bits']} ({at['transcript_bits']:.0f} bits, "
                  f"{ratio:.2f}x)" if top > 0 else "-")  # fmt: skip
        out.append(
            f"| {run['architecture']} | {run['spec']['lr']} | {run['seed']} | "
            f"{run['kept_step']:,} | {run['accuracy']:.3f} | {screen} | {decoded} |"
        )
    return out


@pytest.mark.parametrize("q", [16, 32])
def test_the_s7_grid_table_is_the_committed_files(q):
    sweep = json.loads((GRID / f"sweep-q{q}.json").read_text())
    capacity = json.loads((GRID / f"capacity-q{q}-cut.json").read_text())
    page = (DOCS / "capacity.md").read_text()
    for row in grid_rows(sweep, capacity):
        assert row in page, row


ELU1SUM = DOCS / "capacity" / "frontier" / "s7" / "elu1sum"
#: The kinds trained with the readout-basis recipe (s7/rebase-kinds/) and their q at s = 7.
REBASE_KINDS = {"gla": (16, 32), "gated-deltanet": (16,), "deltanet": (16,), "based": (16,)}
#: GLA at F(32,7) trained longer than its 26,000-step run: the steps of each file's suffix.
GLA_Q32_STEPS = ("44000", "70000")
#: docs/capacity.md's elu1sum tables: (sweep, capacity at the cut) under :data:`ELU1SUM`.
ELU1SUM_TABLES = [
    *((f"float/sweep-q{q}.json", f"float/capacity-q{q}-cut.json") for q in (4, 8, 16)),
    ("float/sweep-q64-20000.json", "float/capacity-q64-20000-cut.json"),
    ("qat/sweep-q8-K4-fit.json", "qat/capacity-q8-K4-fit-cut.json"),
    ("qat/sweep-q8-K4-fit-l1-0.0001.json", "qat/capacity-q8-K4-fit-l1-0.0001-cut.json"),
    ("noise/sweep-q8.json", "noise/capacity-q8-cut.json"),
    ("noise/sweep-q16-10000.json", "noise/capacity-q16-10000-cut.json"),
    ("noise/sweep-q16-20000.json", "noise/capacity-q16-20000-cut.json"),
    ("noise/sweep-q32.json", "noise/capacity-q32-cut.json"),
    ("noise/sweep-q64.json", "noise/capacity-q64-cut.json"),
    *((f"rebase/sweep-q{q}.json", f"rebase/capacity-q{q}-cut.json") for q in (4, 8, 16, 32, 64)),
    *(
        (
            f"rebase/sweep-q32-lr{lr}-after0.0001.json",
            f"rebase/capacity-q32-lr{lr}-after0.0001-cut.json",
        )
        for lr in ("0.003", "0.001")
    ),
    *(
        (f"../rebase-kinds/sweep-{k}-q{q}.json", f"../rebase-kinds/capacity-{k}-q{q}-cut.json")
        for k, qs in REBASE_KINDS.items()
        for q in qs
    ),
    *(
        (
            f"../rebase-kinds/sweep-gla-q32-{n}.json",
            f"../rebase-kinds/capacity-gla-q32-{n}-cut.json",
        )
        for n in GLA_Q32_STEPS
    ),
]


@pytest.mark.parametrize("sweep, capacity", ELU1SUM_TABLES)
def test_the_elu1sum_tables_are_the_committed_files(sweep, capacity):
    rows = grid_rows(json.loads((ELU1SUM / sweep).read_text()),
                     json.loads((ELU1SUM / capacity).read_text()))  # fmt: skip
    page = (DOCS / "capacity.md").read_text()
    for row in rows:
        assert row in page, row


S7 = DOCS / "capacity" / "frontier"
#: docs/capacity.md's s = 7 frontier: (row label, architecture kind, capacity files under
#: :data:`S7`); every cell is :func:`~sketchsim.runs.capacity.frontier_rows` of those files.
S7_TABLE = [
    ("linear-elu1sum, register noise, readout basis", "linear-elu1sum L1 H1",
     [*(f"s7/elu1sum/rebase/capacity-q{q}-cut.json" for q in (4, 8, 16, 32, 64)),
      *(f"s7/elu1sum/rebase/capacity-q32-lr{lr}-after0.0001-cut.json"
        for lr in ("0.003", "0.001"))]),
    *((f"{kind}, register noise, readout basis", f"{kind} L1 H1",
       [*(f"s7/rebase-kinds/capacity-{kind}-q{q}-cut.json" for q in qs),
        *(f"s7/rebase-kinds/capacity-gla-q32-{n}-cut.json" for n in GLA_Q32_STEPS
          if kind == "gla")])
      for kind, qs in REBASE_KINDS.items()),
    ("linear-elu1sum, register noise (K = 4)", "linear-elu1sum L1 H1",
     ["s7/elu1sum/noise/capacity-q8-cut.json", "s7/elu1sum/noise/capacity-q16-10000-cut.json",
      "s7/elu1sum/noise/capacity-q16-20000-cut.json", "s7/elu1sum/noise/capacity-q32-cut.json",
      "s7/elu1sum/noise/capacity-q64-cut.json"]),
    ("linear-elu1sum, float", "linear-elu1sum L1 H1",
     [*(f"s7/elu1sum/float/capacity-q{q}-cut.json" for q in (4, 8, 16, 32)),
      "s7/elu1sum/float/capacity-q64-20000-cut.json"]),
    ("linear-elu1", "linear-elu1 L1 H1",
     ["s7/grid/capacity-q16-cut.json", "f64/capacity-elu1-d64.json"]),
    ("deltanet", "deltanet L1 H1",
     ["s7/capacity-deltanet-q16-cut.json", "s7/capacity-deltanet-q32-cut.json",
      "s7/keep-best/capacity-cut.json", "s7/qat/capacity-K4-cut.json",
      "s7/qat/capacity-K5-cut.json"]),
    *((kind, f"{kind} L1 H1", ["s7/grid/capacity-q16-cut.json", "s7/grid/capacity-q32-cut.json"])
      for kind in ("gated-deltanet", "mamba", "gla")),
]  # fmt: skip


def _proved(best: dict) -> str:
    """What ``prove`` found for a cell's best model where its file is committed
    (docs/capacity/prove/committed.json): ``; proved``, or ``; refuted`` and the smallest
    K proved, if any."""
    rows = json.loads((DOCS / "capacity" / "prove" / "committed.json").read_text())["rows"]
    mine = [r for r in rows if r["weights"].endswith("/" + best["weights"])
            and r["weights_sha256"] == best.get("weights_sha256", r["weights_sha256"])]  # fmt: skip
    at = [r for r in mine if r["bits"] == best["bits_per_coordinate"]]
    if (
        not at
        or len({(r["weights_sha256"], r["verdict"]) for r in at}) > 1
        and len({r["verdict"] for r in at}) > 1
    ):
        return ""  # not committed, or files of that name that prove tells apart
    if len({r["weights_sha256"] for r in at}) > 1:
        return f"; {at[0]['verdict']}"  # files of that name, one verdict
    if at[0]["verdict"] == "proved":
        return "; proved"
    later = [r for r in mine if r["verdict"] == "proved" and r["bits"] > at[0]["bits"]]
    if at[0]["verdict"] == "refuted" and later:
        return f"; refuted, proved at K {later[0]['bits']}: {later[0]['ratio']:.2f}x"
    return f"; {at[0]['verdict']}"


def s7_rows(table=S7_TABLE, s: int = 7, family: str = "hard") -> list[str]:
    """The s = 7 frontier table's rows (or MQAR's, :data:`MQAR_TABLE`): per architecture
    and q in 4..64, the best decoded model's ratio (cut bits, K; decoded of models run),
    ``none of N``, or ``-``."""
    from sketchsim.runs.capacity import frontier_rows

    out = []
    for label, kind, files in table:
        rows = [r for f in files for r in json.loads((S7 / f).read_text())["rows"]]
        cells = {
            c["q"]: c
            for c in frontier_rows(rows)
            if c["kind"] == kind and c["s"] == s and c["family"] == family
        }
        text = []
        for q in (4, 8, 16, 32, 64):
            c = cells.get(q)
            if c is None:
                text.append("-")
            elif c["best"] is None:
                text.append(f"none of {c['models']}")
            else:
                b, n = c["best"], f"{c['decoded_models']}/{c['models']}"
                text.append(f"{b['ratio']:.2f}x ({b['transcript_bits']:.0f} bits, K "
                            f"{b['bits_per_coordinate']}; {n}{_proved(b)})")  # fmt: skip
        out.append(f"| {label} | " + " | ".join(text) + " |")
    return out


def test_the_s7_frontier_table_is_the_committed_files():
    page = (DOCS / "capacity.md").read_text()
    for row in s7_rows():
        assert row in page, row


#: docs/capacity.md's MQAR-to-q = 64 runs (s = 3, pairs = 2q) under :data:`S7`.
MQAR_QS = (4, 8, 16, 32, 64)
#: Each q's runs: the first grid (rates 0.03, 0.1; at q = 64 0.1 only) and the later rates.
MQAR_RUNS = [
    *((q, "") for q in MQAR_QS),
    *((q, "-lr0.003-0.01") for q in (4, 8, 16, 32)),
    (64, "-lr0.03"),
]
MQAR_TABLE = [
    ("linear-elu1, d = 1, r = q or 2q, register noise (K = 4)", "linear-elu1 L1 H1",
     [f"mqar/capacity-q{q}{tag}-cut.json" for q, tag in MQAR_RUNS]),
]  # fmt: skip


def test_the_mqar_tables_are_the_committed_files():
    page = (DOCS / "capacity.md").read_text()
    for q, tag in MQAR_RUNS:
        sweep = json.loads((S7 / f"mqar/sweep-q{q}{tag}.json").read_text())
        capacity = json.loads((S7 / f"mqar/capacity-q{q}{tag}-cut.json").read_text())
        assert {r["family"] for r in capacity["rows"]} == {"mqar"}
        for row in grid_rows(sweep, capacity):
            assert f"| {q} {row}" in page, row
    for row in s7_rows(MQAR_TABLE, s=3, family="mqar"):
        assert row in page, row


if __name__ == "__main__":
    print("\n".join(s7_rows()))
    print("\n".join(s7_rows(MQAR_TABLE, s=3, family="mqar")))
    s, c = json.loads(SWEEP.read_text()), json.loads(CAPACITY.read_text())
    print("\n".join(table_rows(s, c)))
    print()
    print("\n".join(reference_rows(c)))
    for q in (16, 32):
        print()
        print(
            "\n".join(
                grid_rows(
                    json.loads((GRID / f"sweep-q{q}.json").read_text()),
                    json.loads((GRID / f"capacity-q{q}-cut.json").read_text()),
                )
            )
        )
