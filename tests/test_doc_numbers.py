"""Every measured number quoted in docs/*.md and README.md equals its committed result file.

Each entry of :data:`NUMBERS` is ``(doc file, quoted text, JSON file, JSON paths,
formats)``: the quoted text is a verbatim piece of the doc with ``{}`` where the
numbers stand; each ``{}`` is filled with the value at its JSON path, formatted,
and the filled text must appear in the doc.  So a rerun that changes a number
fails here until the doc is regenerated from the new file, and a doc edit that
changes a number without a new file fails too.

A JSON path is a tuple of keys: strings and integers index as usual, a dict
selects the one list element whose fields equal it (``{"m": 64}``), and a
callable is applied to the value reached so far (for numbers the doc derives,
such as a minimum over seeds).  A format is a ``str.format`` pattern or a
callable returning the text.

After a rerun that changes result files, ``python tests/test_doc_numbers.py --write``
puts the new values into the docs (each quoted text, its ``{}`` read as wildcards,
must match one place in its doc; entries it cannot place are printed), and without
``--write`` it lists the stale entries.

Numbers in docs/ that are *not* checked here, and why:

- times (seconds, minutes) outside docs/benchmarks.md and the README: they are
  labelled with their machine and load, and are not results; docs/benchmarks.md's
  tables of the sessions whose runs wrote a file under docs/benchmarks/ (and the
  README's main-job times taken from them) are checked below, the older
  sessions' tables (timed before runs wrote files) are not;
- docs/cluster.md (memory and time measurements of cluster runs);
- results.md's FAVOR+ and ``elu1`` 1,000-triple tables, the softmax learning-rate
  paragraph and the minrank prose (numbers of earlier code whose files are
  committed under docs/ood/ and docs/minrank/ but in formats this table does
  not decode); results.md's streamed-Lemma-4 table beyond the 65,536-word row
  (131,072 and 262,144 words were timed in a Python session, not by a command).
"""

from __future__ import annotations

import json
import math
import sys
from fractions import Fraction
from functools import cache
from pathlib import Path

import pytest

from sketchsim.sketch.family import HARD

ROOT = Path(__file__).resolve().parents[1]


@cache
def load(path: str):
    return json.loads((ROOT / path).read_text())


@cache
def doc(path: str) -> str:
    return (ROOT / path).read_text()


def lookup(data, path):
    for key in path:
        if callable(key):
            data = key(data)
        elif isinstance(key, dict):
            hits = [x for x in data if all(x.get(k) == v for k, v in key.items())]
            assert len(hits) == 1, f"{key} selects {len(hits)} elements"
            data = hits[0]
        else:
            data = data[key]
    return data


def fmt(value, pattern) -> str:
    return pattern(value) if callable(pattern) else pattern.format(value)


# ---- formats -------------------------------------------------------------
def f3(v):  # interval ends clipped to 1 print as "1"
    return "1" if v >= 1 else f"{v:.3f}"


def thousands(v):
    return f"{v:,}"


def yesno(v):
    return "yes" if v else "no"


def frac(v):  # an exact rational bound printed as a fraction
    f = Fraction(v).limit_denominator(1000)
    assert math.isclose(float(f), v, rel_tol=1e-12)
    return f"{f.numerator}/{f.denominator}"


# ---- entries -------------------------------------------------------------
NUMBERS: list[tuple[str, str, str, tuple, tuple]] = []


def entry(doc_file, text, json_file, paths, formats):
    """One quoted text with ``len(paths)`` numbers (``{}``), each from its JSON path."""
    assert text.count("{}") == len(paths) == len(formats), text
    NUMBERS.append((doc_file, text, json_file, tuple(paths), tuple(formats)))


def one(doc_file, text, json_file, path, pattern):
    entry(doc_file, text, json_file, [path], [pattern])


# docs/theory.md: exhaustive checks of the constructions (sketchsim verify)
T = "docs/theory.md"
for label, name, err in (
    ("rank1, m = 8, N = 2", "rank1_m8_n2", "{:.0f}"),
    ("rank1, m = 8, N = 3", "rank1_m8_n3", "{:.3f}"),
    ("softmax, beta = 2, m = 4, N = 3", "softmax_m4_n3", "{:.4f}"),
    ("softmax, beta = 2, m = 8, N = 3", "softmax_m8_n3", "{:.4f}"),
):
    entry(
        T,
        f"| {label} | {{}} | {{}} | {{}} |",
        f"docs/verify/{name}.json",
        [("inputs",), ("max_abs_error",), ("exact_fraction",)],
        [thousands, err, lambda v: "1" if v == 1 else f"{v:.4f}"],
    )

# docs/theory.md: the worked example (sketchsim witness + certify)
for label, name in (
    ("hadamard, 12 rows (default)", "default"),
    ("hadamard, all 23 rows", "all23"),
    ("hadamard, 23 rows + complements", "all23c"),
    ("the same with chains", "all23cc"),
    ("golay octads, all 759", "octads"),
    ("golay octads, 100 of them, chains", "octads100"),
):
    entry(
        T,
        f"| {label} | {{}} | {{}} | {{}} | {{}} | {{}} | {{}} |",
        f"docs/certify/certify_{name}.json",
        [("inputs",)] + [("certified_rank", e) for e in ("0.5", "0.49", "0.4", "0.25", "0.1")],
        [thousands] + ["{}"] * 5,
    )
one(
    T,
    "`r >= 144 / (12 + 132/25) = {}`",
    "docs/certify/certify_default.json",
    ("bound", "0.5"),
    "{:.2f}",
)
one(
    T,
    "certified `r >= {}`. The paper",
    "docs/certify/certify_default.json",
    ("certified_rank", "0.5"),
    "{}",
)
one(T, "`12 * (12 + 2*11) = {}` inputs", "docs/certify/certify_default.json", ("inputs",), "{}")


# docs/cli.md: sketchsim transcript, sampled (q = 64) and exhaustive (q = 6)
C = "docs/cli.md"


def _vs_bound(bound):
    def text(p):
        if p["entry_entropy_below_bound"]:
            return "**below: cannot be correct**"
        return f"{p['entry_entropy_bits'] / bound:.2f}x"

    return text


_SPECS = HARD.default_protocols  # the main job's protocols
for spec in _SPECS:
    prot = ("protocols", {"spec": spec})
    entry(
        C,
        f"| `{spec}` | {{}} | {{}} | {{}} ({{}}..{{}}) | {{}} | {{}} | {{}} |",
        "docs/transcript/transcript_q64_s7.json",
        [
            prot + ("declared_bits",),
            prot + ("used_bits",),
            prot + ("entry_entropy_bits",),
            prot + ("entry_entropy_ci", 0),
            prot + ("entry_entropy_ci", 1),
            prot + ("correct_fraction",),
            prot + ("meets_bound",),
            prot,
        ],
        ["{:,.2f}", "{:,.2f}", "{:.2f}", "{:.2f}", "{:.2f}", "{:.4f}", yesno, _vs_bound(192)],
    )
    entry(
        C,
        f"| `{spec}` | {{}} | {{}} | {{}} | {{}} | {{}} | {{}} | {{}} | {{}} | {{}} |",
        "docs/transcript/transcript_q6_s7.json",
        [
            prot + ("declared_bits",),
            prot + ("used_bits",),
            prot + ("entry_entropy_bits",),
            prot + ("distinct_transcripts",),
            prot + ("log2_distinct",),
            prot + ("entropy_bits",),
            prot + ("correct_fraction",),
            prot + ("meets_bound",),
            prot,
        ],
        [
            "{:,.2f}",
            "{:,.2f}",
            "{:.2f}",
            thousands,
            "{:.2f}",
            "{:.2f}",
            "{:.4f}",
            yesno,
            _vs_bound(18),
        ],
    )
Q64 = "docs/transcript/transcript_q64_s7.json"
one(
    C,
    "has entry entropy {} bits, below the bound",
    Q64,
    ("protocols", {"spec": "clipped-counts"}, "entry_entropy_bits"),
    "{:.2f}",
)
one(
    C,
    "inputs, and it is wrong on {} of them",
    Q64,
    ("protocols", {"spec": "clipped-counts"}, "correct_fraction"),
    lambda v: f"{100 * (1 - v):.2f}%",
)
one(
    C,
    "take values in only {} bits' worth",
    Q64,
    ("protocols", {"spec": "kernel"}, "used_bits"),
    "{:.0f}",
)
one(
    C,
    "carry {} bits of entry",
    Q64,
    ("protocols", {"spec": "kernel"}, "entry_entropy_bits"),
    "{:.2f}",
)
one(C, "`raw` uses\n{} of its", Q64, ("protocols", {"spec": "raw"}, "used_bits"), "{:.2f}")
one(
    C,
    "`clipped-counts` has {}\nbits of both",
    "docs/transcript/transcript_q6_s7.json",
    ("protocols", {"spec": "clipped-counts"}, "entropy_bits"),
    "{:.2f}",
)

# docs/cli.md: sketchsim frontier --protocol kernel --vary bits=1..12
for q, s in ((4, 3), (4, 7), (8, 3), (8, 7), (16, 3), (16, 7)):
    cell = ("cells", {"q": q, "s": s})
    entry(
        C,
        f"| {q} | {s} | {{}} | {{}} {{}} | {{}} | {{}} | {{}} | {{}} | {{}} |",
        "docs/frontier/frontier_kernel_bits.json",
        [
            cell + ("value",),
            cell + ("inputs",),
            cell + ("mode",),
            cell + ("bound_bits",),
            cell + ("declared_bits",),
            cell + ("used_bits",),
            cell + ("entry_entropy_bits",),
            cell + ("declared_ratio",),
        ],
        [
            "{}",
            thousands,
            lambda m: "all" if m == "exhaustive" else "sampled",
            "{:.2f}",
            "{:.2f}",
            "{:.2f}",
            "{:.2f}",
            "{:.2f}",
        ],
    )

# docs/cli.md: check-certificate on the default witness family
CD = "docs/certify/certify_default.json"
entry(
    C,
    "For the default witness\nfamily: {} pairs, {} chains, bound {}, `r >= {}`.",
    CD,
    [("pairs", "0.5"), ("edges",), ("bound", "0.5"), ("certified_rank", "0.5")],
    ["{}", "{}", frac, "{}"],
)


# docs/theory.md: how the bound grows with m (sketchsim bound --m 2 --to 64 --step 2)
B = "docs/bound/bound_m2_64.json"
for _m in range(2, 65, 2):
    _row = ("rows", {"m": _m})
    entry(
        T,
        f"| {_m} | {{}} | {{}} | {{}} | {{}} | {{}} |",
        B,
        [
            _row + ("code",),
            _row + ("codewords",),
            _row + ("pairs",),
            _row + ("bound",),
            _row + ("certified_rank",),
        ],
        ["{}", thousands, thousands, "{:.2f}", thousands],
    )
entry(
    T,
    "Least-squares fit over these {} widths: `log2 r = {} m - {}`",
    B,
    [("growth", "points"), ("growth", "slope"), ("growth", "intercept")],
    ["{}", "{:.3f}", lambda v: f"{-v:.2f}"],
)
one(T, "certificate shows `r >= 2^({} m)` in this range", B, ("growth", "slope"), "{:.2f}")
one(T, "m = 64 it certifies `r >= {}`", B, ("rows", {"m": 64}, "certified_rank"), thousands)
one(
    T,
    "the exact `beta*` =\n{} where bisected",
    B,
    ("rows", {"m": 2}, "exact_softmax_threshold"),
    "{:.4f}",
)


def _fit(rows, lo, hi):
    """Least-squares slope and intercept of log2 r over lo <= m <= hi (as `bound` fits)."""
    pts = [(r["m"], math.log2(r["certified_rank"])) for r in rows if lo <= r["m"] <= hi]
    n = len(pts)
    mx = sum(p[0] for p in pts) / n
    my = sum(p[1] for p in pts) / n
    slope = sum((x - mx) * (y - my) for x, y in pts) / sum((x - mx) ** 2 for x, _ in pts)
    return slope, my - slope * mx


# docs/results.md: Lemma 4 over 65,536 streamed words (the same bound run)
R = "docs/results.md"
entry(
    R,
    "| 65,536 (`bound` now) | {} | {} |",
    B,
    [("rows", {"m": 64}, "certified_rank"), ("rows", {"m": 64}, "certified_rank")],
    [thousands, lambda r: f"{math.log2(r) / 64:.4f}"],
)
entry(
    R,
    "(m = 48: 416 -> {}; m = 56: 990 -> {})",
    B,
    [("rows", {"m": 48}, "certified_rank"), ("rows", {"m": 56}, "certified_rank")],
    [thousands, thousands],
)
entry(
    R,
    "`log2 r = {} m - {}` over\nthose widths",
    B,
    [("rows", lambda rows: _fit(rows, 34, 64)[0]), ("rows", lambda rows: -_fit(rows, 34, 64)[1])],
    ["{:.3f}", "{:.2f}"],
)

# docs/results.md: `bound` realized (sketchsim bound --m 8 --to 32 --step 4 --export)
B832 = "docs/bound/bound_m8_32.json"
for _m in (8, 12, 16, 20, 24, 28, 32):
    _row = ("rows", {"m": _m})
    _real = _row + ("realized",)
    entry(
        R,
        f"| {_m} | {{}} | {{}} of {{}} | {{}} | {{}} | {{}} | {{}} | {{}} | {{}} |",
        B832,
        [
            _row + ("code",),
            _real + ("codewords",),
            _row + ("codewords",),
            _real,
            _real + ("inputs",),
            _real + ("build_seconds",),
            _real + ("certify_seconds",),
            _row + ("certified_rank",),
            _real + ("certified_rank",),
        ],
        [
            "{}",
            thousands,
            thousands,
            lambda r: (
                "tokens"
                if r["format"] == "tokens"
                else f"packed, {round(r['file_bytes'] / 1e6)} MB"
            ),
            thousands,
            "{:.1f}",
            "{:.1f}",
            "{}",
            "**{}**",
        ],
    )


# docs/results.md: the softmax ablation on the witness family (sketchsim ablation --seeds 2)
AB = "docs/ablation/ablation_seeds2.json"


def _per_seed(variant, key, pattern):
    def pick(rows):
        return ", ".join(pattern.format(r[key]) for r in rows if r["variant"] == variant)

    return ("rows", pick)


for _v in (
    "family, 0/1 tokens, Adam 0.03 (first round)",
    "family, +-1 tokens, Adam 0.03",
    "family, +-1 tokens, Adam 0.01",
    "family, +-1, AdamW warm-up+cosine, clip",
    "random triples, 0/1 tokens, Adam 0.03",
    "random triples, +-1 tokens, Adam 0.03",
):
    entry(
        R,
        f"| {_v} | 2 | {{}} | {{}} | {{}} |",
        AB,
        [
            _per_seed(_v, "family_sequence_error", "{:.3f}"),
            _per_seed(_v, "family_max_abs_error", "{:.2f}"),
            _per_seed(_v, "family_mse", "{:.2f}"),
        ],
        ["{}", "{}", "{}"],
    )
