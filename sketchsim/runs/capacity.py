"""How many bits a trained model's state needs: saved models run as sketch protocols.

For every weights file (:mod:`sketchsim.sketch.trained`, written by ``sweep
--suite capacity --save-weights``) :func:`measure_weights` finds the smallest
register width ``K`` in ``1..32`` at which the engine's readout is right on
every input of the model's family: every input when the family has at most
2^20 (exhaustive), else every input of a seeded sample, with the one-sided 95%
Clopper-Pearson upper bound on the error rate.  Correctness need not be
monotone in ``K`` (rounding, saturation), so ``K`` is *scanned* upwards; a
``K`` is run on all inputs only after it is right on the curve's inputs and on
every input found wrong at an earlier ``K`` (the witnesses), which cannot change
the answer (a subset's failure is the whole set's).  That run is the
measurement itself (:func:`sketchsim.sketch.measure.measure`):
declared transcript bits ``L H E K``, used bits, entry entropy, and
``ratio = transcript_bits / bound_bits`` with ``bound_bits = q log2(s+1)``.

**The theorem as a guard** (THEORY section 5): a model decoded on every input of
an exhaustive family shows at least ``(s+1)^q`` distinct transcripts, so its used
bits are at least the bound.  A measurement that says otherwise is a bug in
sketchsim (a quantizer leaking past the channel, a wrong count), never a finding:
:func:`theorem_guard` raises.

No torch here: the engine runs the weights file alone.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import numpy as np

from sketchsim.config import BITS_TOLERANCE
from sketchsim.errors import SketchsimError
from sketchsim.experiments.stats import mean_interval
from sketchsim.sketch.family_plugins import make_family
from sketchsim.sketch.weights_file import builtin_label, label_name, weights_family

__all__ = [
    "BITS",
    "SCREEN_INPUTS",
    "CURVE_INPUTS",
    "theorem_guard",
    "measure_weights",
    "not_covered",
    "prove_evidence",
    "file_recipe",
    "reference_points",
    "capacity_dir",
    "capacity_result",
    "measure_file",
    "summarize_rows",
    "frontier_rows",
    "kind_name",
    "plot_capacity",
]

#: Register widths searched.
BITS = tuple(range(1, 33))
#: Inputs every K must get right before it is run on all of them.
SCREEN_INPUTS = 256
#: Inputs the accuracy curve (accuracy against transcript bits) is measured on.
CURVE_INPUTS = 4096


def theorem_guard(row: dict, where: str = "") -> None:
    """Raise when an exhaustive, decoded measurement uses fewer bits than the bound.

    ``row`` needs ``mode``, ``decoded``, ``used_bits``, ``log2_distinct`` and
    ``bound_bits``.  THEORY section 5 makes this impossible for any deterministic
    model whose answers are functions of their own input and the transcript.

    Raises
    ------
    SketchsimError
        Naming the file and saying it is a bug.
    """
    if row["mode"] != "exhaustive" or not row["decoded"]:
        return
    bound = row["bound_bits"] - BITS_TOLERANCE
    for what in ("used_bits", "log2_distinct"):
        if row[what] < bound:
            raise SketchsimError(
                f"{where or 'a model'} is decoded on every input with {what.replace('_', ' ')} "
                f"{row[what]:.2f} < the bound {row['bound_bits']:.2f} (THEORY 5 forbids it): "
                "this is a bug in sketchsim, please report it"
            )


def _engine_answers(protocol, params, family, tokens, fixed):
    from sketchsim.sketch.engine import Engine

    ctx = family.context()
    engine = Engine(protocol.plan(ctx, params), ctx, protocol.name)
    return engine.run(tokens, fixed=fixed).answers


def measure_weights(
    path,
    samples: int = 20_000,
    seed: int = 0,
    protocol=None,
    progress: Callable[[str], None] | None = None,
    rounding: str = "every",
    prove_budget: float | None = None,
) -> dict:
    """The smallest ``K`` decoding every input, and the transcript there (module docstring).

    Parameters
    ----------
    path : path-like
        A weights file.
    samples : int
        Inputs drawn when the family has more than 2^20.
    seed : int
        Seed of the sample.
    protocol : Protocol, optional
        Runs the file (default: the built-in ``trained``); tests pass broken ones.
    rounding : {"every", "cut"}
        A causal model's state rounded after every token (the model in fixed point)
        or only its transcript, at the cut (the protocol's ``rounding``); a kernel
        model's tokens send rounded symbols either way.

    Returns
    -------
    dict
        A JSON row: ``weights``, ``architecture``, ``family``, ``q``, ``s``,
        ``bits_per_coordinate`` (None when no K <= 32 decodes), ``transcript_bits``,
        ``used_bits``, ``entry_entropy_bits``, ``log2_distinct``, ``bound_bits``,
        ``ratio``, ``mode``, ``inputs``, ``correct_fraction``, ``error_rate_upper95``,
        ``state_elements`` and ``float_state_bits`` (zoology's count: elements x 32),
        ``kind`` (``kernel``: bidirectional; else the causal architecture), ``window``,
        ``cut_bits`` (a causal model's transcript: its registers at the cut),
        ``rounding`` (None for a kernel model), ``state_basis`` (``trained``, or
        ``readout``: a file of ``--rebase-at``) and ``curve`` (accuracy per K on up to
        :data:`CURVE_INPUTS` inputs).
    """
    from sketchsim.sketch.weights_file import load_weights, pinned

    # the unit's one read: the bytes hashed are the bytes measured at every K
    w = load_weights(path)
    with pinned(w):
        row = _measure_loaded(w, path, samples, seed, protocol, progress, rounding)
        if prove_budget and row["evidence"] == "sampled" and row["bits_per_coordinate"]:
            _prove_row(row, w, rounding, prove_budget)
        return row


def _prove_row(row: dict, w, rounding: str, budget: float) -> None:
    """Prove or refute a sampled row at its K (theory.md 5.5); a refuted row is not decoded."""
    row.update(prove_evidence(w, weights_family(w), row["bits_per_coordinate"], rounding,
                              budget))  # fmt: skip
    if row["prove"]["verdict"] == "refuted":
        row["decoded"] = False


def prove_evidence(w, family, bits: int, rounding: str, budget: float) -> dict:
    """``{"prove": record}`` of :func:`sketchsim.prove.search.prove` at ``bits``, with
    ``"evidence"`` ``proved`` or ``refuted`` when it decided; ``not covered`` (and why) for
    a file it does not cover (:func:`not_covered`). Shared by capacity rows and frontier
    cells."""
    from sketchsim.prove.search import prove

    why = not_covered(w, family, rounding)
    if why:
        return {"prove": {"verdict": "not covered", "reason": why}}
    out = prove(w, family, bits, rounding, budget=budget)
    record = {"bits": bits, "verdict": out.verdict, "counterexample": out.counterexample,
              "engine_answers": out.engine_answers, "boxes": out.boxes,
              "open_boxes": out.open_boxes, "seconds": round(out.seconds, 3)}  # fmt: skip
    decided = out.verdict in ("proved", "refuted")
    return {"prove": record, **({"evidence": out.verdict} if decided else {})}


def not_covered(w, family, rounding: str) -> str:
    """Why ``prove`` does not cover a file ("" when it does): causal files on F(q, s), and
    on MQAR one-layer sum-state models rounded at the cut (:mod:`sketchsim.prove.mqar`)."""
    from sketchsim.sketch.family import HardFamily

    if not w.causal:
        return "prove covers causal files"
    if family.name == "mqar":
        from sketchsim.prove.mqar import MQARBoxModel

        try:
            MQARBoxModel.check(w, rounding)
        except SketchsimError as exc:
            return str(exc)
        return ""
    return "" if isinstance(family, HardFamily) else "prove covers F(q, s) and MQAR"


def _measure_loaded(w, path, samples, seed, protocol, progress, rounding) -> dict:
    """:func:`measure_weights` of the loaded, pinned file ``w``."""
    from sketchsim.sketch.family_plugins import family_label, plain_options
    from sketchsim.sketch.measure import choose_answers, measure
    from sketchsim.sketch.plugins import resolve

    family = weights_family(w)
    if protocol is None:
        protocol = resolve("trained").protocol
    # every input up to 2^20 (choose_answers' rule), else a sample: at 2^24 (F(8,7)) a
    # 32-entry model's run reached 22.6 GB and was killed (#61); transcript --exhaustive,
    # which streams, runs such families
    mode, T = choose_answers(family, None, samples)
    if mode == "sampled" and seed:
        T = np.random.default_rng([seed, 5]).integers(0, family.s + 1, T.shape).astype(T.dtype)
    fixed = family.fixed_tokens()
    a = w.arch
    elements = a["layers"] * a["heads"] * w.entries()
    n_curve = min(CURVE_INPUTS, T.shape[0])
    curve_tokens = family.variable_tokens(T[:n_curve])
    curve, best, report = [], None, None
    witnesses: list[int] = []  # inputs wrong at a K that passed the curve's inputs
    extra = {"rounding": rounding} if w.causal else {}

    def params(K):
        return {"weights": str(path), "sha256": w.sha256, "bits": K, **extra}

    for K in BITS:
        ans = _engine_answers(protocol, params(K), family, curve_tokens, fixed)
        right = (ans == T[:n_curve]).all(1)
        curve.append({"bits": K, "transcript_bits": elements * K, "accuracy": float(right.mean())})
        if best is not None or not right.all():
            continue
        if n_curve == T.shape[0]:
            best = K
            continue
        if witnesses:  # wrong on one of them: wrong on the whole set, no need to run it
            idx = np.asarray(witnesses)
            tokens = family.variable_tokens(T[idx])
            got = _engine_answers(protocol, params(K), family, tokens, fixed)
            if not (got == T[idx]).all():
                continue
        if progress:
            progress(f"{Path(path).name}: K = {K} on all {T.shape[0]:,} inputs")
        report = measure(family, T, protocol, params(K))
        if report.wrong_inputs == 0:  # (``decoded`` is None when right on a sample)
            best = K
        elif report.first_failure["input"] not in witnesses:
            witnesses.append(report.first_failure["input"])
    K = best if best is not None else BITS[-1]
    if report is None or report.params["bits"] != K:
        report = measure(family, T, protocol, params(K))
    bound = family.bound_bits
    plugin = label_name(w.header["label"], a) if w.header.get("label") else ""
    row = {
        "weights": Path(path).name,
        "weights_sha256": w.sha256,
        # rendered from the validated architecture (a plug-in's checked NAME, never a
        # built-in's): the label the header claims is not trusted to name the model
        "architecture": _label(a, plugin),
        "plugin": plugin or None,
        "family": family_label(family),
        "family_name": family.name,
        "family_options": plain_options(family.options()),
        "family_seed": family.seed,
        "q": family.q,
        "s": family.s,
        "seed": w.header.get("seed"),
        "layers": a["layers"],
        "heads": a["heads"],
        "rank": a["rank"],
        "value_width": a["value_width"],
        "feature_map": a["feature_map"],
        "kind": a.get("kind", "kernel"),
        "window": a.get("window") or None,
        "float_accuracy": w.header.get("accuracy"),
        "trained_at_bits": w.header.get("trained_at_bits"),
        "state_basis": w.header.get("state_basis", "trained"),
        "recipe": file_recipe(w, family.q),
        "state_elements": elements,
        "float_state_bits": elements * 32,
        "bits_per_coordinate": best,
        "measured_at_bits": K,
        "transcript_bits": report.declared_bits if best is not None else None,
        # a causal model's transcript is its state at the cut (docs/theory.md 5.1)
        "cut_bits": report.declared_bits if best is not None and w.causal else None,
        "used_bits": report.used_bits,
        "entry_entropy_bits": report.entry_entropy_bits,
        "log2_distinct": report.log2_distinct,
        "bound_bits": bound,
        "ratio": report.declared_bits / bound if best is not None else None,
        "used_ratio": report.used_bits / bound,
        "mode": mode,
        "inputs": int(T.shape[0]),
        "correct_fraction": report.correct_fraction,
        "decoded": report.decoded,
        "error_rate_upper95": report.error_rate_upper95,
        # how it knows: every input of the family run, or a sample and, for the model at
        # measured_at_bits, Fano's floor at its 95% error bound (docs/theory.md 5.4)
        "evidence": "exhaustive" if mode == "exhaustive" else "sampled",
        "floor_at_error": report.floor_at_error,
        "ratio_at_error": _ratio(report.declared_bits, report.floor_at_error, best),
        "search": "scan",
        "rounding": rounding if w.causal else None,
        "curve": curve,
    }
    row.update(accuracy_check(row["float_accuracy"], curve[-1]["accuracy"], n_curve))
    theorem_guard(row, str(path))
    return row


def file_recipe(w, q: int) -> list[str]:
    """What training fixed by hand, from the validated architecture and the training fields
    the header records (:func:`sketchsim.experiments.recipe.recipe`; a header's own
    ``recipe`` words are not read: they are derived again)."""
    from sketchsim.experiments.recipe import recipe

    spec = w.header.get("spec")
    training = {**(spec if isinstance(spec, dict) else {}),
                "train_bits": w.header.get("trained_at_bits") or 0}  # fmt: skip
    return recipe(w.arch, q, training, w.header.get("state_basis", "trained"))


def _ratio(bits: float, floor: float | None, best) -> float | None:
    """Declared bits over the error-rate floor, for a model right on every sampled input."""
    return bits / floor if best is not None and floor else None


def accuracy_check(recorded, engine: float, inputs: int) -> dict:
    """Whether the engine at K = 32 reproduces the accuracy recorded at training.

    ``engine`` is the engine's accuracy at K = 32 on ``inputs`` inputs; a row
    whose recorded accuracy differs by more than ``max(0.01, 4 sigma)`` (sigma:
    the binomial standard error of the recorded accuracy on ``inputs`` draws)
    is flagged: its file does not run the model that was trained.
    """
    out = {"engine_accuracy_k32": engine, "accuracy_mismatch": None}
    if recorded is None:
        return out
    sigma = math.sqrt(max(recorded * (1 - recorded), 0.0) / max(inputs, 1))
    out["accuracy_mismatch"] = abs(engine - recorded) > max(0.01, 4 * sigma)
    return out


def _label(a: dict, plugin: str = "") -> str:
    """The row's architecture: sketchsim's label of ``a``, or a plug-in's ``NAME`` and the
    sizes (its NAME checked: no built-in kind's or map's)."""
    label = builtin_label(a)
    return f"{plugin} {label.split(' ', 1)[1]}" if plugin else label


#: Hand-written protocols drawn beside the models, per family.
REFERENCES = {"hard": ("block-counts", "kernel:values=blocks,bits=7"), "mqar": ("kv-sum",)}


def reference_points(family, samples: int = 20_000) -> list[dict]:
    """The hand-written protocols of :data:`REFERENCES` measured on ``family``."""
    from sketchsim.sketch.family_plugins import family_label
    from sketchsim.sketch.measure import choose_answers, measure
    from sketchsim.sketch.plugins import discover, resolve

    mode, T = choose_answers(family, None, samples)
    found, out = discover(), []
    for spec in REFERENCES.get(family.name, ()):
        r = resolve(spec, found)
        rep = measure(family, T, r.protocol, r.params)
        out.append(
            {
                "protocol": spec,
                "family": family_label(family),
                "q": family.q,
                "s": family.s,
                "transcript_bits": rep.declared_bits,
                "ratio": rep.declared_bits / family.bound_bits,
                "correct_fraction": rep.correct_fraction,
                "mode": mode,
            }
        )
    return out


def kind_name(architecture: str) -> str:
    """An architecture's label without its state sizes (``elu1 L1 H1 r1 d16`` ->
    ``elu1 L1 H1``): the kind :func:`frontier_rows` searches the sizes of."""
    return architecture.rsplit(" r", 1)[0] if " r" in architecture else architecture


def frontier_rows(rows: list[dict]) -> list[dict]:
    """Per (family, q, s, kind): the smallest transcript bits of any decoded model.

    ``kind`` is the architecture without its sizes (feature map or plug-in name,
    layers, heads: ``elu1 L1 H1``), so the state sizes (``r``, ``d``), ``K``,
    seeds and learning rates the folder holds are searched over; every run stays
    in ``rows``.  Each entry names the best model (file, ``r``, ``d``, ``K``,
    seed, ``trained_at_bits``, ``state_basis``), its ``ratio`` to the bound and its
    error bound, and counts the models of that kind (``models``) and those decoded.
    """
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["family"], r["q"], r["s"], kind_name(r["architecture"])), []).append(r)
    out = []
    for (fam, q, s, kind), rs in sorted(groups.items()):
        # right on every input run (``decoded`` is None when that is a sample's)
        # a row ``prove`` refuted is wrong on some input: not decoded
        ok = [r for r in rs if r["bits_per_coordinate"] is not None
              and r.get("evidence") != "refuted"]  # fmt: skip
        best = min(ok, key=lambda r: (r["transcript_bits"], r["weights"]), default=None)
        out.append(
            {
                "family": fam,
                "q": q,
                "s": s,
                "kind": kind,
                "models": len(rs),
                "decoded_models": len(ok),
                "bound_bits": rs[0]["bound_bits"],
                "best": None
                if best is None
                else {
                    k: best.get(k)
                    # (rows from before a key existed: their entries have no such key)
                    for k in (*_BEST_KEYS, *(k for k in _LATER_KEYS if k in best))
                },
            }
        )
    return out


#: What a frontier entry says of its best model.
_BEST_KEYS = ("weights", "architecture", "rank", "value_width", "seed", "bits_per_coordinate",
              "transcript_bits", "ratio", "mode", "inputs", "error_rate_upper95",
              "trained_at_bits")  # fmt: skip
#: Keys of the rows of later versions (state_basis; #61's floor, #63's recipe).
_LATER_KEYS = ("state_basis", "evidence", "floor_at_error", "recipe")


def summarize_rows(rows: list[dict]) -> list[dict]:
    """Per (family, q, s, architecture) over seeds: how many decode, and their bits and ratios
    (``ratio_ci``: the 95% Student-t interval of the mean ratio over decoded seeds, None
    below three)."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["family"], r["q"], r["s"], r["architecture"]), []).append(r)
    out = []
    for (fam, q, s, arch), rs in sorted(groups.items()):
        # a row ``prove`` refuted is wrong on some input: not decoded
        ok = [r for r in rs if r["bits_per_coordinate"] is not None
              and r.get("evidence") != "refuted"]  # fmt: skip
        ks = [r["bits_per_coordinate"] for r in ok]
        ratios = [r["ratio"] for r in ok]
        out.append(
            {
                "family": fam,
                "q": q,
                "s": s,
                "architecture": arch,
                "seeds": len(rs),
                "decoded_seeds": len(ok),
                "float_accuracy_mean": _mean([r["float_accuracy"] for r in rs]),
                "bits_per_coordinate_min": min(ks) if ks else None,
                "transcript_bits_min": min((r["transcript_bits"] for r in ok), default=None),
                "ratio_min": min(ratios) if ratios else None,
                "ratio_mean": _mean(ratios),
                "ratio_ci": list(mean_interval(ratios, 0.0, math.inf) or []) or None,
                "used_ratio_mean": _mean([r["used_ratio"] for r in ok]),
                "bound_bits": rs[0]["bound_bits"],
            }
        )
    return out


def _mean(values):
    values = [v for v in values if v is not None]
    return float(np.mean(values)) if values else None


def capacity_dir(
    folder,
    samples: int = 20_000,
    references: bool = True,
    progress=None,
    client=None,
    json_path=None,
    rounding: str = "every",
    prove: float | None = None,
) -> dict:
    """Measure every ``*.npz`` weights file in ``folder`` (sorted by name).

    Returns ``{"rows", "summary", "frontier", "references", "unreadable"}``
    (``frontier``: :func:`frontier_rows`, the smallest decoding state per
    kind of architecture): a file that
    cannot be measured (malformed, another family's, a guard failure) is listed
    in ``unreadable`` with its reason and the others are measured.  With
    ``client`` each file is a Dask task (:func:`sketchsim.units.run_units`; the
    workers read the files, so ``folder`` must be one they share); the rows are
    the same.  ``json_path`` receives the result file (the one ``sketchsim
    capacity --json`` writes).  ``rounding``: see :func:`measure_weights`; ``cut`` applies
    to causal files only: refused for a folder with none, and recorded as
    ``rounding_applies_to`` ``"causal files"`` (with their count) in a mixed one.
    ``prove``: seconds per file to prove or refute each sampled row at its K
    (:func:`measure_weights`' ``prove_budget``).

    Raises
    ------
    SketchsimError
        ``folder`` is not a folder or holds no weights file; ``rounding`` cut and no
        causal file.
    """
    from sketchsim.units import run_units

    folder = Path(folder)
    if not folder.is_dir():
        raise SketchsimError(f"{folder} is not a folder", param="folder")
    files = sorted(folder.glob("*.npz"))
    if not files:
        raise SketchsimError(f"{folder} holds no weights files (*.npz)", param="folder")
    from sketchsim.sketch.causal import ROUNDINGS

    if rounding not in ROUNDINGS:
        raise SketchsimError(f"rounding must be every or cut, got {rounding!r}", param="rounding")
    applies = {}
    if rounding == "cut":  # a kernel model's tokens send rounded symbols: it has no cut
        from sketchsim.sketch.weights_file import load_weights

        def causal(path) -> bool:
            try:
                return load_weights(path).causal
            except SketchsimError:  # unreadable: listed as such by its unit
                return False

        n_causal = sum(causal(path) for path in files)
        if not n_causal:
            raise SketchsimError(
                f"rounding cut rounds a causal model's state at the cut, and none of the "
                f"{len(files)} weights files in {folder} holds a causal model (kernel models "
                "send rounded symbols either way)",
                param="rounding",
            )
        if n_causal < len(files):
            applies = {"rounding_applies_to": "causal files", "causal_files": n_causal}
    if prove is not None and not (np.isfinite(prove) and prove > 0):
        raise SketchsimError(f"prove must be > 0 seconds, got {prove}", param="prove")
    units = run_units([(path, samples, rounding, prove) for path in files], measure_file,
                      client=client, progress=progress)  # fmt: skip
    rows = [u["row"] for u in units if "row" in u]
    unreadable = [u["unreadable"] for u in units if "unreadable" in u]
    refs = []
    if references:  # measured on each row's own family: its options and seed included
        seen = {}
        for r in rows:
            key = (r["family"], r["q"], r["s"])
            if key not in seen and r.get("family_name", r["family"]) in REFERENCES:
                name, seed = r.get("family_name", r["family"]), r.get("family_seed", 0)
                seen[key] = make_family(name, r["q"], r["s"], seed, r.get("family_options"))
        for key in sorted(seen):
            refs += reference_points(seen[key], samples)
    params = {"folder": str(folder), "samples": samples, "rounding": rounding, **applies}
    if prove is not None:
        params["prove"] = prove
    return capacity_result(rows, refs, unreadable, json_path, params)


def capacity_result(rows: list[dict], references=(), unreadable=(), json_path=None,
                    params: dict | None = None) -> dict:  # fmt: skip
    """The result of measured ``rows`` (:func:`capacity_dir`'s keys, its summaries derived),
    written to ``json_path`` with ``params`` as ``sketchsim capacity --json`` writes it."""
    result = {
        "rows": rows,
        "summary": summarize_rows(rows),
        "frontier": frontier_rows(rows),
        "references": list(references),
        "unreadable": list(unreadable),
    }
    if json_path:
        from sketchsim.results import result_payload, write_json_atomic

        write_json_atomic(json_path, result_payload("capacity", params or {}, result))
    return result


def measure_file(path, samples: int, rounding: str = "every", prove: float | None = None) -> dict:
    """One unit of :func:`capacity_dir`: ``{"row": ...}``, or ``{"unreadable": {"weights",
    "reason"}}`` for a file that cannot be measured (the others still are)."""
    try:
        return {"row": measure_weights(path, samples, rounding=rounding, prove_budget=prove)}
    except SketchsimError as exc:
        from sketchsim.errors import printable

        return {"unreadable": {"weights": printable(Path(path).name), "reason": str(exc)}}


def plot_capacity(result: dict, path) -> Path:
    """Accuracy against transcript bits (log x), one curve per architecture (mean over seeds),
    one panel per family size, the bound ``q log2(s+1)`` as a vertical line and the
    hand-written protocols as points."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise SketchsimError("plots need matplotlib: pip install 'sketchsim[plot]'") from None
    sizes = sorted({(r["family"], r["q"], r["s"]) for r in result["rows"]})
    cols = min(3, len(sizes))
    nrows = math.ceil(len(sizes) / cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(4.6 * cols, 3.6 * nrows), squeeze=False)
    for ax, (fam, q, s) in zip(axes.flat, sizes, strict=False):
        rows = [r for r in result["rows"] if (r["family"], r["q"], r["s"]) == (fam, q, s)]
        by_arch: dict[str, list] = {}
        for r in rows:
            by_arch.setdefault(r["architecture"], []).append(r["curve"])
        for arch, curves in sorted(by_arch.items()):
            x = [p["transcript_bits"] for p in curves[0]]
            y = np.mean([[p["accuracy"] for p in c] for c in curves], axis=0)
            ax.plot(x, y, marker=".", ms=3, label=f"{arch} ({len(curves)} seeds)")
        bound = rows[0]["bound_bits"]
        ax.axvline(bound, color="red", ls=":", label=f"bound {bound:.0f} bits")
        for ref in result.get("references", []):
            if (ref["family"], ref["q"], ref["s"]) == (fam, q, s):
                ax.plot(ref["transcript_bits"], ref["correct_fraction"], "k*", ms=8)
                ax.annotate(
                    f"{ref['protocol']} {ref['ratio']:.2f}x",
                    (ref["transcript_bits"], ref["correct_fraction"]),
                    fontsize=6,
                    xytext=(3, -10),
                    textcoords="offset points",
                )
        ax.set_xscale("log", base=2)
        ax.set_title(f"{fam} q={q} s={s}", fontsize=9)
        ax.set_xlabel("transcript bits (L H E K)")
        ax.set_ylabel("exact-sequence accuracy")
        ax.legend(fontsize=5)
    for ax in list(axes.flat)[len(sizes) :]:
        ax.axis("off")
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
