"""Plots of run results (PNG), for the CLI's ``--plot`` and for API users alike."""

from __future__ import annotations

import math
from pathlib import Path

from sketchsim.runs.minrank import nonneg_lower

__all__ = ["plot_frontier", "plot_minrank", "plot_audit", "plot_trained_frontier", "screen_points"]


def _evidence(cell: dict) -> str:
    """``exhaustive``, ``proved``, ``refuted`` or ``sampled`` (cells before #61: by mode)."""
    return cell.get("evidence") or ("exhaustive" if cell["mode"] == "exhaustive" else "sampled")


def plot_frontier(cells, vary, path) -> None:
    """Declared bits at the smallest decoded value against the bound, one line per s (PNG)."""
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
    # how each point knows: filled = every input (enumerated or proved), hollow = a sample,
    # a red cross = refuted by prove (docs/theory.md 5.5)
    style = {"refuted": ("x", "red"), "sampled": ("o", "none")}
    for ev in ("sampled", "refuted"):
        pts = [c for p in lines.values() for c in p if _evidence(c) == ev]
        if pts:
            mark, face = style[ev]
            ax.scatter([c["bound_bits"] for c in pts], [c["declared_bits"] for c in pts], s=90,
                       marker=mark, facecolors=face, edgecolors="k" if ev == "sampled" else None,
                       color="red" if ev == "refuted" else None, zorder=5,
                       label="sampled only" if ev == "sampled" else "refuted by prove")  # fmt: skip
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
    ax.set_ylabel(f"bits at the smallest decoded {vary.name}")
    ax.set_title(f"bits frontier ({vary})")
    ax.legend(fontsize=7)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_minrank(rows, path) -> None:
    """The brackets of r*(m) against m on a log2 axis (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ms = [r["m"] for r in rows]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(ms, [r["exact_rank"] for r in rows], "k:", label="2^m (one-hot)")
    ax.plot(ms, [r["construction"]["rank"] for r in rows], "s-", label="construction upper")
    for kind, style in (("nonneg", "o-"), ("signed", "^--")):
        pts = [
            (r["m"], r[f"trained_{kind}"]["rank"])
            for r in rows
            if r.get(f"trained_{kind}") and r[f"trained_{kind}"]["rank"] is not None
        ]
        if pts:
            ax.plot(*zip(*pts, strict=True), style, label=f"trained upper ({kind})")
    ax.plot(ms, [r["lower"]["certified_rank"] for r in rows], "v-", label="certified lower")
    if any(r.get("lower_nonneg") for r in rows):
        ax.plot(ms, [nonneg_lower(r) for r in rows], "^:", label="nonneg lower (sign orders)")
    ax.set_yscale("log", base=2)
    ax.set_xlabel("m")
    ax.set_ylabel("feature rank r")
    ax.set_title("brackets of r*(m) at N = 3")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_audit(rows, path) -> None:
    """Accuracy against attention-state bits per trained head, with the certified floor (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for row in rows:
        if "rows" not in row:
            continue
        pts = sorted(row["rows"], key=lambda r: r["state_bits"])
        spec = row["spec"]
        ax.plot([p["state_bits"] for p in pts], [p["accuracy"] for p in pts], marker=".",
                label=f"r = {spec['rank']} seed {spec['seed']}")  # fmt: skip
    floors = {row["certified"]["min_state_bits"] for row in rows if "certified" in row}
    for bits in sorted(floors):  # the certificate's floor: r* (d + 1) coordinates, 1 bit each
        ax.axvline(bits, color="red", ls=":", label=f"certified floor {bits:,} bits")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("attention state bits per sequence (k bits x coordinates)")
    ax.set_ylabel("exact-sequence accuracy")
    ax.set_title("bit audit of trained heads")
    ax.legend(fontsize=6)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def screen_points(rows: list[dict], floor: float = 0.99) -> list[dict]:
    """Per (q, s, kind), the fewest bits at which a model that decodes no sample reaches,
    on its curve's screen (``capacity``'s first ``CURVE_INPUTS`` inputs), the accuracy
    it has at 32 bits, when that is at least ``floor``: ``{"q", "s", "kind", "bits",
    "weights", "bits_per_coordinate", "accuracy"}``.

    Such a model is as right with ``K`` bits as with 32 but is not decoded (its float
    model misses a few inputs, or the sample holds one it gets wrong), so these
    points stand apart from :func:`~sketchsim.runs.capacity.frontier_rows`.
    """
    from sketchsim.runs.capacity import kind_name

    best: dict[tuple, dict] = {}
    for r in rows:
        if r["bits_per_coordinate"] is not None:  # decoded: on the frontier
            continue
        top = r["curve"][-1]["accuracy"]
        if top < floor:
            continue
        at = next(c for c in r["curve"] if c["accuracy"] >= top)
        key = (r["q"], r["s"], kind_name(r["architecture"]))
        point = {"q": r["q"], "s": r["s"], "kind": key[2], "bits": at["transcript_bits"],
                 "weights": r["weights"], "bits_per_coordinate": at["bits"],
                 "accuracy": top}  # fmt: skip
        if key not in best or point["bits"] < best[key]["bits"]:
            best[key] = point
    return [best[k] for k in sorted(best)]


def plot_trained_frontier(rows: list[dict], path) -> None:
    """The smallest decoding transcript bits against ``q``, one line per kind of architecture
    and one panel per ``s``, beside the floor ``q log2(s+1)`` and zoology's float32
    count of the same models' states (elements x 32, dashed); the models of
    :func:`screen_points` (their 32-bit accuracy on the screen, not decoded) are open
    markers; a frontier point whose row's ``evidence`` is ``proved`` (``prove``,
    docs/theory.md 5.5) is boxed green, and the rows ``prove`` refuted (off the
    frontier: wrong on some input) are red crosses (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from sketchsim.runs.capacity import frontier_rows

    decoded = [f for f in frontier_rows(rows) if f["best"] is not None]
    screened = screen_points(rows)
    elements = {r["weights"]: r["state_elements"] for r in rows}
    ss = sorted({r["s"] for r in rows})
    kinds = sorted({f["kind"] for f in decoded} | {p["kind"] for p in screened})
    colors = {k: f"C{i % 10}" for i, k in enumerate(kinds)}
    fig, axes = plt.subplots(1, len(ss), figsize=(5.2 * len(ss), 4.4), squeeze=False)
    for ax, s in zip(axes.flat, ss, strict=True):
        qs = sorted({r["q"] for r in rows if r["s"] == s})
        ax.plot(qs, [q * math.log2(s + 1) for q in qs], "k-", lw=2, label="floor q log2(s+1)")
        for kind in kinds:
            pts = sorted((f["q"], f["best"]) for f in decoded if f["s"] == s and f["kind"] == kind)
            if pts:
                x = [q for q, _ in pts]
                ax.plot(x, [b["transcript_bits"] for _, b in pts], "o-", color=colors[kind],
                        label=kind)  # fmt: skip
                ax.plot(x, [32 * elements[b["weights"]] for _, b in pts], "--", lw=0.8,
                        color=colors[kind], alpha=0.6)  # fmt: skip
                for q, b in pts:  # the points prove decided right on every input (#61)
                    if b.get("evidence") == "proved":
                        ax.plot([q], [b["transcript_bits"]], "s", ms=12, mfc="none", mew=1.5,
                                color="green", zorder=5)  # fmt: skip
            opens = sorted((p["q"], p["bits"]) for p in screened
                           if p["s"] == s and p["kind"] == kind)  # fmt: skip
            if opens:
                ax.plot(*zip(*opens, strict=True), "o", mfc="none", ms=8, color=colors[kind],
                        label=None if pts else f"{kind} (screen only)")  # fmt: skip
        wrong = [(r["q"], r["transcript_bits"]) for r in rows if r["s"] == s
                 and r.get("evidence") == "refuted" and r.get("transcript_bits")]  # fmt: skip
        if wrong:  # decoded a sample, off the frontier: prove found an input they get wrong
            ax.plot(*zip(*wrong, strict=True), "x", ms=9, mew=1.5, color="red", zorder=6)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log", base=2)
        ax.set_xticks(qs, [str(q) for q in qs])
        ax.set_xlabel("q (answers)")
        ax.set_ylabel("transcript bits (cut state x K)")
        ax.set_title(f"smallest decoding trained state, s = {s}", fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
    ax = axes.flat[0]
    if any(f["best"].get("evidence") == "proved" for f in decoded):
        ax.plot([], [], "s", ms=12, mfc="none", mew=1.5, color="green",
                label="proved right on every input (prove)")  # fmt: skip
    if any(r.get("evidence") == "refuted" for r in rows):
        ax.plot([], [], "x", ms=9, mew=1.5, color="red",
                label="decoded its sample, refuted by prove (off the frontier)")  # fmt: skip
    ax.plot([], [], "k--", lw=0.8, label="float32 state of the same model (zoology's count)")
    ax.plot([], [], "ko", mfc="none",
            label="its 32-bit accuracy (>= 0.99) on the screen at these bits, "
            "not decoded")  # fmt: skip
    labels: dict = {}
    for a in axes.flat:  # one legend for all panels, each label once
        for handle, label in zip(*a.get_legend_handles_labels(), strict=True):
            labels.setdefault(label, handle)
    fig.legend(labels.values(), labels.keys(), loc="lower center", ncol=4, fontsize=7)
    fig.tight_layout(rect=(0, 0.07 + 0.025 * math.ceil(len(labels) / 4), 1, 1))
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