one(R, "far below the {} of a head that ignores the context", AB, ("baseline_mse",), "{:.2f}")


# README.md
RM = "README.md"
one(
    RM,
    "compares their transcript bits with the `q*log2(s+1)` bound ({} bits here)",
    "docs/transcript/transcript_q64_s7.json",
    ("bound_bits",),
    "{:.0f}",
)
one(
    RM,
    "builds a length-3 witness family from a code ({} inputs at m = 24 by default)",
    "docs/certify/certify_default.json",
    ("inputs",),
    "{}",
)
one(
    RM,
    "solving a family (`r >= {}` for the default)",
    "docs/certify/certify_default.json",
    ("certified_rank", "0.5"),
    "{}",
)


# docs/results.md: the proof check recorded by
# `bound --m 8 --to 20 --step 4 --export DIR --certificates`
BC = "docs/bound/bound_m8_20_certificates.json"
_c20 = ("rows", {"m": 20}, "realized", "certificate")
entry(R, "lists {} chains, 23.8 MB)", BC, [_c20 + ("chains",)], [thousands])
entry(
    R,
    "proved (m = 20: r >= {}, bound {}, {} s in that run;",
    BC,
    [_c20 + ("checked_rank",), _c20 + ("checked_bound",), _c20 + ("seconds",)],
    ["{}", "{}", "{:.1f}"],
)


# docs/reproduce/report.md and results.md: the report table of the full reproduce run
REP = "docs/reproduce/report.json"
for _i in range(len(load(REP)["rows"])):
    for _page in ("docs/reproduce/report.md", R):
        entry(
            _page,
            "| {} | {} | {} | {} |",
            REP,
            [
                ("rows", _i, "claim"),
                ("rows", _i, "paper"),
                ("rows", _i, "measured"),
                ("rows", _i, "agrees"),
            ],
            ["{}"] * 4,
        )
one(R, "the process {} s (the resumed OOD runs not counted)", REP, ("seconds",), "{:.0f}")

# results.md: the witness sweep of that run (sweep_witness.json)
SW = "docs/reproduce/sweep_witness.json"


def _runs(model, rank=None):
    def pick(runs):
        rs = [
            r
            for r in runs
            if r["spec"]["model"] == model and (rank is None or r["spec"]["rank"] == rank)
        ]
        return sorted(rs, key=lambda r: r["spec"]["seed"])

    return ("runs", pick)


def _seeds(key, pattern):
    return lambda rs: " / ".join(pattern.format(r[key]) for r in rs)


entry(
    R,
    "the {} training runs took {} s as recorded in the\nsweep files",
    SW,
    [
        ("runs", lambda runs: len(runs) + len(load("docs/ood/sweep_16_seeds.json")["runs"])),
        (
            "runs",
            lambda runs: sum(
                r["seconds"] for r in runs + load("docs/ood/sweep_16_seeds.json")["runs"]
            ),
        ),
    ],
    ["{}", "{:.0f}"],
)
for _r in (1, 2, 4, 8, 9, 10, 11, 12, 13, 14, 15, 16, 32, 64):
    entry(
        R,
        f"| kernel (table) | {_r} | family | {{}} | {{}} | {{}} |",
        SW,
        [_runs("kernel", _r), _runs("kernel", _r), _runs("kernel", _r)],
        [
            _seeds("sequence_error", "{:.3f}"),
            _seeds("max_abs_error", "{:.3f}"),
            _seeds("steps", "{:,}"),
        ],
    )
entry(
    R,
    "| softmax | - | 4,000 random triples | {} | {} | {} |",
    SW,
    [_runs("softmax"), _runs("softmax"), _runs("softmax")],
    [
        _seeds("sequence_error", "{:.3f}"),
        _seeds("max_abs_error", "{:.3f}"),
        _seeds("steps", "{:,}"),
    ],
)
#: The smallest max error of the kernel heads with r <= 8 (all seeds): quoted twice.
_R8_MIN_ERROR = (
    "runs",
    lambda runs: min(
        r["max_abs_error"]
        for r in runs
        if r["spec"]["model"] == "kernel" and r["spec"]["rank"] <= 8
    ),
)
one(
    R,
    "is wrong on every seed (max error\n{} or more)",
    SW,
    _R8_MIN_ERROR,
    "{:.2f}",
)
one(
    R,
    "every head with `r <= 8` ends with a max error of {} or more",
    SW,
    _R8_MIN_ERROR,
    "{:.2f}",
)
entry(
    R,
    "max error {}, at the 2,000-step",
    SW,
    [_runs("kernel", 14)],
    [lambda rs: f"{rs[2]['max_abs_error']:.2f}"],
)
entry(
    R,
    "max error {}, exact on its training triples after {} steps.",
    SW,
    [_runs("softmax"), _runs("softmax")],
    [_seeds("max_abs_error", "{:.3f}"), _seeds("steps", "{:,}")],
)

# results.md: the OOD transition (docs/ood/sweep_default_plan.json = reproduce's sweep_ood.json)
OOD = "docs/ood/sweep_default_plan.json"
_RANKS = (4, 8, 12, 16, 24, 32, 64, 128)


def _ood_row(scale):
    def text(data):
        cells = {
            a["rank"]: a
            for a in data["summary"]
            if a["scale"] == scale and a["model"] == "kernel" and a["feature_map"] == "elu1"
        }
        clear = data["transition"][scale]["rank"]
        out = []
        for r in _RANKS:
            a = cells[r]
            cell = f"{a['mean']:.3f} ({f3(a['ci_low'])}-{f3(a['ci_high'])})"
            out.append(f"**{cell}**" if r == clear else cell)
        cross = min(r for r in _RANKS if cells[r]["mean"] >= 0.95)
        return " | ".join(out) + f" | **{clear}** | {cross}"

    return text


for _scale in ("8:64:2000", "10:128:2000", "12:256:2000"):
    one(R, f"| {_scale} | {{}} |", OOD, (), _ood_row(_scale))


# results.md: the OOD transition at the plan's seed count (issue #32; reproduce's sweep_ood.json)
O16 = "docs/ood/sweep_16_seeds.json"


def _slope_text(c):
    return f"{c['slope']:+.4f} ({c['ci_low']:+.4f} to {c['ci_high']:+.4f})"


def _ood16_row(scale):
    def text(data):
        from sketchsim.experiments.stats import rank_trend

        cells = {
            a["rank"]: a
            for a in data["summary"]
            if a["scale"] == scale and a["model"] == "kernel" and a["feature_map"] == "elu1"
        }
        found = data["transition"][scale]
        out = []
        for r in _RANKS:
            a = cells[r]
            cell = f"{a['mean']:.3f} ({f3(a['ci_low'])}-{f3(a['ci_high'])})"
            out.append(f"**{cell}**" if r == found["rank"] else cell)
        cross = min(r for r in _RANKS if cells[r]["mean"] >= 0.95)
        (gain,) = [c for c in rank_trend(data["runs"]) if c["scale"] == scale]
        return (
            " | ".join(out)
            + f" | **{found['low']}-{found['rank']}** | {cross} | {_slope_text(gain)}"
        )

    return text


for _scale in ("8:64:2000", "10:128:2000", "12:256:2000"):
    one(R, f"| {_scale} (16 seeds) | {{}} |", O16, (), _ood16_row(_scale))
for _r in _RANKS:
    one(R, f"| r = {_r} | {{}} |", O16, ("trend", {"rank": _r}), _slope_text)


def _rule(pilot):
    from sketchsim.experiments.stats import seed_count_rule

    got = seed_count_rule(pilot["runs"], 0.95, half_width=0.01, band=0.05)
    return (
        f"pooled seed sd {got['pooled_sd']:.4f} over {got['cells']} cells "
        f"({got['df']} degrees of freedom), upper 95% bound {got['sd_upper']:.4f}, "
        f"hence **{got['seeds']} seeds**"
    )


one(R, "{}", OOD, ("runs", lambda runs: {"runs": runs}), _rule)


def _near_halves(data):
    """Half-widths of the 16-seed cells whose mean is within 0.05 of 0.95 (none clipped)."""
    from sketchsim.experiments.stats import pooled_seed_sd

    near = [
        a
        for a in data["summary"]
        if a["model"] == "kernel" and abs(a["mean"] - 0.95) <= 0.05 and a["ci_high"] < 1
    ]
    halves = {(a["scale"].split(":")[0], a["rank"]): (a["ci_high"] - a["ci_low"]) / 2 for a in near}
    wide = [f"m = {m} r = {r}" for (m, r), h in halves.items() if h > 0.01]
    sd = pooled_seed_sd(data["runs"], "test_accuracy", 0.95, 0.05)
    return (
        f"pooled seed sd {sd['sd']:.4f} over the {sd['cells']} cells within 0.05 of 0.95; "
        f"their half-widths run from {min(halves.values()):.4f} to {max(halves.values()):.4f}, "
        f"above 0.01 at {len(wide)} cells ({', '.join(wide)})"
    )


one(R, "{}", O16, (), _near_halves)


def _pilot_reproduced(data):
    pilot = {json.dumps(r["spec"], sort_keys=True): r for r in load(OOD)["runs"]}
    same = [
        r["test_accuracy"] == pilot[k]["test_accuracy"]
        for r in data["runs"]
        if (k := json.dumps(r["spec"], sort_keys=True)) in pilot
    ]
    assert len(same) == len(pilot)
    return f"{sum(same)} of the pilot's {len(pilot)}"


one(R, "{} runs", O16, (), _pilot_reproduced)
one(
    R,
    "Dense softmax over 16 seeds: worst seed {}",
    O16,
    ("summary",),
    lambda rows: ", ".join(f"{a['min']:.4f}" for a in rows if a["model"] == "softmax"),
)


def _capped_softmax(runs):
    cut = [r for r in runs if r["spec"]["model"] == "softmax" and r["steps"] >= 2000]
    return ", ".join(
        f"{r['spec']['scale']} seed {r['spec']['seed']} (training max error "
        f"{r['train_max_abs_error']:.3f}, test {r['test_accuracy']:.3f})"
        for r in sorted(cut, key=lambda r: r["spec"]["seed"])
    )


def _softmax_reached(runs):
    return min(
        r["test_accuracy"] for r in runs if r["spec"]["model"] == "softmax" and r["steps"] < 2000
    )


def _planned_half(data):
    from scipy.stats import t

    from sketchsim.experiments.stats import seed_count_rule

    got = seed_count_rule(data["runs"], 0.95, half_width=0.01, band=0.05)
    n = got["seeds"]
    half = t.ppf(0.975, n - 1) * got["sd_upper"] / math.sqrt(n)
    return f"t(0.975, {n - 1}) * {got['sd_upper']:.4f} / {math.sqrt(n):g} = {half:.4f}"


def _gain_range(runs):
    from sketchsim.experiments.stats import rank_trend

    slopes = [c["slope"] for c in rank_trend(runs)]
    return f"{min(slopes):.3f}-{max(slopes):.3f}"


def _top_rank_means(data):
    means = [
        a["mean"] for a in data["summary"] if a["model"] == "kernel" and a["rank"] == max(_RANKS)
    ]
    return ", ".join(f"{v:.3f}" for v in means)


one(R, "short of the 0.05 margin: {};", O16, ("runs",), _capped_softmax)
one(R, "and the lowest of them scores {}.", O16, ("runs", _softmax_reached), "{:.4f}")
one(R, "(`{}`)", OOD, (), _planned_half)
one(R, "seeds of the 27 cells ({} runs)", O16, ("runs", len), "{}")
entry(
    R,
    "our transition grows by a factor of {}\n  ({} to {})",
    O16,
    [
        ("transition", lambda t: t["12:256:2000"]["rank"] / t["8:64:2000"]["rank"]),
        ("transition", "8:64:2000", "rank"),
        ("transition", "12:256:2000", "rank"),
    ],
    ["{:.1f}", "{}", "{}"],
)
one(R, "by\n  {} per doubling on average", O16, ("runs",), _gain_range)
entry(
    R,
    "at r = 128 the means are {}, and the best single run of any\n  kernel head scores {}.",
    O16,
    [
        (),
        (
            "runs",
            lambda runs: max(r["test_accuracy"] for r in runs if r["spec"]["model"] == "kernel"),
        ),
    ],
    [_top_rank_means, "{:.4f}"],
)


# results.md: why the OOD kernel heads plateau (benchmarks/ood_plateau.py, validation splits)
PLATEAU = "docs/ood/plateau_validation.json"
PLATEAU12 = "docs/ood/plateau_validation_m12.json"  # the same screen at 12:256:2000
_PLATEAU_SCALES = ("8:64:2000", "10:128:2000", "12:256:2000")


def _all_plateau(rows):
    return rows + load(PLATEAU12)["rows"]


def _plateau_row(variant):
    def text(rows):
        mine = [r for r in _all_plateau(rows) if r["variant"] == variant]
        cells = []
        for scale in _PLATEAU_SCALES:
            acc = sorted((r for r in mine if r["scale"] == scale), key=lambda r: r["seed"])
            mean = sum(r["validation_accuracy"] for r in acc) / len(acc)
            seeds = " / ".join(f"{r['validation_accuracy']:.3f}" for r in acc)
            cells.append(f"{mean:.4f} ({seeds})")
        reached = sum(r["reached_margin"] for r in mine)
        train = sum(r["train_max_abs_error"] for r in mine) / len(mine)
        wrong = sum(r["wrong_positions"] for r in mine)
        near = sum(round(r["near_miss"] * r["wrong_positions"]) for r in mine if r["near_miss"])
        return (
            " | ".join(cells) + f" | {reached} of {len(mine)} | {train:.3f} | {near / wrong:.2f} |"
        )

    return text


one(R, "the same\nwith `--scales {}`)", PLATEAU12, ("parameters", "scales"), "{}")
for _v in ("default", "4x steps", "float64", "2x triples", "4x rank"):
    one(R, f"| {_v} | {{}}", PLATEAU, ("rows",), _plateau_row(_v))


def _plateau_gain(variant):
    def text(rows):
        rows = _all_plateau(rows)

        def mean(v, scale):
            acc = [
                r["validation_accuracy"] for r in rows if (r["variant"], r["scale"]) == (v, scale)
            ]
            return sum(acc) / len(acc)

        return [mean(variant, sc) - mean("default", sc) for sc in _PLATEAU_SCALES]

    return text


one(
    R,
    "4x the rank changes the mean by at most {}",
    PLATEAU,
    ("rows", _plateau_gain("4x rank"), lambda g: max(abs(v) for v in g)),
    "{:.3f}",
)
one(
    R,
    "(2x triples: {})",
    PLATEAU,
    ("rows", _plateau_gain("2x triples")),
    lambda g: ", ".join(f"{v:+.3f}" for v in g),
)


def _rank128_gain(data):
    means = {(a["scale"], a["rank"]): a["mean"] for a in data["summary"] if a["model"] == "kernel"}
    gains = [means[(s, 128)] - means[(s, 64)] for s in ("8:64:2000", "10:128:2000", "12:256:2000")]
    return f"{min(gains):.3f}-{max(gains):.3f}"


