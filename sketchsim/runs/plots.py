"""Plots of run results (PNG), for the CLI's ``--plot`` and for API users alike."""

from __future__ import annotations

from pathlib import Path

from sketchsim.runs.minrank import nonneg_lower

__all__ = ["plot_frontier", "plot_minrank", "plot_audit"]


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