one(R, "r = 64 to 128 adds\n  {})", O16, (), _rank128_gain)
one(
    R,
    "but the largest upper end, {}, is far from 0.)",
    O16,
    ("trend", lambda cells: max(c["ci_high"] for c in cells)),
    "{:.4f}",
)


# results.md: the bit audit of trained heads (sketchsim audit)
def _audit_row(rank):
    def text(heads):
        (h,) = [h for h in heads if h["spec"]["model"] == "kernel" and h["spec"]["rank"] == rank]
        acc = {r["bits"]: r for r in h["rows"]}
        k = h["smallest_bits_within_1_point"]
        return (
            f"{h['reported_accuracy']:.3f} | {h['state_bits_float32']:,} | {k} | "
            f"{acc[k]['state_bits']:,} | "
            f"{acc[4]['accuracy']:.3f} / {acc[8]['accuracy']:.3f} / {acc[12]['accuracy']:.3f}"
        )

    return text


for _label, _file, _ranks in (
    ("witness (m = 24)", "witness_audit", (9,)),
    ("witness", "witness_audit", (12, 16, 32)),
    ("OOD 10:128:2000", "ood_10_128_audit", (16, 64, 128)),
):
    for _r in _ranks:
        one(
            R, f"| {_label} | {_r} | {{}} |", f"docs/audit/{_file}.json", ("heads",), _audit_row(_r)
        )


# results.md: choosing the feature map on validation (ablation --screen-maps)
SV = "docs/ood/screen_validation_m10.json"


def _val(fmap, rank, bold=False):
    def pick(rows):
        (r,) = [r for r in rows if r["feature_map"] == fmap and r["rank"] == rank]
        return f"**{r['validation_accuracy']:.3f}**" if bold else f"{r['validation_accuracy']:.3f}"

    return ("rows", pick)


for _label, _fmap in (
    ("mlp", "mlp"),
    ("elu1", "elu1"),
    ("relu", "relu"),
    ("relu2", "relu2"),
    ("favor (FAVOR+, learned projection)", "favor"),
    ("hedgehog", "hedgehog"),
    ("expmap", "expmap"),
):
    entry(
        R,
        f"| {_label} | {{}} | {{}} |",
        SV,
        [_val(_fmap, 16, _fmap == "elu1"), _val(_fmap, 64, _fmap == "elu1")],
        ["{}", "{}"],
    )

# results.md: choosing the stop margin on validation (ablation --screen-stop)
SS = "docs/ood/screen_stop_validation.json"


def _stop_row(model, margin, bold):
    def text(rows):
        rs = [r for r in rows if r["model"] == model and r["stop_below"] == margin]
        cells = []
        for scale in ("8:64:2000", "10:128:2000", "12:256:2000"):
            accs = [
                r["validation_accuracy"]
                for r in sorted(rs, key=lambda r: r["seed"])
                if r["scale"] == scale
            ]
            cells.append(" / ".join(f"{a:.3f}" for a in accs))
        worst = f"{min(r['validation_accuracy'] for r in rs):.3f}"
        return " | ".join(cells) + " | " + (f"**{worst}**" if bold else worst)

    return ("rows", text)


for _m in (0.25, 0.1, 0.05, 0.02):
    _label = f"**{_m}**" if _m == 0.05 else f"{_m}"
    one(R, f"| softmax | {_label} | {{}} |", SS, _stop_row("softmax", _m, _m == 0.05), "{}")
one(R, "| kernel (elu1, r = 16) | 0.25 | {} |", SS, _stop_row("kernel", 0.25, False), "{}")
one(R, "{} is chosen (`config.OOD_STOP_BELOW`", SS, ("chosen",), "{}")


# results.md: smallest feature rank at small m (sketchsim minrank --m 2..6 --seeds 2)
MR = "docs/minrank/minrank.json"


def _minrank_row(m):
    def text(rows):
        (r,) = [r for r in rows if r["m"] == m]
        err = f"{r['trained_nonneg']['max_abs_error']:.3f}"
        return (
            f"{r['inputs']:,} | {r['lower']['certified_rank']} | {r['construction']['rank']} "
            f"(subsets, p = {r['construction']['params']['p']}) | {r['trained_nonneg']['rank']} "
            f"({'max error ' if m == 2 else ''}{err}) | "
            f"{r['trained_signed']['rank']} (the nonneg head) | "
            f"{r['exact_rank']} | {r['softmax']['sufficient']:.4f} | {r['softmax']['exact']:.4f}"
        )

    return ("rows", text)


for _m in range(2, 7):
    one(R, f"| {_m} | {{}} |", MR, _minrank_row(_m), "{}")

# results.md: brackets m = 2..8 (sketchsim minrank --m 2..8 --train-max-m 0)
MB = "docs/minrank/minrank_brackets_m2_8.json"


def _bracket(m, decorate):
    def text(rows):
        (r,) = [r for r in rows if r["m"] == m]
        return f"{r['lower']['certified_rank']} | " + decorate.format(r["lower_nonneg"]["lower"])

    return ("rows", text)


for _m, _dec in (
    (2, "{}"),
    (3, "{}"),
    (4, "{}"),
    (5, "**{}** (pentagon)"),
    (6, "{} (blocks)"),
    (7, "{}"),
    (8, "{} (blocks)"),
):
    one(R, f"| {_m} | {{}} | {'**[' if _m == 5 else '['}", MB, _bracket(_m, _dec), "{}")
for _m in (7, 8):  # no trained head: the upper end is the subset construction
    one(
        R,
        f"| {_m} | {{}} (subsets, p = ",
        MB,
        ("rows", lambda rows, m=_m: next(r for r in rows if r["m"] == m)),
        lambda r: (
            f"{r['lower']['certified_rank']} | {r['lower_nonneg']['lower']}"
            f"{' (blocks)' if r['m'] == 8 else ''}"
            f" | [{r['lower_nonneg']['lower']}, {r['construction']['rank']}]"
        ),
    )


# results.md: the witness softmax head at two learning rates
LG = "docs/witness/softmax_lr_grid.json"


def _lr(lr):
    return (
        "runs",
        lambda runs: " / ".join(
            f"{r['max_abs_error']:.3f}"
            for r in sorted(runs, key=lambda r: r["spec"]["seed"])
            if r["spec"]["lr"] == lr
        ),
    )


entry(
    R,
    "{} (lr 0.03) and {} (lr 0.01). Best over\nthe grid: {}; "
    "mean ± std over seeds at either rate: {} ± {}.",
    LG,
    [_lr(0.03), _lr(0.01), ("lr_grid", 0, "best"), ("lr_grid", 0, "mean"), ("lr_grid", 0, "std")],
    ["{}", "{}", "{:.3f}", "{:.3f}", "{:.3f}"],
)


# results.md: the bits frontier and the rank frontier (sketchsim frontier, committed files)
def _fcell(cells, q, s, spec):
    (c,) = [c for c in cells if c["q"] == q and c["s"] == s and c["spec"] == spec]
    return c


def _frontier_row(q, s, specs):
    def text(cells):
        first = _fcell(cells, q, s, specs[0])
        mode = "all" if first["mode"] == "exhaustive" else "sampled"
        out = [f"{first['inputs']:,} {mode}", f"{first['bound_bits']:.0f}"]
        for spec in specs:
            c = _fcell(cells, q, s, spec)
            if not c["found"]:
                out.append("none")
            elif c["search"] == "fixed":
                out.append(f"{c['declared_bits']:,.0f} b ({c['declared_ratio']:.2f}x)")
            else:
                out.append(
                    f"{c['param']}={c['value']}: "
                    f"{c['declared_bits']:,.0f} b ({c['declared_ratio']:.2f}x)"
                )
        return " | ".join(out)

    return ("cells", text)


for _q in (4, 8, 16, 32, 64):
    for _s in (1, 3, 7, 15):
        one(
            R,
            f"| {_q} | {_s} | {{}} |",
            "docs/frontier/frontier_bits.json",
            _frontier_row(_q, _s, ("kernel", "kernel:values=blocks", "multihead", "block-counts")),
            "{}",
        )
        one(
            R,
            f"| {_q} | {_s} | {{}} |",
            "docs/frontier/frontier_r.json",
            _frontier_row(_q, _s, ("kernel:bits=4", "kernel:bits=4,values=blocks")),
            "{}",
        )


# docs/benchmarks.md: issue #31, round 4 session 2 (benchmarks/bench_main_job.py,
# bench_roofline.py --main-job, bench_trained.py)
def main_job_rows(json_file, labels):
    """The table rows of ``bench_main_job.py --json``: one per tree, in order."""
    for i, label in enumerate(labels):
        entry(
            "docs/benchmarks.md",
            f"| {label} | {{}} s | {{}} s | {{}} s | {{}}x | {{}}x |",
            json_file,
            [("rows", i, k)
             for k in ("warm_s", "cold_s", "peer_s", "warm_over_peer", "cold_over_warm")],
            ["{:.2f}"] * 5,
        )  # fmt: skip


def main_job_ratio(text, json_file):
    """The main job and block-counts against the NumPy peer (``bench_roofline.py --main-job``)."""
    keys = ("main_job_s", "numpy_peer_1m_s", "ratio", "block_counts_1m_s", "block_counts_speedup")
    paths = [("main_job", k) for k in keys]
    entry("docs/benchmarks.md", text, json_file, paths, ["{:.2f}"] * 3 + ["{:.3f}", "{:.2f}"])


main_job_rows("docs/roofline/main_job_session2.json", ("fbce0ce (session start)", "this code"))
main_job_ratio(
    "the main job {} s against the peer's\n{} s ({}x), and block-counts `measure()` on the peer's "
    "1,000,000 inputs,\nwarm in process, {} s: **{}x faster than the peer**.",
    "docs/roofline/session2.json",
)
for _name in ("trained elu1 L=1", "trained elu1 L=2", "kernel:values=blocks", "kernel"):
    for _label, _file in (("fbce0ce", "trained_before"), ("this code", "trained_after")):
        entry(
            "docs/benchmarks.md",
            f"| {_name} | {_label} | {{}} | {{}} | {{}} |",
            f"docs/roofline/{_file}.json",
            [("rows", {"protocol": _name}, k)
             for k in ("coordinates", "us_per_input", "ns_per_coordinate")],
            ["{}", "{:.2f}", "{:.1f}"],
        )  # fmt: skip


# docs/benchmarks.md: issue #31, round 4 session 3 (bench_trained.py with its NumPy peer,
# bench_main_job.py, bench_cold_compile.py)
_S3_FILES = (
    ("c7d0b56 (session start)", "trained_session3_before"),
    ("c7d0b56 (session start)", "trained_session3_before_run2"),
    ("e571a6e (this code)", "trained_session3"),
    ("e571a6e (this code)", "trained_session3_run2"),
)


def _over_engine(name, key):
    def ratio(d):
        peer = lookup(d, ("numpy_peer", {"protocol": name}, key))
        return peer / lookup(d, ("rows", {"protocol": name}, "us_per_input"))

    return (ratio,)


for _name in ("trained elu1 L=1", "trained elu1 L=2"):
    _cells = [("time_utc", lambda s: s[11:]), ("rows", {"protocol": _name}, "us_per_input"),
              ("rows", {"protocol": _name}, "ns_per_coordinate"),
              ("numpy_peer", {"protocol": _name}, "numpy_us_per_input"),
              _over_engine(_name, "numpy_us_per_input")]  # fmt: skip
    _formats = ["{}", "{:.2f}", "{:.1f}", "{:.2f}", "{:.2f}"]
    for _label, _file in _S3_FILES:
        entry(
            "docs/benchmarks.md",
            f"| {_name} | {_label} | {{}} | {{}} | {{}} | {{}} | {{}}x | {{}} | {{}}x |",
            f"docs/roofline/{_file}.json",
            _cells + [("numpy_peer", {"protocol": _name}, "numpy_shared_us_per_input"),
                      _over_engine(_name, "numpy_shared_us_per_input")],
            _formats + ["{:.2f}", "{:.2f}"],
        )  # fmt: skip
    # the init hook alone was timed before the second peer existed
    entry(
        "docs/benchmarks.md",
        f"| {_name} | 5800ab1 (init hook) | {{}} | {{}} | {{}} | {{}} | {{}}x | not timed | - |",
        "docs/roofline/trained_init.json",
        _cells,
        _formats,
    )
_S3 = "docs/roofline/trained_session3.json"


def _per_kernel(name):
    def ratio(d):
        kernel = lookup(d, ("rows", {"protocol": "kernel:values=blocks"}, "ns_per_coordinate"))
        return lookup(d, ("rows", {"protocol": name}, "ns_per_coordinate")) / kernel

    return (ratio,)


entry(
    "docs/benchmarks.md",
    "the same shape) takes\n{} ns: the trained model is still {}x (L=1) and {}x (L=2) slower per",
    _S3,
    [("rows", {"protocol": "kernel:values=blocks"}, "ns_per_coordinate"),
     _per_kernel("trained elu1 L=1"), _per_kernel("trained elu1 L=2")],
    ["{:.1f}", "{:.0f}", "{:.0f}"],
)  # fmt: skip
main_job_rows("docs/roofline/main_job_session3.json", ("c7d0b56", "f023f9f"))


# docs/benchmarks.md: issue #31, round 4 session 4 (bench_trained.py, two runs of each code)
_S4 = "docs/roofline/trained_session4_{}.json"
_S4_FILES = (("before_run1", "session start"), ("before_run2", "session start"),
             ("run1", "this code"), ("run2", "this code"))  # fmt: skip
for _name in ("trained elu1 L=1", "trained elu1 L=2"):
    _cells = [("time_utc", lambda s: s[11:]), ("rows", {"protocol": _name}, "us_per_input"),
              ("rows", {"protocol": _name}, "ns_per_coordinate"),
              ("numpy_peer", {"protocol": _name}, "numpy_us_per_input"),
              _over_engine(_name, "numpy_us_per_input")]  # fmt: skip
    for _run, _label in _S4_FILES:
        entry(
            "docs/benchmarks.md",
            f"| {_name} | {{}} ({_label}) | {{}} | {{}} | {{}} | {{}} | {{}}x | {{}} | {{}}x |",
            _S4.format(_run),
            [("code",)] + _cells
            + [("numpy_peer", {"protocol": _name}, "numpy_shared_us_per_input"),
               _over_engine(_name, "numpy_shared_us_per_input")],
            ["{}"] + _formats + ["{:.2f}", "{:.2f}"],
        )  # fmt: skip


def _s4_speedups(name):
    """Session 4's speed-ups of ``name`` (before / after, run by run): the lowest and highest."""

    def us(run):
        data = json.loads((ROOT / _S4.format(run)).read_text())
        return lookup(data, ("rows", {"protocol": name}, "us_per_input"))

    lo, hi = sorted(us(f"before_{run}") / us(run) for run in ("run1", "run2"))
    return [(lambda d: lo,), (lambda d: hi,)]


entry(
    "docs/benchmarks.md",
    "The one-layer model is {}-{}x faster than at the session's start, the\n"
    "two-layer model {}-{}x.",
    _S4.format("run1"),
    _s4_speedups("trained elu1 L=1") + _s4_speedups("trained elu1 L=2"),
    ["{:.1f}"] * 4,
)
entry(
    "docs/benchmarks.md",
    "coordinates, the same shape) takes {} ns in the first run: the trained model is {}x\n"
    "(L=1) and {}x (L=2) slower per coordinate.",
    _S4.format("run1"),
    [("rows", {"protocol": "kernel:values=blocks"}, "ns_per_coordinate"),
     _per_kernel("trained elu1 L=1"), _per_kernel("trained elu1 L=2")],
    ["{:.1f}", "{:.1f}", "{:.0f}"],
)  # fmt: skip
main_job_ratio(
    "split is steadier). In these runs: the main job {} s against the peer's {} s\n({}x); "
    "block-counts `measure()` on the peer's 1,000,000 inputs {} s, {}x\nfaster than the peer",
    "docs/roofline/session3.json",
)
one(
    "docs/benchmarks.md",
    "(c7d0b56 in the same minutes: {}x).",
    "docs/roofline/session3_before.json",
    ("main_job", "block_counts_speedup"),
    "{:.2f}",
)
for _file, _text in (
    ("session3_before", "which measures each limit once: {} G\npopcount words/s there"),
    ("session3", "popcount words/s there, against {} here"),
):
    one("docs/benchmarks.md", _text, f"docs/roofline/{_file}.json",
        ("popcount_words_per_s", 0, lambda v: v / 1e9), "{:.2f}")  # fmt: skip
_CC = "docs/roofline/cold_compile_session3.json"


def _loop_of(module_prefix):
    """Compile seconds of the engine loop whose protocol module starts with the prefix."""

    def seconds(d):
        (name,) = [n for n, m in d["engine_loops"].items() if m.startswith(module_prefix)]
        return lookup(d, ("functions", {"name": name}, "seconds"))

    return (seconds,)


entry(
    "docs/benchmarks.md",
    "job takes {} s, of which numba compiling {} s; the three engine loops\n{} s "
    "(kernel heads {} s, block-counts {} s, raw {} s), the kernel\nheads' `emit` {} s",
    _CC,
    [("job_s",), ("compile_s",), ("engine_loops_s",), _loop_of("sketchsim.sketch.kernel_head"),
     _loop_of("sketchsim.sketch.block_counts"), _loop_of("sketchsim_plugin_raw"),
     ("functions", {"name": "sketchsim.sketch.kernel_head.emit"}, "seconds")],
    ["{:.2f}"] * 7,
)  # fmt: skip

# docs/benchmarks.md: issue #31, round 4 sessions 5 and 6 (two bench_roofline runs of each code)
_S6_FILES = (("session6_before", "session start"), ("session6_before_run2", "session start"),
             ("session6", "this code"), ("session6_run2", "this code"))  # fmt: skip


def roofline_rows(specs, files, text, paths, formats):
    """One table row per protocol and ``bench_roofline.py`` file (``docs/roofline/<file>.json``).

    ``text`` is formatted with ``spec`` and ``label``; ``paths(spec)`` gives the
    JSON paths of its numbers, ``row`` being the protocol's entry.
    """
    for spec in specs:
        for file, label in files:
            entry("docs/benchmarks.md", text.format(spec=spec, label=label),
                  f"docs/roofline/{file}.json", paths(spec), formats)  # fmt: skip


def _proto(spec):
    return ("protocols", {"protocol": spec})


roofline_rows(
    ("kernel", "kernel:values=blocks,bits=7", "multihead:heads=4"),
    _S6_FILES,
    "| {spec} | {{}} ({label}) | {{}} | {{}} us | {{}}% | {{}} us | {{}} us | {{}} us |",
    lambda spec: [("code",), ("time_utc", lambda s: s[11:]), (*_proto(spec), "measure_us"),
                  (*_proto(spec), "fraction_measure", lambda v: 100 * v),
                  (*_proto(spec), "engine_us"),
                  ("splits", spec, "measure", "entry tally", lambda v: 1e6 * v),
                  ("splits", spec, "engine", "update", lambda v: 1e6 * v)],
    ["{}", "{}", "{:.2f}", "{:.1f}", "{:.2f}", "{:.3f}", "{:.3f}"],
)  # fmt: skip
main_job_rows(
    "docs/roofline/main_job_session6.json", ("3828e3f (session 5 start)", "876e5dd (this code)")
)
one(
    "docs/benchmarks.md",
    "cold one lost {} s, about what session 5's",
    "docs/roofline/main_job_session6.json",
    (lambda d: d["rows"][1]["cold_s"] - d["rows"][0]["cold_s"],),
    "{:.1f}",
)
# docs/benchmarks.md: round 4 session 7 (the cold run's helper)
main_job_rows(
    "docs/roofline/main_job_session7.json", ("a32c726 (session start)", "cf761ef (this code)")
)
_S7_FILES = (("session7_before", "a32c726 (session start)"), ("session7", "25a0fc7 (this code)"),
             ("session7_before_run2", "a32c726 (session start)"),
             ("session7_run2", "25a0fc7 (this code)"))  # fmt: skip
for _file, _label in _S7_FILES:
    entry(
        "docs/benchmarks.md",
        f"| {_label} | {{}} | {{}} us | {{}} s | {{}} s | {{}}x | {{}} s |",
        f"docs/roofline/{_file}.json",
        [("time_utc", lambda s: s[11:]),
         ("splits", "block-counts", "measure", "grouping", lambda v: 1e6 * v),
         ("main_job", "block_counts_1m_s"), ("main_job", "numpy_peer_1m_s"),
         ("main_job", "block_counts_speedup"), ("main_job", "main_job_s")],
        ["{}", "{:.3f}", "{:.3f}", "{:.2f}", "{:.2f}", "{:.2f}"],
    )  # fmt: skip
entry(
    "docs/benchmarks.md",
    "Now the two kernels compile in\n{} s and {} s (`python benchmarks/bench_cold_compile.py "
    "--json\ndocs/roofline/cold_compile_session7.json`, which turns the helper off: a cold\n"
    "job of {} s, {} s of it numba compiling).",
    "docs/roofline/cold_compile_session7.json",
    [("functions", {"name": "sketchsim.sketch.grouping._bucket_sort"}, "seconds"),
     ("functions", {"name": "sketchsim.sketch.grouping._number_groups"}, "seconds"),
     ("job_s",), ("compile_s",)],
    ["{:.2f}"] * 4,
)  # fmt: skip
# docs/benchmarks.md: round 4 session 8 (the engine loop's single speaking pass)
_MJ8 = "docs/roofline/main_job_session8.json"
main_job_rows(_MJ8, ("0295f8c (session start)", "260161e (this code)"))
entry(
    RM,
    "took {} s warm and\n{} s cold (empty compile caches)",
    _MJ8,
    [("rows", 1, "warm_s"), ("rows", 1, "cold_s")],
    ["{:.2f}"] * 2,
)
one("docs/benchmarks.md", "The cold job takes {} s less", _MJ8,
    (lambda d: d["rows"][0]["cold_s"] - d["rows"][1]["cold_s"],), "{:.1f}")  # fmt: skip
entry(
    "docs/benchmarks.md",
    "the warm main job did not show it\n  ({} s and {} s above)",
    _MJ8,
    [("rows", 0, "warm_s"), ("rows", 1, "warm_s")],
    ["{:.2f}"] * 2,
)
entry(
    "docs/benchmarks.md",
    "| cold <= 2x warm | {}x ({} s cold; {}x at 0295f8c) | not met |",
    _MJ8,
    [("rows", 1, "cold_over_warm"), ("rows", 1, "cold_s"), ("rows", 0, "cold_over_warm")],
    ["{:.2f}"] * 3,
)
one("docs/benchmarks.md", "| main job warm <= 3x the NumPy peer on 1M inputs | {}x in the main-job",
    _MJ8, ("rows", 1, "warm_over_peer"), "{:.2f}")  # fmt: skip
_CC7, _CC8 = "docs/roofline/cold_compile_session7.json", "docs/roofline/cold_compile_session8.json"
_LOOPS3 = [_loop_of("sketchsim.sketch.kernel_head"), _loop_of("sketchsim_plugin_raw"),
           _loop_of("sketchsim.sketch.block_counts")]  # fmt: skip
for _file, _jobs, _loops in (
    (_CC8, "helper off): the job takes {} s,\nof which numba compiling {} s",
     "heads' engine loop {} s, raw's {} s, block-counts' {} s (session 7:"),
    (_CC7, "(session 7: {} s and {} s); the kernel", "(session 7:\n{} s, {} s, {} s)."),
):  # fmt: skip
    entry("docs/benchmarks.md", _jobs, _file, [("job_s",), ("compile_s",)], ["{:.2f}"] * 2)
    entry("docs/benchmarks.md", _loops, _file, _LOOPS3, ["{:.2f}"] * 3)
entry(
    "docs/benchmarks.md",
    "a cold job's work is now {} s of compiling",
    _CC8,
    [("compile_s",)],
    ["{:.0f}"],
)
entry(
    "docs/benchmarks.md",
    "about {} s of measuring.",
    _MJ8,
    [("rows", 1, "warm_s")],
    ["{:.1f}"],
)
one("docs/benchmarks.md", "over about {} functions, none above {} s".replace("{} s", "4 s"), _CC8,
    (lambda d: 10 * round(len(d["functions"]) / 10),), "{}")  # fmt: skip
assert max(f["seconds"] for f in load(_CC8)["functions"]) < 4
_S8_FILES = (("session8_before", "0295f8c (session start)"), ("session8", "260161e (this code)"),
             ("session8_before_run2", "0295f8c (session start)"),
             ("session8_run2", "260161e (this code)"))  # fmt: skip
roofline_rows(
    ("raw", "block-counts", "kernel", "kernel:values=blocks,bits=7", "multihead:heads=4"),
    _S8_FILES,
    "| {spec} | {label} | {{}} | {{}} us | {{}} us |",
    lambda spec: [("time_utc", lambda s: s[11:]), (*_proto(spec), "engine_us"),
                  (*_proto(spec), "measure_us")],
    ["{}", "{:.2f}", "{:.2f}"],
)  # fmt: skip
_LS8 = "docs/roofline/loop_spread_session8.json"
for _spec in ("raw", "kernel", "multihead:heads=4"):
    for _code, _label in (("0295f8c", "session start"), ("6c1d705", "this code")):
        _row = ("rows", {"protocol": _spec, "code": _code}, "us_per_input")
        entry(
            "docs/benchmarks.md",
            f"| {_spec} | {_code} ({_label}) | {{}}, {{}}, {{}} |",
            _LS8,
            [(*_row, 0), (*_row, 1), (*_row, 2)],
            ["{:.3f}"] * 3,
        )


def _spread(spec, code):
    def f(d):
        us = lookup(d, ("rows", {"protocol": spec, "code": code}, "us_per_input"))
        return 100 * (max(us) / min(us) - 1)

    return f


def _best_loss(spec):
    def f(d):
        new = min(lookup(d, ("rows", {"protocol": spec, "code": "6c1d705"}, "us_per_input")))
        old = min(lookup(d, ("rows", {"protocol": spec, "code": "0295f8c"}, "us_per_input")))
        return 100 * (new / old - 1)

    return f


entry(
    "docs/benchmarks.md",
    "spread over up to {}% (raw) and {}%\n  (four heads)",
    _LS8,
    [(_spread("raw", "6c1d705"),), (_spread("multihead:heads=4", "0295f8c"),)],
    ["{:.1f}"] * 2,
)
assert all(
    _spread(p, c)(load(_LS8)) <= _spread("multihead:heads=4", "0295f8c")(load(_LS8))
    for p in ("raw", "kernel", "multihead:heads=4") for c in ("0295f8c", "6c1d705")
)  # fmt: skip
entry(
    "docs/benchmarks.md",
    "raw by {}%, kernel by {}% and the four heads by {}%.",
    _LS8,
    [(_best_loss("raw"),), (_best_loss("kernel"),), (_best_loss("multihead:heads=4"),)],
    ["{:.1f}"] * 3,
)
entry(
    "docs/benchmarks.md",
    "one layer {} and\n  {} us per input, two layers {} and {} us.",
    "docs/roofline/trained_session8_before.json",
    [("rows", {"protocol": "trained elu1 L=1"}, "us_per_input"),
     (lambda d: load("docs/roofline/trained_session8.json"),
      "rows", {"protocol": "trained elu1 L=1"}, "us_per_input"),
     ("rows", {"protocol": "trained elu1 L=2"}, "us_per_input"),
     (lambda d: load("docs/roofline/trained_session8.json"),
      "rows", {"protocol": "trained elu1 L=2"}, "us_per_input")],
    ["{:.3f}"] * 4,
)  # fmt: skip
entry(
    "docs/benchmarks.md",
    "| `trained` at kernel's rate per coordinate | {} ns against `kernel:values=blocks`' {} ns "
    "(L=1), {} ns (L=2) | not met |",
    "docs/roofline/trained_session8.json",
    [("rows", {"protocol": p}, "ns_per_coordinate")
     for p in ("trained elu1 L=1", "kernel:values=blocks", "trained elu1 L=2")],
    ["{:.1f}"] * 3,
)  # fmt: skip
_S8_THIS = ("session8", "session8_run2")


def _range_over(files, specs, key):
    """``lo-hi`` of ``100 * key`` over the protocols ``specs`` of the roofline ``files``."""

    def f(_):
        vals = [100 * p[key] for fl in files for p in load(f"docs/roofline/{fl}.json")["protocols"]
                if p["protocol"] in specs]  # fmt: skip
        return f"{min(vals):.1f}-{max(vals):.1f}"

    return f


_KH = ("kernel", "kernel:bits=6", "kernel:values=blocks,bits=7", "multihead:heads=4")
entry(
    "docs/benchmarks.md",
    "| raw >= 25% of its roofline | {}% (`measure()`, the runs above) | met |\n"
    "| kernel heads >= 25% of their roofline | {}% (`measure()`, the runs above) | not met |",
    "docs/roofline/session8.json",
    [(_range_over(_S8_THIS, ("raw",), "fraction_measure"),),
     (_range_over(_S8_THIS, _KH, "fraction_measure"),)],
    ["{}", "{}"],
)  # fmt: skip
entry(
    "docs/benchmarks.md",
    "| block-counts beyond start-up >= 4x the peer | {}x (`bench_roofline.py --split block-counts "
    "--main-job`, `docs/roofline/session8_main_job.json`: {} s against the peer's {} s) | met |",
    "docs/roofline/session8_main_job.json",
    [("main_job", "block_counts_speedup"), ("main_job", "block_counts_1m_s"),
     ("main_job", "numpy_peer_1m_s")],
    ["{:.2f}", "{:.3f}", "{:.2f}"],
)  # fmt: skip
one("docs/benchmarks.md", "; {}x in that roofline run | met |",
    "docs/roofline/session8_main_job.json", ("main_job", "ratio"), "{:.2f}")  # fmt: skip
_CC6 = "docs/roofline/cold_compile_session6.json"
entry(
    "docs/benchmarks.md",
    "the job takes {} s,\nof which numba compiling {} s; the kernel heads' engine loop\n{} s "
    "(3.39 s in session 3), block-counts'\n{} s, raw's {} s.",
    _CC6,
    [("job_s",), ("compile_s",), _loop_of("sketchsim.sketch.kernel_head"),
     _loop_of("sketchsim.sketch.block_counts"), _loop_of("sketchsim_plugin_raw")],
    ["{:.2f}"] * 5,
)  # fmt: skip
one("docs/benchmarks.md", "({} s in session 3)", _CC, ("functions", 0, "seconds"), "{:.2f}")
main_job_ratio(
    "right after the runs above): the main job\n{} s against the NumPy peer's {} s ({}x);\n"
    "block-counts `measure()` on the peer's 1,000,000 inputs {} s,\n{}x faster than the peer.",
    "docs/roofline/session6_main_job.json",
)

# docs/benchmarks.md: the GPU check (benchmarks/gpu_check.py on an H200)
BM = "docs/benchmarks.md"
GPU = "docs/gpu/gpu_check_h200.json"
one(
    BM,
    "`pytest tests/experiments`: {}, **on the CPU**",
    GPU,
    ("steps", {"name": "torch-tests"}, "summary"),
    "{}",
)
for _name in ("witness-sweep", "ood-scale"):
    entry(
        BM,
        f"| `{_name}` | yes | {{}} runs on cuda, {{}} metrics, "
        "{} outside the rounding tolerance |",
        GPU,
        [
            ("steps", {"name": _name}, "runs"),
            ("steps", {"name": _name}, "comparisons", len),
            ("steps", {"name": _name}, "comparisons", lambda rows: sum(not r["ok"] for r in rows)),
        ],
        ["{}", "{}", "{}"],
    )
entry(
    BM,
    "witness\n{} ms on the GPU against {} ms on one CPU thread; "
    "OOD 8:64:2000 {} ms\nagainst {} ms.",
    GPU,
    [
        ("steps", {"name": "witness-sweep"}, "seconds_per_step", "device"),
        ("steps", {"name": "witness-sweep"}, "seconds_per_step", "cpu"),
        ("steps", {"name": "ood-scale"}, "seconds_per_step", "device"),
        ("steps", {"name": "ood-scale"}, "seconds_per_step", "cpu"),
    ],
    [lambda v: f"{v * 1e3:.2f}"] * 4,
)


GPU2 = "docs/gpu/gpu_check_h200_capacity.json"
entry(
    BM,
    "`torch-tests`: {}, still on the CPU",
    GPU2,
    [("steps", {"name": "torch-tests"}, "summary")],
    ["{}"],
)
entry(
    BM,
    "`capacity-cell`: {} run each way, {} metrics\ncompared, {} outside the rounding "
    "tolerance, {} ms per training step on the\ndevice against {} ms on the CPU",
    GPU2,
    [
        ("steps", {"name": "capacity-cell"}, "runs"),
        ("steps", {"name": "capacity-cell"}, "comparisons", len),
        (
            "steps",
            {"name": "capacity-cell"},
            "comparisons",
            lambda rows: sum(not r["ok"] for r in rows),
        ),
        ("steps", {"name": "capacity-cell"}, "seconds_per_step", "device"),
        ("steps", {"name": "capacity-cell"}, "seconds_per_step", "cpu"),
    ],
    ["{}", "{}", "{}", lambda v: f"{v * 1e3:.2f}", lambda v: f"{v * 1e3:.2f}"],
)
entry(
    BM,
    "Witness {} ms against {} ms, OOD {} ms\nagainst {} ms per step",
    GPU2,
    [
        ("steps", {"name": "witness-sweep"}, "seconds_per_step", "device"),
        ("steps", {"name": "witness-sweep"}, "seconds_per_step", "cpu"),
        ("steps", {"name": "ood-scale"}, "seconds_per_step", "device"),
        ("steps", {"name": "ood-scale"}, "seconds_per_step", "cpu"),
    ],
    [lambda v: f"{v * 1e3:.2f}"] * 4,
)


def _w8(key):
    return (
        "steps",
        {"name": "witness-sweep"},
        "comparisons",
        lambda rows: next(r for r in rows if r["rank"] == 8 and r["metric"] == "max_abs_error")[
            key
        ],
    )


entry(
    BM,
    "error, {} on the GPU against {} on the CPU in float32 ({} in\nfloat64",
    GPU,
    [_w8("device"), _w8("cpu_float32"), _w8("cpu_float64")],
    ["{:.3f}"] * 3,
)


# results.md: more of the OOD sweep (the same file)
def _softmax_worst(scale):
    def pick(runs):
        accs = [
            r["test_accuracy"]
            for r in runs
            if r["spec"]["model"] == "softmax" and r["spec"]["scale"] == scale
        ]
        return min(accs)

    return ("runs", pick)


entry(
    R,
    "Dense softmax: worst seed {}, {}, {} at the three scales",
    OOD,
    [_softmax_worst(s) for s in ("8:64:2000", "10:128:2000", "12:256:2000")],
    ["{:.3f}", "{:.4f}", "{:.3f}"],
)


# theory.md: the exact softmax temperature bracket (minrank's bisection, every m)
entry(
    T,
    "`({}, {}]` with tolerance 1e-4)",
    MR,
    [("rows", 0, "softmax", "exact_fails"), ("rows", 0, "softmax", "exact")],
    ["{:.5f}", "{:.5f}"],
)


# results.md: the validation screens of the budget and the learning rate, and test-side probes
def _screen(path, model, how):
    def pick(rows):
        accs = [r["validation_accuracy"] for r in rows if r["model"] == model]
        return min(accs) if how == "min" else sum(accs) / len(accs)

    return ("rows", pick)


S2K = "docs/ood/screen_steps2000_validation.json"
SLR = "docs/ood/screen_lr0.03_validation.json"
entry(
    R,
    "softmax worst {} (better), but the `elu1` r = 16 heads overfit: mean\n  "
    "validation accuracy {} against {} at 1,000 steps (worst {} against\n  {})",
    S2K,
    [
        _screen(S2K, "softmax", "min"),
        _screen(S2K, "kernel", "mean"),
        ("rows", lambda rows: _screen(SS, "kernel", "mean")[1](load(SS)["rows"])),
        _screen(S2K, "kernel", "min"),
        ("rows", lambda rows: _screen(SS, "kernel", "min")[1](load(SS)["rows"])),
    ],
    ["{:.3f}"] * 5,
)
entry(
    R,
    "softmax worst {} (8:64 seed 2; against {} at 0.01) and `elu1` mean\n  {} (against {})",
    SLR,
    [
        _screen(SLR, "softmax", "min"),
        (
            "rows",
            lambda rows: _screen(SS, "softmax", "min")[1](
                [r for r in load(SS)["rows"] if r["stop_below"] == 0.05]
            ),
        ),
        _screen(SLR, "kernel", "mean"),
        ("rows", lambda rows: _screen(SS, "kernel", "mean")[1](load(SS)["rows"])),
    ],
    ["{:.3f}"] * 4,
)

STEPS = "docs/ood/softmax_steps_screen.json"
entry(
    R,
    "margin ({}-{} steps) and four seeds per scale score at least {}",
    STEPS,
    [
        ("rows", lambda rows: min(r["steps"] for r in rows if r["steps_cap"] >= 2000)),
        ("rows", lambda rows: max(r["steps"] for r in rows if r["steps_cap"] >= 2000)),
        ("rows", lambda rows: min(r["test"] for r in rows if r["steps_cap"] >= 2000)),
    ],
    ["{:,}", "{:,}", "{:.4f}"],
)


def _summary_mean(scale, fmap, rank):
    return (
        "summary",
        lambda rows: next(
            a["mean"]
            for a in rows
            if a["scale"] == scale and a["feature_map"] == fmap and a["rank"] == rank
        ),
    )


PROBE = "docs/ood/elu1_probe.json"
entry(
    R,
    "m = 10 gives {} / {} at r = 16 / 64 and m = 12 {} / {}",
    PROBE,
    [
        _summary_mean("10:128:2000", "elu1", 16),
        _summary_mean("10:128:2000", "elu1", 64),
        _summary_mean("12:256:2000", "elu1", 16),
        _summary_mean("12:256:2000", "elu1", 64),
    ],
    ["{:.3f}"] * 4,
)
TM8 = "docs/ood/screen_test_m8.json"
entry(
    R,
    "elu1\n{} / {}, hedgehog {} / {}, relu2 {} / {}, expmap {} /\n{};",
    TM8,
    [
        _summary_mean("8:64:1000", f, r)
        for f in ("elu1", "hedgehog", "relu2", "expmap")
        for r in (16, 64)
    ],
    ["{:.3f}"] * 8,
)


# results.md: earlier-code sweeps with 1,000 triples (their files)
E1K = "docs/ood/elu1_1000_triples.json"


def _cell(scale, fmap, rank):
    def text(runs):
        accs = [
            r["test_accuracy"]
            for r in sorted(runs, key=lambda r: r["spec"]["seed"])
            if r["spec"]["scale"] == scale
            and r["spec"]["feature_map"] == fmap
            and r["spec"]["rank"] == rank
        ]
        return accs

    return ("runs", text)


def _mean3(accs):
    return f"{sum(accs) / len(accs):.3f}"


def _seeds3(accs):
    return " / ".join(f"{a:.3f}" for a in accs)


entry(
    R,
    "| 8:64:1000 | {} | {} | **{}** ({}) | {} | {} | {} | 16 |",
    E1K,
    [_cell("8:64:1000", "elu1", r) for r in (4, 8, 16, 16, 32, 64, 128)],
    [_mean3, _mean3, _mean3, _seeds3, _mean3, _mean3, _mean3],
)
entry(
    R,
    "| 10:128:1000 | {} | {} | {} ({}) | {} | {} | **{}** ({}) | 128 |",
    E1K,
    [_cell("10:128:1000", "elu1", r) for r in (4, 8, 16, 16, 32, 64, 128, 128)],
    [_mean3, _mean3, _mean3, _seeds3, _mean3, _mean3, _mean3, _seeds3],
)
entry(
    R,
    "| 12:256:1000 | {} | {} (1 seed) |",
    E1K,
    [_cell("12:256:1000", "elu1", 4), _cell("12:256:1000", "elu1", 8)],
    [_mean3, _mean3],
)
entry(
    R,
    "| {} | {} | {} ({}) | {} ({}) | - | 0.984 |",
    "docs/ood/favor_m8_2seeds.json",
    [_cell("8:64:1000", "favor", r) for r in (16, 32)]
    + [_cell("8:64:1000", "favor", 64)] * 2
    + [_cell("8:64:1000", "favor", 128)] * 2,
    [
        _mean3,
        _mean3,
        _mean3,
        lambda a: " / ".join(f"{x:.3f}" for x in a),
        _mean3,
        lambda a: " / ".join(f"{x:.3f}" for x in a),
    ],
)
entry(
    R,
    "mean test accuracy\n  {}, {}, {}, {} with seeds",
    "docs/ood/favor_m6_pool32.json",
    [_cell("6:32:1000", "favor", r) for r in (4, 8, 16, 32)],
    [_mean3] * 4,
)


# ---- the test --------------------------------------------------------------

# docs/capacity.md: the first frontier (issue #45), docs/capacity/frontier/*.json
FR, FQ = "docs/capacity/frontier/capacity.json", "docs/capacity/frontier/qat-capacity.json"
for s_, text in (
    (1, "- F(4,1): the smallest decoding state is **{} bits, {}x the bound** (r = {}, d = {},\n"
     "  K = {}); {} of the 48 models decode."),
    (3, "- F(4,3): **{} bits, {}x the bound** (r = {}, d = {}, K = {}); {} of the 48 "
     "decode."),
):  # fmt: skip
    best = ("frontier", {"s": s_}, "best")
    entry(
        "docs/capacity.md",
        text,
        FR,
        [(*best, "transcript_bits"), (*best, "ratio"), (*best, "rank"), (*best, "value_width"),
         (*best, "bits_per_coordinate"), ("frontier", {"s": s_}, "decoded_models")],
        ["{:.0f}", "{:.2f}", "{}", "{}", "{}", "{}"],
    )  # fmt: skip
entry(
    "docs/capacity.md",
    "drops to **{} bits, {}x** (K = {}), but at F(4,3) only {} of the 48 decodes,\n"
    "  at {} bits ({}x)",
    FQ,
    [("frontier", {"s": 1}, "best", "transcript_bits"), ("frontier", {"s": 1}, "best", "ratio"),
     ("frontier", {"s": 1}, "best", "bits_per_coordinate"),
     ("frontier", {"s": 3}, "decoded_models"), ("frontier", {"s": 3}, "best", "transcript_bits"),
     ("frontier", {"s": 3}, "best", "ratio")],
    ["{:.0f}", "{:.2f}", "{}", "{}", "{:.0f}", "{:.2f}"],
)  # fmt: skip


# docs/capacity.md: the causal architectures (issue #44), docs/capacity/causal/*.json: one
# table row per architecture, one cell per family size, each cell from the file's frontier
CAUSAL = "docs/capacity/causal"


def causal_cell(entry_: dict) -> str:
    """A frontier entry as a table cell: the smallest decoding cut bits, ratio, K and how
    many of the models decoded (or how many models, none decoding)."""
    best = entry_["best"]
    if best is None:
        return f"none of {entry_['models']}"
    return (f"{best['transcript_bits']:.0f} ({best['ratio']:.2f}x, K {best['bits_per_coordinate']};"
            f" {entry_['decoded_models']}/{entry_['models']})")  # fmt: skip


def causal_rows(json_file: str, family: str):
    """``(row text with {} per cell, paths, formats)`` of each architecture in the file."""
    data = json.loads((ROOT / json_file).read_text())
    fr = [f for f in data["frontier"] if f["family"] == family]
    sizes = sorted({(f["q"], f["s"]) for f in fr})
    kinds = list(dict.fromkeys(f["kind"] for f in fr))
    for kind in kinds:
        have = [(q, s) for q, s in sizes if any((f["q"], f["s"], f["kind"]) == (q, s, kind)
                                                 for f in fr)]  # fmt: skip
        text = f"| {kind} | " + " | ".join("{}" if qs in have else "-" for qs in sizes) + " |"
        paths = [("frontier", {"family": family, "q": q, "s": s, "kind": kind}) for q, s in have]
        yield text, paths, [causal_cell] * len(paths)


for _file, _family in (
    ("capacity.json", "hard"),
    ("mqar-capacity.json", "mqar"),
    ("retention-capacity.json", "hard"),
):
    for _text, _paths, _formats in causal_rows(f"{CAUSAL}/{_file}", _family):
        entry("docs/capacity.md", _text, f"{CAUSAL}/{_file}", _paths, _formats)


def best_over_s(kind: str, q: int):
    """A lookup step: of a capacity file's frontier entries, the cell of ``kind`` at ``q``
    with the smallest ratio over ``s`` (decoded cells first), as the frontier table shows."""

    def pick(entries):
        cells = [e for e in entries if e["family"] == "hard" and e["q"] == q and e["kind"] == kind]
        decoded = [e for e in cells if e["best"] is not None]
        if not decoded:
            return {"best": None, "models": sum(e["models"] for e in cells)}
        return min(decoded, key=lambda e: e["best"]["ratio"])

    return pick


def frontier_cell(entry_: dict) -> str:
    """The frontier table's cell: ratio, s, cut bits, K and the models that decoded."""
    best = entry_["best"]
    if best is None:
        return f"none of {entry_['models']}"
    return (
        f"{best['ratio']:.2f}x (s {entry_['s']}: {best['transcript_bits']:.0f} bits, "
        f"K {best['bits_per_coordinate']}; {entry_['decoded_models']}/{entry_['models']})"
    )


for _kind in ("linear-elu1 L1 H1", "based L1 H1", "gla L1 H1", "deltanet L1 H1",
              "gated-deltanet L1 H1", "mamba L1 H1", "window L1 H1"):  # fmt: skip
    entry(
        "docs/capacity.md",
        f"| {_kind} | {{}} | {{}} | {{}} |",
        f"{CAUSAL}/capacity.json",
        [("frontier", best_over_s(_kind, q)) for q in (4, 8, 16)],
        [frontier_cell] * 3,
    )


entry(
    "docs/capacity.md",
    "| retention L1 H1 | {} | {} | {} |",
    f"{CAUSAL}/retention-capacity.json",
    [("frontier", best_over_s("retention L1 H1", q)) for q in (4, 8, 16)],
    [frontier_cell] * 3,
)


def _fp32_over_cut(rows):
    return [r["float_state_bits"] / r["cut_bits"] for r in rows if r["cut_bits"]]


entry(
    "docs/capacity.md",
    "is {} to {} times the cut bits of these decoded models.",
    f"{CAUSAL}/capacity.json",
    [("rows", _fp32_over_cut, min), ("rows", _fp32_over_cut, max)],
    ["{:.0f}", "{:.1f}"],
)


# docs/capacity.md: the F(64,7) attempts (issue #45), docs/capacity/frontier/f64/*.json
for _name in ("elu1-r1", "elu1-r2-3000steps", "signed-r1", "signed-lr0.01-300steps"):
    _f = f"docs/capacity/frontier/f64/{_name}.json"
    _n = len(load(_f)["runs"])
    entry(
        "docs/capacity.md",
        "| {} | " + ", ".join(["{}"] * _n) + " | {} | " + ", ".join(["{}"] * _n) + " | "
        + ", ".join(["{}"] * _n) + " |",
        _f,
        [("runs", 0, "architecture"), *[("runs", i, "spec", "lr") for i in range(_n)],
         ("runs", 0, "steps"), *[("runs", i, "max_abs_error") for i in range(_n)],
         *[("runs", i, "accuracy") for i in range(_n)]],
        ["{}", *["{:g}"] * _n, "{:,}", *["{:.2f}"] * _n, *["{:.3f}"] * _n],
    )  # fmt: skip


# docs/capacity.md: the first trained F(64,7) models (issue #45): their runs and measures
F64 = "docs/capacity/frontier/f64"


def trained_at(bits) -> str:
    return f"K = {bits}" if bits else "float"


def f64_run_rows(names, third: tuple, third_format, folder: str = F64) -> None:
    """One table row per run of each sweep file in ``folder`` (F(64,7)'s by default):
    architecture, rate, ``third`` (a run's path), steps, largest training error, accuracy."""
    for name in names:
        for i in range(len(load(f"{folder}/{name}.json")["runs"])):
            entry(
                "docs/capacity.md",
                "| {} | {} | {} | {} | {} | {} |",
                f"{folder}/{name}.json",
                [("runs", i, "architecture"), ("runs", i, "spec", "lr"), ("runs", i, *third),
                 ("runs", i, "steps"), ("runs", i, "max_abs_error"), ("runs", i, "accuracy")],
                ["{}", "{:g}", third_format, "{:,}", "{:.2f}", "{:.3f}"],
            )  # fmt: skip


# the constant-rate runs in float, by their stopping threshold
f64_run_rows(("elu1-d64-lr0.0005-constant", "elu1-d64-lr0.001-constant",
              "elu1-d64-lr0.001-constant-stop0.1", "elu1-d64-lr0.002-0.003-constant-stop0.1"),
             ("spec", "stop_below"), "{:g}")  # fmt: skip
# F(64,7) at K = 4, the signed map and the other kinds, by what they were trained at
f64_run_rows(("elu1-d64-lr0.001-constant-K4", "signed-d64-lr0.001-constant",
              "signed-d64-lr0.0003-constant", "gla-d64-lr0.001-constant",
              "gla-d64-lr0.003-constant", "deltanet-d64-lr0.001-constant",
              "deltanet-d64-lr0.003-constant", "deltanet-d64-lr0.01-constant",
              "deltanet-d64-lr0.01-constant-14000", "deltanet-d64-lr0.01-constant-14000-best"),
             ("trained_at_bits",), trained_at)  # fmt: skip
# the F(32,7) DeltaNets' accuracy per K (sketchsim capacity's screen), by rounding
S7 = "docs/capacity/frontier/s7"
for _label, _rounding, _file in (
    ("4,000 steps", "every", f"{S7}/capacity-deltanet-q32.json"),
    ("4,000 steps", "cut", f"{S7}/capacity-deltanet-q32-cut.json"),
    ("12,000 steps, kept step", "every", f"{S7}/keep-best/capacity-every.json"),
    ("12,000 steps, kept step", "cut", f"{S7}/keep-best/capacity-cut.json"),
):
    entry("docs/capacity.md", f"| {_label} | {_rounding} | {{}} | {{}} | {{}} | {{}} | {{}} |",
          _file, [("rows", 0, "curve", k - 1, "accuracy") for k in (4, 5, 6, 7, 9)],
          ["{:.3f}"] * 5)  # fmt: skip
one(
    "docs/capacity.md",
    "the F(16,7) model nearly at K = 6 ({},",
    f"{S7}/capacity-deltanet-q16-cut.json",
    ("rows", 0, "curve", 5, "accuracy"),
    "{:.3f}",
)
entry("docs/capacity.md", "right on\n{} of 20,000 sampled inputs at the cut, as its float model\n"
      "misses a few ({} is the error rate's 95% upper bound)", f"{S7}/keep-best/capacity-cut.json",
      [("rows", 0, "correct_fraction"), ("rows", 0, "error_rate_upper95")],
      ["{:.5f}", "{:.5f}"])  # fmt: skip
# the kept step of the 12,000-step F(32,7) run (--keep best)
entry("docs/capacity.md", "| {} | {} | {} | {} | {} |",
      f"{S7}/keep-best/deltanet-q32-d32-lr0.003-constant-12000-best.json",
      [("runs", 0, "architecture"), ("runs", 0, "steps"), ("runs", 0, "kept_step"),
       ("runs", 0, "train_accuracy"), ("runs", 0, "accuracy")],
      ["{}", "{:,}", "{:,}", "{:.4f}", "{:.3f}"])  # fmt: skip


def _code_cells(row: dict) -> str:
    """A state-code.json row as its table's cells after the model's name."""
    pb = {b["bits"]: b for b in row["per_bits"]}
    rms = " | ".join(f"{pb[k]['rms_median']:.2f}" for k in (4, 5, 6))
    right = " / ".join(f"{pb[k]['all_right_normal']:.3f}" for k in (4, 5, 6))
    return (f"{row['readers_median']:.1f} of {row['entries']} | {row['residual_p99']:.2f} | "
            f"{rms} | {right}")  # fmt: skip


one(
    "docs/capacity.md",
    "model kept, at step {}, is the one of least mse",
    f"{F64}/deltanet-d64-lr0.01-constant-14000-best.json",
    ("runs", 0, "kept_step"),
    "{:,}",
)
entry("docs/capacity.md", "K = 5: {} right there, {} at K = 4", f"{S7}/qat/capacity-K5-cut.json",
      [("rows", 0, "curve", 4, "accuracy"), ("rows", 0, "curve", 3, "accuracy")],
      ["{:.3f}", "{:.3f}"])  # fmt: skip
# quantization-aware training at F(16,7): by K and where the state is rounded
Q16_CUT = f"{S7}/capacity-deltanet-q16-cut.json"
for _name in ("K4", "K5", "K6", "K4-cut", "K5-cut"):
    _file = f"{S7}/qat/deltanet-q16-d16-lr0.003-{_name}.json"
    _rounded = "at the cut" if _name.endswith("cut") else "every token"
    entry("docs/capacity.md", f"| {{}} | K = {{}} | {_rounded} | {{}} of {{}} | {{}} | {{}} |",
          _file, [("runs", 0, k) for k in ("architecture", "trained_at_bits", "kept_step",
                                           "steps", "train_accuracy", "accuracy")],
          ["{}", "{}", "{:,}", "{:,}", "{:.4f}", "{:.3f}"])  # fmt: skip
entry("docs/capacity.md", "{} right at K = 4, {} at K = 5 (80 bits,\n1.67x; the float-trained "
      "model: {}) and {} at K = 6 on\nits screen; it is not decoded (right on {} of 20,000",
      f"{S7}/qat/capacity-K4-cut.json",
      [("rows", 0, "curve", 3, "accuracy"), ("rows", 0, "curve", 4, "accuracy"), ("rows",),
       ("rows", 0, "curve", 5, "accuracy"), ("rows", 0, "correct_fraction")],
      ["{:.3f}", "{:.3f}",
       lambda _: f"{load(Q16_CUT)['rows'][0]['curve'][4]['accuracy']:.3f}",
       "{:.3f}", "{:.4f}"])  # fmt: skip
entry("docs/capacity.md", "an answer reads\n{} of {} entries, rounding rms\n{} at K = 4, all right "
      "predicted {}", f"{S7}/state-code.json",
      [("rows", 3, "readers_median"), ("rows", 3, "entries"),
       ("rows", 3, "per_bits", 3, "rms_median"), ("rows", 3, "per_bits", 3, "all_right_normal")],
      ["{:.1f}", "{}", "{:.2f}", "{:.3f}"])  # fmt: skip
for _i, _name in enumerate(("F(16,7), 4,000 steps", "F(32,7), 4,000 steps",
                            "F(32,7), kept step")):  # fmt: skip
    one("docs/capacity.md", f"| {_name} | {{}} |", f"{S7}/state-code.json", ("rows", _i),
        _code_cells)  # fmt: skip
# DeltaNet at s = 7, q = 16 and 32, by schedule
f64_run_rows(("deltanet-q16-d16-lr0.003-constant", "deltanet-q16-d16-lr0.003-onecycle",
              "deltanet-q32-d32-lr0.003-constant", "deltanet-q32-d32-lr0.003-constant-12000",
              "deltanet-q32-d32-lr0.003-onecycle"),
             ("schedule",), "{}", folder="docs/capacity/frontier/s7")  # fmt: skip


def first_right_on_screen(row: dict) -> str:
    """The smallest K right on every input of ``capacity``'s screen, with its cut bits."""
    right = [c for c in row["curve"] if c["accuracy"] == 1.0]
    return f"{right[0]['bits']} ({right[0]['transcript_bits']} bits)" if right else "none"


for _i, _lr in enumerate(load(f"{F64}/capacity-elu1-d64.json")["rows"]):
    entry(
        "docs/capacity.md",
        "| {} | {} | {} | {} |",
        f"{F64}/capacity-elu1-d64.json",
        [("rows", _i, "weights"), ("rows", _i, "correct_fraction"),
         ("rows", _i, "error_rate_upper95"), ("rows", _i)],
        ["{}", "{:.5f}", "{:.5f}", first_right_on_screen],
    )  # fmt: skip


entry(
    "docs/capacity.md",
    "the same head is right on {} of the 20,000 inputs and on the whole\n"
    "screen from K = {}: no better",
    f"{F64}/capacity-elu1-d64-cut.json",
    [("rows", 0, "correct_fraction"), ("rows", 0)],
    ["{:.5f}", first_right_on_screen],
)
one("docs/capacity.md", "Rounded only at the cut (`sketchsim capacity FOLDER --rounding {}`",
    f"{F64}/capacity-elu1-d64-cut.json", ("parameters", "rounding"), "{}")  # fmt: skip


# docs/benchmarks.md: the K search (benchmarks/bench_capacity_search.py, issue #45)
_ST = "docs/capacity/search-timing.json"
for _i, _who in enumerate(("this session", "session start", "the issue's commit")):
    entry("docs/benchmarks.md", f"| {_who} ({{}}) | {{}} s | {{}} s | {{}} s |", _ST,
          [("trees", _i, "tree"), ("trees", _i, "wall_s"), ("trees", _i, "answers_s"),
           ("trees", _i, "measure_s")], ["{}", "{:.1f}", "{:.1f}", "{:.1f}"])  # fmt: skip
entry("docs/benchmarks.md", "file: {} here.", _ST, [("trees",)],
      [lambda t: f"{t[1]['wall_s'] / t[0]['wall_s']:.2f}x"])  # fmt: skip
one("docs/benchmarks.md", "on this idle machine the issue's own commit takes\n{} s.", _ST,
    ("trees", 2, "wall_s"), "{:.1f}")  # fmt: skip


# docs/benchmarks.md: seeds as one batched model (benchmarks/bench_batched_training.py)
_B3, _B12 = "docs/capacity/batched-training-3.json", "docs/capacity/batched-training-12.json"


def _speedup(row: dict) -> str:
    return f"{row['one_at_a_time_s'] / row['batched_s']:.2f}x"


for _i, _case in enumerate(r["case"] for r in load(_B3)["rows"]):
    entry("docs/benchmarks.md", f"| {_case} | {{}} | {{}} |", _B3, [("rows", _i), ("rows", _i)],
          [_speedup, lambda _r, i=_i: _speedup(load(_B12)["rows"][i])])  # fmt: skip
one("docs/benchmarks.md", "(about {} ms per model here)", _B12, ("rows", 0),
    lambda r: f"{r['one_at_a_time_s'] / r['members'] * 1e3:.1f}")  # fmt: skip


_BS2, _BS10 = "docs/capacity/batched-sweep-200.json", "docs/capacity/batched-sweep-1000.json"


def _sweep_ratio(d: dict) -> str:
    return f"{d['one_at_a_time_s'] / d['batched_s']:.2f}x"


entry("docs/benchmarks.md",
      "{} runs of\n{} steps took {} s one at a time and {} s batched\n({}). All {} stopped", _BS2,
      [("runs",), ("steps",), ("one_at_a_time_s",), ("batched_s",), (), ("same_steps",)],
      ["{}", "{}", "{:.1f}", "{:.1f}", _sweep_ratio, "{}"])  # fmt: skip
one("docs/benchmarks.md", "accuracies differ by at most {}: float32", _BS2,
    ("max_accuracy_difference",), "{:.4f}")  # fmt: skip
entry("docs/capacity.md", "a {}-run grid\nof {} steps was {} faster", _BS2,
      [("runs",), ("steps",), ()], ["{}", "{}", _sweep_ratio])  # fmt: skip
entry("docs/benchmarks.md",
      "the grid took\n{} s one at a time and {} s batched ({}). Not measured apart", _BS10,
      [("one_at_a_time_s",), ("batched_s",), ()], ["{:.1f}", "{:.1f}", _sweep_ratio])  # fmt: skip
entry("docs/benchmarks.md",
      "Only {} of the {} runs stopped at the same step\nas alone, and the accuracies differ by "
      "up to {}:", _BS10, [("same_steps",), ("runs",), ("max_accuracy_difference",)],
      ["{}", "{}", "{:.4f}"])  # fmt: skip


entry("docs/capacity.md",
      "At {} steps the same grid was {} faster, and {} of its {} runs ended",
      "docs/capacity/batched-sweep-1000.json", [("steps",), (), (), ("runs",)],
      [lambda v: f"{v:,}", lambda d: f"{d['one_at_a_time_s'] / d['batched_s']:.2f}x",
       lambda d: str(d["runs"] - d["same_steps"]), "{}"])  # fmt: skip


# docs/capacity.md: the s = 7 grid (the table: tests/experiments/test_capacity_doc.py)
_G = "docs/capacity/frontier/s7/grid"
entry("docs/capacity.md", "(wrong on {} of 100,000",
      f"{_G}/transcript-q16-linear-K11-seed5.json", [("protocols", 0, "wrong_inputs")],
      ["{}"])  # fmt: skip
one("docs/capacity.md", "(wrong on 15 of {},", f"{_G}/transcript-q16-linear-K11-seed5.json",
    ("inputs",), "{:,}")  # fmt: skip
_G1M = f"{_G}/transcript-q16-linear-K11-1M.json"
entry("docs/capacity.md", "Run on {} inputs of its family", _G1M, [("inputs",)], ["{:,}"])
entry("docs/capacity.md", "it is wrong on {} of them\n([grid/transcript-q16-linear-K11-1M",
      _G1M, [("protocols", 0, "wrong_inputs")], ["{}"])  # fmt: skip
entry("docs/capacity.md", "the cut: {} bits, {} the floor (95% upper bound on its error rate\n{})",
      f"{_G}/capacity-q16-cut.json", [("rows", 9, "transcript_bits"), ("rows", 9, "ratio"),
      ("rows", 9, "error_rate_upper95")], ["{:.0f}", "{:.2f}x", "{:.5f}"])  # fmt: skip
entry("docs/capacity.md", "F(16,7) took about {}, {}, {} and {} s of\ntraining per model",
      f"{_G}/sweep-q16.json", [("runs", i, "seconds") for i in (0, 4, 8, 12)],
      ["{:.0f}"] * 4)  # fmt: skip

# docs/capacity.md: elu1sum and register noise at s = 7 (the tables: test_capacity_doc.py)
_E = "docs/capacity/frontier/s7/elu1sum"
entry("docs/capacity.md", "(largest training error {},\n{} and {}; right on",
      f"{_E}/float/sweep-q32.json", [("runs", i, "max_abs_error") for i in range(3)],
      ["{:.2f}"] * 3)  # fmt: skip
one("docs/capacity.md", "it: it is right on\n{} of 4,096 fresh inputs",
    f"{_E}/float/sweep-q64-20000.json", ("runs", 0, "accuracy"), "{:.3f}")  # fmt: skip
one("docs/capacity.md", "sampled inputs (95% upper bound on its error rate {};",
    f"{_E}/noise/capacity-q8-cut.json", ("rows", 0, "error_rate_upper95"), "{:.5f}")  # fmt: skip
one("docs/capacity.md", "the two K = 4 models are wrong on\n{} (F(8,7))",
    f"{_E}/noise/transcript-q8-K4-1M.json", ("protocols", 0, "wrong_inputs"), "{}")  # fmt: skip
_N64 = f"{_E}/noise/capacity-q64-cut.json"


def _curve(k, key):
    return lambda d: d["rows"][0]["curve"][k - 1][key]


entry("docs/capacity.md",
      "right on {} of 4,096\nfresh inputs, and at 32 bits on {} of the 20,000-input sample",
      _N64, [("rows", 0, "float_accuracy"), ("rows", 0, "correct_fraction")],
      ["{:.4f}", "{:.5f}"])  # fmt: skip
entry("docs/capacity.md", "({} bits, {}x; K = 7: {}, K = 6:\n{}), against", _N64,
      [(), (), (), ()], [lambda d: str(_curve(8, "transcript_bits")(d)),
                         lambda d: f"{_curve(8, 'transcript_bits')(d) / 192:.2f}",
                         lambda d: f"{_curve(7, 'accuracy')(d):.3f}",
                         lambda d: f"{_curve(6, 'accuracy')(d):.3f}"])  # fmt: skip
entry("docs/capacity.md", "40,000 steps ({} min of\ntraining here)", f"{_E}/noise/sweep-q64.json",
      [("runs", 0, "seconds")], [lambda v: f"{v / 60:.0f}"])  # fmt: skip
one("docs/capacity.md", "keeps the model of step {}, the same seeded run's",
    f"{_E}/noise/sweep-q32-40000.json", ("runs", 0, "kept_step"), "{:,}")  # fmt: skip
one("docs/capacity.md", "Its model kept is from step {}:", f"{_E}/noise/sweep-q64.json",
    ("runs", 0, "kept_step"), "{:,}")  # fmt: skip
one("docs/capacity.md", "(F(8,7)) and {} (F(16,7))", f"{_E}/noise/transcript-q16-K4-1M.json",
    ("protocols", 0, "wrong_inputs"), "{}")  # fmt: skip


# docs/capacity.md: the readout basis (--rebase-at), F(64,7) at 1.33x
_R = f"{_E}/rebase"
one("docs/capacity.md", "decodes its 20,000-input sample at K = 4, **{} bits\nagainst 192**",
    f"{_R}/capacity-q64-cut.json", ("rows", 0, "transcript_bits"), "{:.0f}")  # fmt: skip
entry("docs/capacity.md", "**F(64,7) decodes at K = {}: {} bits, {}x the 192-bit floor**",
      f"{_R}/capacity-q64-cut.json",
      [("rows", 0, "bits_per_coordinate"), ("rows", 0, "transcript_bits"), ("rows", 0, "ratio")],
      ["{}", "{:.0f}", "{:.2f}"])  # fmt: skip
one("docs/capacity.md", "20,000-input sample (95% upper bound on its error rate {}), and",
    f"{_R}/capacity-q64-cut.json", ("rows", 0, "error_rate_upper95"), "{:.5f}")  # fmt: skip
one("docs/capacity.md", "it is wrong on {}\n([transcript-q64",
    f"{_R}/transcript-q64-K4-1M.json", ("protocols", 0, "wrong_inputs"), "{}")  # fmt: skip
one("docs/capacity.md", "95% upper bound {}). The goal figure", f"{_R}/transcript-q64-K4-1M.json",
    ("protocols", 0, "error_rate_upper95"), "{:.1e}")  # fmt: skip
one("docs/capacity.md", "and is right on the {} inputs it was then run on",
    f"{_R}/transcript-q64-K4-1M.json", ("protocols", 0, "inputs"), "{:,}")  # fmt: skip
for _doc_text in ("16 models are wrong on {}\nand 7", "(seed 0) are wrong on {} and 7"):
    one("docs/capacity.md", _doc_text, f"{_R}/transcript-q8-K4-1M.json",
        ("protocols", 0, "wrong_inputs"), "{}")  # fmt: skip
for _doc_text in ("16 models are wrong on 62\nand {});", "(seed 0) are wrong on 62 and {}\n"):
    one("docs/capacity.md", _doc_text, f"{_R}/transcript-q16-K4-1M.json",
        ("protocols", 0, "wrong_inputs"), "{}")  # fmt: skip
entry("docs/capacity.md", "(input {}, query {}: {} answered {};",
      f"{_R}/transcript-q32-K4-K5.json", [(), (), (), ()],
      [lambda d: f"{d['protocols'][0]['first_failure']['input']:,}",
       lambda d: str(d["protocols"][0]["first_failure"]["position"]),
       lambda d: str(d["protocols"][0]["first_failure"]["target"]),
       lambda d: str(d["protocols"][0]["first_failure"]["answer"])])  # fmt: skip
one("docs/capacity.md", "The F(64,7) run took {} s of training here",
    f"{_R}/sweep-q64.json", ("runs", 0, "seconds"), "{:,.0f}")  # fmt: skip
one("docs/capacity.md", "The {} steps trained in the\nreadout basis", f"{_R}/sweep-q64.json",
    (), lambda d: f"{d['runs'][0]['kept_step'] - d['runs'][0]['rebased_step']:,}")  # fmt: skip
_Q32 = f"{_R}/capacity-q32-lr0.003-after0.0001-cut.json"
one("docs/capacity.md", "**F(32,7) at rate 0.003 then decodes at K = 4: {} bits, 1.33x**",
    _Q32, ("rows", 0, "transcript_bits"), "{:.0f}")  # fmt: skip


def _after_change(d):
    run = d["runs"][0]
    return f"{run['spec']['steps'] - run['rebased_step']:,}"


one("docs/capacity.md", "(0.0001 for {}\nsteps;", f"{_R}/sweep-q32-lr0.003-after0.0001.json",
    (), _after_change)  # fmt: skip
_C64 = f"{_R}/capacity-q64-change-only-cut.json"
entry("docs/capacity.md", "right on {} of 4,096 fresh\ninputs in float, and at the cut on {} "
      "of its screen at K = 4, {} at\nK = 5 and {} at K = 9", _C64, [(), (), (), ()],
      [lambda d: f"{d['rows'][0]['float_accuracy']:.3f}",
       lambda d: f"{_curve(4, 'accuracy')(d):.3f}", lambda d: f"{_curve(5, 'accuracy')(d):.3f}",
       lambda d: f"{_curve(9, 'accuracy')(d):.3f}"])  # fmt: skip
one("docs/capacity.md", "from step 22,327, was right on {}. The two", f"{_E}/noise/sweep-q64.json",
    ("runs", 0, "accuracy"), "{:.4f}")  # fmt: skip
one("docs/capacity.md",
    "seed 1 at 0.003 never left the\nplateau in its 20,000 steps (right on {} input",
    f"{_R}/sweep-q32-lr0.003-seeds2.json", ("runs", 1, "accuracy"),
    lambda v: "no" if v == 0 else f"{v}")  # fmt: skip

_K = "docs/capacity/frontier/s7/rebase-kinds"
_GD = f"{_K}/capacity-gated-deltanet-q16-cut.json"
one("docs/capacity.md", "from K = 4, but at 32 bits it is right on {} of its sample", _GD,
    ("rows", 0, "correct_fraction"), "{:.5f}")  # fmt: skip
one("docs/capacity.md", "(its\nlargest training error, {}, is one input",
    f"{_K}/sweep-gated-deltanet-q16.json", ("runs", 0, "max_abs_error"), "{:.2f}")  # fmt: skip


def _misses(d):
    return f"{(1 - d['rows'][0]['correct_fraction']) * d['rows'][0]['inputs']:.0f}"


one("docs/capacity.md", "K = 4 but misses {} of its 20,000 sampled inputs even at 32 bits", _GD,
    (), _misses)  # fmt: skip
entry("docs/capacity.md", "DeltaNet (this session) is right on {} of 4,096 fresh inputs\n({} of",
      f"{_K}/sweep-deltanet-q16.json", [("runs", 0, "accuracy"), ("runs", 0, "train_accuracy")],
      ["{:.3f}", "{:.3f}"])  # fmt: skip
entry("docs/capacity.md", "is right on only {} of fresh inputs ({} of its training inputs)\n"
      "after {} s of training", f"{_K}/sweep-gla-q32.json",
      [("runs", 0, "accuracy"), ("runs", 0, "train_accuracy"), ("runs", 0, "seconds")],
      ["{:.3f}", "{:.3f}", "{:,.0f}"])  # fmt: skip
entry("docs/capacity.md", "model came at step {} of {}, so it was still improving",
      f"{_K}/sweep-gla-q32.json", [("runs", 0, "kept_step"), ("runs", 0, "steps")],
      ["{:,}", "{:,}"])  # fmt: skip
_FIT = [("runs", 0, "accuracy"), ("runs", 0, "train_accuracy")]
entry("docs/capacity.md",
      "it is right on {} of fresh inputs ({} of its\ntraining inputs) after {} s. Trained",
      f"{_K}/sweep-gla-q32-44000.json", [*_FIT, ("runs", 0, "seconds")],
      ["{:.3f}", "{:.3f}", "{:,.0f}"])  # fmt: skip
entry("docs/capacity.md", "it is right on {} again\n({} of its training inputs): with this rate",
      f"{_K}/sweep-gla-q32-70000.json", _FIT, ["{:.3f}", "{:.3f}"])  # fmt: skip
entry("docs/capacity.md", "for {} steps (`--steps 44000 --rebase-at 32000`",
      f"{_K}/sweep-gla-q32-44000.json", [("runs", 0, "steps")], ["{:,}"])  # fmt: skip
entry("docs/capacity.md",
      "Trained for {} steps (`--steps 70000\n--rebase-at 58000`, the last row, {} s)",
      f"{_K}/sweep-gla-q32-70000.json", [("runs", 0, "steps"), ("runs", 0, "seconds")],
      ["{:,}", "{:,.0f}"])  # fmt: skip
entry("docs/capacity.md", "GLA at q = 32 levels off\nat {} of fresh inputs",
      f"{_K}/sweep-gla-q32-70000.json", [("runs", 0, "accuracy")], ["{:.3f}"])  # fmt: skip
one("docs/capacity.md", "GLA's whole 23,000 steps ({} minutes)", f"{_K}/sweep-gla-q16.json",
    ("runs", 0, "seconds"), lambda v: f"{v / 60:.1f}")  # fmt: skip
entry("docs/capacity.md", "Based decodes at K = {}, **{} bits, {}x**",
      f"{_K}/capacity-based-q16-cut.json",
      [("rows", 0, "bits_per_coordinate"), ("rows", 0, "transcript_bits"), ("rows", 0, "ratio")],
      ["{}", "{:.0f}", "{:.2f}"])  # fmt: skip
one("docs/capacity.md", "so its cut holds `3d + 3 = {}`", f"{_K}/capacity-based-q16-cut.json",
    ("rows", 0, "state_elements"), "{}")  # fmt: skip


# docs/capacity.md: what prove finds for every committed causal file (issue #61)
PROVE = "docs/capacity/prove/committed.json"


def _prove_files(rows):
    return list(dict.fromkeys(r["weights"] for r in rows))


def _prove_cells(weights):
    def cells(rows):
        rs = [r for r in rows if r["weights"] == weights]
        proved = [r for r in rs if r["verdict"] == "proved"]
        p = proved[0] if proved else None
        tail = f"K = {p['bits']}: {p['cut_bits']} bits, {p['ratio']:.2f}x" if p else "none"
        q = int(weights.split("-q")[1].split("-")[0])
        return (weights.split("docs/capacity/")[1], q, " ".join(r["verdict"][0] for r in rs), tail)

    return cells


for _w in _prove_files(load(PROVE)["rows"]):
    entry("docs/capacity.md", "| `{}` | {} | {} | {} |", PROVE,
          [("rows", _prove_cells(_w), i) for i in range(4)], ["{}"] * 4)  # fmt: skip
_GOAL = {"weights": "docs/capacity/frontier/s7/elu1sum/rebase/"
         "hard-q64-s7-linear-elu1sum-L1-H1-r1-d64-lr0.001-seed0.npz", "bits": 4}  # fmt: skip
entry("docs/capacity.md", "the counterexample has {} nonzero answers of 64", PROVE,
      [("rows", _GOAL, "counterexample", lambda t: sum(x != 0 for x in t))], ["{}"])  # fmt: skip
entry("docs/capacity.md", "  {} of its 64 queries wrong", PROVE,
      [("rows", _GOAL, lambda r: sum(a != b for a, b in zip(r["counterexample"],
                                                          r["engine_answers"], strict=True)))],
      ["{}"])  # fmt: skip
_GLA = "docs/capacity/frontier/s7/rebase-kinds/hard-q16-s7-gla-L1-H1-r1-d16-lr0.003-seed0.npz"
entry("docs/capacity.md", "GLA at F(16,7): K = {}, {} bits,", PROVE,
      [("rows", {"weights": _GLA, "bits": 5}, "bits"),
       ("rows", {"weights": _GLA, "bits": 5}, "cut_bits")], ["{}", "{}"])  # fmt: skip
entry("docs/capacity.md", "with K = 3: {} bits, {}x the floor, {} leaves.", PROVE,
      [("construction", "cut_bits"), ("construction", "ratio"), ("construction", "leaves")],
      ["{}", "{:.2f}", "{}"])  # fmt: skip
_Q8 = "docs/capacity/prove/transcript-q8-K4-all.json"
one("docs/capacity.md", "run on all of its {} inputs at K = 4 by `transcript", _Q8,
    ("protocols", 0, "inputs"), "{:,}")  # fmt: skip
entry("docs/capacity.md", "  {} (readout basis, seed 1) and {} (register noise, seed 0) inputs.",
      _Q8, [("protocols", 0, "wrong_inputs"), ("protocols", 1, "wrong_inputs")],
      ["{:,}", "{:,}"])  # fmt: skip
one("docs/capacity.md", "K = 4, 8 and 12 after 30 s each ({} boxes open at K = 4):", PROVE,
    ("mqar", {"bits": 4}, "open_boxes"), "{:,}")  # fmt: skip
for _k in (4, 8, 12):
    one("docs/capacity.md", "is `{}` at\n  K = 4, 8 and 12", PROVE,
        ("mqar", {"bits": _k}, "verdict"), "{}")  # fmt: skip
entry("docs/capacity.md", "1.33x (64 bits, K 4; 1/1; refuted, proved at K {}: {}x) |", PROVE,
      [("rows", {"weights": _GLA, "bits": 5}, "bits"),
       ("rows", {"weights": _GLA, "bits": 5}, "ratio")], ["{}", "{:.2f}"])  # fmt: skip


# docs/capacity.md: MQAR to q = 64, one feature per query key
_MQ = "docs/capacity/frontier/mqar"


def _best(d):
    decoded = (r for r in d["rows"] if r["bits_per_coordinate"])
    return min(decoded, key=lambda r: r["transcript_bits"])


_BEST_MQ = [
    lambda d: f"{_best(d)['ratio']:.2f}",
    lambda d: str(_best(d)["bits_per_coordinate"]),
    lambda d: f"{_best(d)['transcript_bits']:.0f}",
    lambda d: f"{_best(d)['inputs']:,}",
]


def _BITS_MQ(d):
    return f"{_best(d)['transcript_bits']:,.0f}"


_RATIO_MQ, _K_MQ, _INPUTS_MQ = _BEST_MQ[0], _BEST_MQ[1], _BEST_MQ[3]
# the best decoded model of each q, in the sentence that lists them all
entry("docs/capacity.md", "per q decodes: {}x the floor at q = 4 and 8 (K = {};\n  {} and 64 bits, "
      "on every one of the {} and", f"{_MQ}/capacity-q4-lr0.003-0.01-cut.json", [(), (), (), ()],
      [_RATIO_MQ, _K_MQ, _BITS_MQ, _INPUTS_MQ])  # fmt: skip
entry("docs/capacity.md", "32 and {} bits, on every one of the 256 and {} inputs), 12.00x at",
      f"{_MQ}/capacity-q8-cut.json", [(), ()], [_BITS_MQ, _INPUTS_MQ])  # fmt: skip
entry("docs/capacity.md", "inputs), {}x at\n  q = 16, and", f"{_MQ}/capacity-q16-cut.json",
      [()], [_RATIO_MQ])  # fmt: skip
entry("docs/capacity.md", "and {}x at q = 32 and 64 (K = {}; {} and",
      f"{_MQ}/capacity-q32-cut.json", [(), (), ()], [_RATIO_MQ, _K_MQ, _BITS_MQ])  # fmt: skip
entry("docs/capacity.md", "512 and {} bits, on their\n  {}-input samples)",
      f"{_MQ}/capacity-q64-lr0.03-cut.json", [(), ()], [_BITS_MQ, _INPUTS_MQ])  # fmt: skip
entry("docs/capacity.md", "(4.00x at q = 8 on every input, {}x at q = 32 and 64 on",
      f"{_MQ}/capacity-q32-cut.json", [()], [_RATIO_MQ])  # fmt: skip
entry("docs/capacity.md", "rank grows with q ({}x at q = 8 on every input",
      f"{_MQ}/capacity-q8-cut.json", [()], [_RATIO_MQ])  # fmt: skip
entry("docs/capacity.md", "q = 4 rate 0.01 gives the row's best (rank 4, K = {}, {} bits, {}x)",
      f"{_MQ}/capacity-q4-lr0.003-0.01-cut.json", [(), (), ()],
      [_K_MQ, _BITS_MQ, _RATIO_MQ])  # fmt: skip
entry("docs/capacity.md", "their twelve runs decodes (the best is right on {} of fresh inputs",
      f"{_MQ}/sweep-q8-lr0.003-0.01.json", [()],
      [lambda d: f"{max(r['accuracy'] for r in d['runs']):.3f}"])  # fmt: skip
entry("docs/capacity.md", "  decodes its {}-input sample at K = {}: **{} bits, {}x** the\n"
      "  {}-bit floor (error rate below {} at 95%)", f"{_MQ}/capacity-q64-lr0.03-cut.json",
      [(), (), (), (), (), ()],
      [_INPUTS_MQ, _K_MQ, _BITS_MQ, _RATIO_MQ,
       lambda d: f"{d['rows'][0]['bound_bits']:.0f}",
       lambda d: f"{d['rows'][0]['error_rate_upper95']:.1e}".replace("e-04", "e-4")])  # fmt: skip
entry("docs/capacity.md", "stops at step {} ({} s); its kept\n  model (step {}) is right",
      f"{_MQ}/sweep-q64-lr0.03.json",
      [("runs", 0, "steps"), ("runs", 0, "seconds"), ("runs", 0, "kept_step")],
      ["{:,}", "{:,.0f}", "{:,}"])  # fmt: skip
one("docs/capacity.md", "fits all but a tail ({}), and Based decodes",
    f"{_K}/sweep-deltanet-q16.json", ("runs", 0, "accuracy"), "{:.3f}")  # fmt: skip
one("docs/capacity.md", "and Based decodes at {}x, its three Taylor",
    f"{_K}/capacity-based-q16-cut.json", ("rows", 0, "ratio"), "{:.2f}")  # fmt: skip
one("docs/capacity.md", "rank 2q at q = 16) is right on no input after {} steps, which\n"
    "  took 3,308 s here", f"{_MQ}/sweep-q64.json", ("runs", 0, "steps"), "{:,}")  # fmt: skip
one("docs/capacity.md", "which\n  took {} s here.", f"{_MQ}/sweep-q64.json",
    ("runs", 0, "seconds"), "{:,.0f}")  # fmt: skip
one("docs/capacity.md", "is right on {} input after 3,000 steps", f"{_MQ}/sweep-q64.json",
    ("runs", 0, "accuracy"), lambda v: "no" if v == 0 else f"{v}")  # fmt: skip


# docs/results.md: the softmax budget screened at 16 seeds (issue #45)
def _screen_stats(data: dict) -> dict:
    acc = [r["validation_accuracy"] for r in data["rows"]]
    budget = data["parameters"]["steps"]
    return {"worst": min(acc), "mean": sum(acc) / len(acc),
            "capped": sum(r["steps"] >= budget for r in data["rows"]),
            "below": sum(a < 0.99 for a in acc)}  # fmt: skip


for _n in (2000, 4000, 8000):
    entry("docs/results.md", f"| {_n:,} | {{}} | {{}} | {{}} | {{}} |",
          f"docs/ood/screen-softmax16-steps{_n}.json", [(), (), (), ()],
          [lambda d: f"{_screen_stats(d)['worst']:.3f}",
           lambda d: f"{_screen_stats(d)['mean']:.5f}",
           lambda d: str(_screen_stats(d)["capped"]),
           lambda d: str(_screen_stats(d)["below"])])  # fmt: skip

_SM = "docs/ood/softmax_16_seeds_steps4000.json"


def _worst(scale):
    def low(d):
        return f"{min(r['test_accuracy'] for r in d['runs'] if r['spec']['scale'] == scale):.4f}"

    return low


entry("docs/results.md",
      "Worst test accuracy of the 16 seeds: {} at 8:64:2000, {} at 10:128:2000,\n{} at", _SM,
      [(), (), ()], [_worst(x) for x in ("8:64:2000", "10:128:2000", "12:256:2000")])  # fmt: skip
one("docs/results.md", "(the longest after {} steps)", _SM,
    ("runs", lambda runs: max(r["steps"] for r in runs)), "{:,}")  # fmt: skip
entry("docs/results.md", "seed 5 now reaches it after\n{} steps and scores {} on the test pool",
      _SM, [("runs", 5, "steps"), ("runs", 5, "test_accuracy")], ["{:,}", "{:.4f}"])  # fmt: skip
entry("docs/results.md", "seed 6\nafter {} steps, {} (0.978)", _SM,
      [("runs", 6, "steps"), ("runs", 6, "test_accuracy")], ["{:,}", "{:.4f}"])  # fmt: skip


def _seed_at_2000(seed):
    def acc(runs):
        (run,) = [r for r in runs if r["spec"]["model"] == "softmax"
                  and r["spec"]["scale"] == "8:64:2000" and r["spec"]["seed"] == seed]  # fmt: skip
        return run["test_accuracy"]

    return acc


entry("docs/results.md", "on the test pool ({} at 2,000), seed 6", O16,
      [("runs", _seed_at_2000(5))], ["{:.3f}"])  # fmt: skip
entry("docs/results.md", ", 0.9795 ({}). Fitted", O16, [("runs", _seed_at_2000(6))],
      ["{:.3f}"])  # fmt: skip


def _ids():
    return [f"{d}:{t[:50]}" for d, t, *_ in NUMBERS]


def filled_text(text: str, json_file: str, paths: tuple, formats: tuple) -> str:
    """``text`` with each ``{}`` replaced by its value from ``json_file``, formatted."""
    data = load(json_file)
    values = [fmt(lookup(data, p), f) for p, f in zip(paths, formats, strict=True)]
    parts = text.split("{}")
    return "".join(a + b for a, b in zip(parts, values + [""], strict=True))


@pytest.mark.parametrize("doc_file, text, json_file, paths, formats", NUMBERS, ids=_ids())
def test_documented_number_equals_its_result_file(doc_file, text, json_file, paths, formats):
    filled = filled_text(text, json_file, paths, formats)
    page = doc(doc_file)
    if filled not in page:
        # name the line the doc has instead, so the stale number is easy to find
        head = text.split("{}")[0].strip() or text[:30]
        near = [ln for ln in page.splitlines() if head in ln][:3]
        pytest.fail(
            f"{doc_file} should contain {filled!r} (from {json_file}); near: {near}; "
            "`python tests/test_doc_numbers.py --write` rewrites it from the file"
        )


def test_the_table_checks_something_in_every_doc():
    docs = {d for d, *_ in NUMBERS}
    for page in (
        "README.md",
        "docs/theory.md",
        "docs/cli.md",
        "docs/results.md",
        "docs/reproduce/report.md",
    ):
        assert page in docs, page


def test_write_puts_stale_numbers_back(tmp_path, monkeypatch):
    """``--write`` restores numbers changed in a copy of the docs (a table cell, a prose number)."""
    import shutil

    for rel in {d for d, *_ in NUMBERS} | {j for _, _, j, _, _ in NUMBERS}:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, tmp_path / rel)
    theory = tmp_path / "docs" / "theory.md"
    original = theory.read_text()
    stale = original.replace(
        "| 64 | random(w=32, d=4, seed=0, streamed) | 65,536 | 65,536 | 3470.25 | 3,471 |",
        "| 64 | random(w=32, d=4, seed=0, streamed) | 65,536 | 65,536 | 3470.25 | 3,470 |",
    )
    stale = stale.replace("m = 64 it certifies `r >= 3,471`", "m = 64 it certifies `r >= 1,947`")
    assert stale != original
    theory.write_text(stale)
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    load.cache_clear()
    doc.cache_clear()
    try:
        assert regenerate(write=True) == 0
        assert theory.read_text() == original
    finally:
        load.cache_clear()
        doc.cache_clear()


# ---- regenerating the docs from the files ------------------------------------
def regenerate(write: bool) -> int:
    """Put every entry's current value into its doc; print what is stale or cannot be placed.

    The quoted text with its ``{}`` as wildcards (within one line each) must match
    exactly one place in the doc; that place is replaced by the filled text.
    Returns the number of entries still not in their docs.
    """
    import re

    pages = {d: (ROOT / d).read_text() for d, *_ in NUMBERS}
    left = 0
    for doc_file, text, json_file, paths, formats in NUMBERS:
        filled = filled_text(text, json_file, paths, formats)
        page = pages[doc_file]
        if filled in page:
            continue
        parts = [re.escape(p) for p in text.split("{}")]
        last_cell = text.endswith("{} |") and text.count("{}") == 1
        pattern = ("(?:.+)" if last_cell else "(?:[^\n]+?)").join(parts)
        hits = list(re.finditer(pattern, page))
        if len(hits) == 1 and write:
            m = hits[0]
            pages[doc_file] = page[: m.start()] + filled + page[m.end() :]
            print(f"{doc_file}: {m.group(0)!r} -> {filled!r}")
        else:
            left += 1
            print(f"{doc_file}: stale, {len(hits)} candidate places: {filled!r} (from {json_file})")
    if write:
        for d, text in pages.items():
            if (ROOT / d).read_text() != text:
                (ROOT / d).write_text(text)
    return left


if __name__ == "__main__":
    sys.exit(1 if regenerate("--write" in sys.argv) else 0)
