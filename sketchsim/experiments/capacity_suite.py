"""The ``capacity`` suite: kernel-attention models trained on F(q, s) (and MQAR), kept as
weights files the sketch engine runs (``trained`` protocol, ``sketchsim capacity``).

One :class:`CapacitySpec` per run: a family and its size, an architecture
(layers, heads, feature rank ``r``, value width ``d``, feature map ``elu1``,
``relu`` or ``signed``; or the dense ``softmax`` reference) and a seed.
:func:`train_capacity` trains it full-batch (Adam with a one-cycle or constant
schedule, one torch thread) on every input of the family when it has at most
:data:`TRAIN_INPUTS` (the spec's ``train_inputs``), else on that many seeded
draws, until every training output is within ``stop_below`` of its target; the
accuracy reported is the fraction of inputs whose ``q`` answers all round right,
on every input when the family has at most :data:`EVAL_EXHAUSTIVE` of them, else
on :data:`EVAL_INPUTS` fresh draws.  :func:`run_capacity` runs a plan's specs
(resumable), summarizes seeds with 95% intervals (:mod:`sketchsim.experiments.stats`) and, with
``weights_dir``, writes every kernel model as a weights file
(:mod:`sketchsim.sketch.trained`) calibrated on its training inputs plus
:data:`CALIBRATION_EXTRA` more draws from the same distribution.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import torch

from sketchsim.errors import PluginError, SketchsimError
from sketchsim.experiments.capacity_models import (
    CapacityModel,
    SoftmaxModel,
    calibrate,
    export_arrays,
    qat_quantizer,
)
from sketchsim.experiments.recipe import recipe
from sketchsim.experiments.stats import mean_interval
from sketchsim.minip.bits import unpack_bits
from sketchsim.sketch.family_plugins import make_family

__all__ = [
    "TRAIN_INPUTS",
    "EVAL_INPUTS",
    "EVAL_EXHAUSTIVE",
    "CALIBRATION_EXTRA",
    "CapacitySpec",
    "family_answers",
    "input_tensor",
    "build_model",
    "batch_key",
    "batchable",
    "train_capacity",
    "run_capacity",
    "summarize_capacity",
]

TRAIN_INPUTS = 512
EVAL_INPUTS = 4096
EVAL_EXHAUSTIVE = 1 << 16
CALIBRATION_EXTRA = 1 << 14


@dataclass(frozen=True)
class CapacitySpec:
    """One training run of the capacity suite (``model``: ``kernel``, ``signed`` or ``softmax``;
    ``model_plugin``: a user layer spec, see :mod:`sketchsim.experiments.model_plugins`)."""

    family: str
    q: int
    s: int
    model: str
    layers: int
    heads: int
    rank: int
    value_width: int
    feature_map: str
    seed: int
    steps: int = 1000
    lr: float = 0.03
    stop_below: float = 0.25
    train_inputs: int = TRAIN_INPUTS
    model_plugin: str = ""
    train_bits: int = 0
    #: ``model == "causal"``: the architecture (:data:`sketchsim.sketch.causal.KINDS`) and,
    #: for ``window``, its window in tokens.
    arch: str = ""
    window: int = 0
    #: ``onecycle`` (warm-up to ``lr`` over 30% of the steps, then annealed) or ``constant``.
    schedule: str = "onecycle"
    #: ``last``: the model after the last step; ``best``: the step's model with the most
    #: training inputs right (ties: the smallest training mse), see :func:`train_capacity`.
    keep: str = "last"
    #: With ``train_bits``: a causal model's state rounded after ``every`` token in the
    #: forward pass, or only at the ``cut`` (as ``sketchsim capacity --rounding``).
    train_rounding: str = "every"
    #: With ``train_bits``: round in the forward pass from the first step (``start``), or
    #: train in float until the stop rule holds and only then at ``K`` bits (``fit``).
    qat_from: str = "start"
    #: An L1 penalty ``weight_l1 * sum |w|`` on every weight matrix (not the biases) added
    #: to the training loss: of the factorizations of a readout, it prefers the sparse ones.
    weight_l1: float = 0.0
    #: A causal one-layer model trained with one ``K``-bit register step of noise on
    #: its state at the cut (:class:`~sketchsim.experiments.causal_models.CutNoise`).
    train_noise: int = 0
    #: A one-layer causal model changed to its readout basis
    #: (:func:`~sketchsim.experiments.state_basis.readout_basis`) at this step (0: never),
    #: or at the end when training stops before it; see :func:`train_capacity`.
    rebase_at: int = 0
    #: With ``rebase_at`` and the constant schedule: the learning rate after it (0: ``lr``).
    rebase_lr: float = 0.0

    @property
    def label(self) -> str:
        """The architecture in words: ``elu1 L1 H2 r2 d8``, ``softmax L1 H1 d16``,
        ``gla L1 H1 r4 d8``, ``window L1 H1 r4 d8 w5``."""
        if self.model == "softmax":
            return f"softmax L{self.layers} H{self.heads} d{self.value_width}"
        if self.model == "causal":
            from sketchsim.sketch.causal import causal_dims, causal_name

            name = self.model_plugin.rsplit(":", 1)[-1] or causal_name(self.causal_arch(1))
            return f"{name} {causal_dims(self.causal_arch(1))}"
        name = self.model_plugin.rsplit(":", 1)[-1] or self.feature_map
        return f"{name} L{self.layers} H{self.heads} r{self.rank} d{self.value_width}"

    def causal_arch(self, m: int) -> dict:
        """The header ``architecture`` of a causal run on width-``m`` tokens."""
        from sketchsim.experiments.causal_models import causal_arch

        return causal_arch(self.arch, m, self.layers, self.heads, self.rank, self.value_width,
                           self.feature_map, window=self.window)  # fmt: skip

    def key(self) -> str:
        fields = asdict(self)
        for name in ("train_bits", "arch", "window"):  # older runs keep their key
            if not fields[name]:
                del fields[name]
        if fields["schedule"] == "onecycle":
            del fields["schedule"]
        if fields["keep"] == "last":
            del fields["keep"]
        if fields["train_rounding"] == "every":
            del fields["train_rounding"]
        if fields["qat_from"] == "start":
            del fields["qat_from"]
        if not fields["weight_l1"]:
            del fields["weight_l1"]
        for name in ("train_noise", "rebase_at", "rebase_lr"):
            if not fields[name]:
                del fields[name]
        return json.dumps(fields, sort_keys=True)


def batch_key(spec: CapacitySpec) -> CapacitySpec:
    """What runs trained as one batched model share: the spec without seed and rate."""
    return replace(spec, seed=0, lr=0.0)


def batchable(spec: CapacitySpec) -> bool:
    """Whether a run may train in a batch: a causal model in float, no model plug-in."""
    from sketchsim.experiments.plan import trains_batched

    return trains_batched(spec.model, spec.train_bits, spec.model_plugin, spec.weight_l1,
                          spec.train_noise, spec.rebase_at, spec.rebase_lr)  # fmt: skip


def family_answers(family, n: int, seed: int, stream: int) -> np.ndarray:
    """Every answer vector of ``family`` when it has at most ``n``, else ``n`` seeded ones
    (``stream`` separates the training set from the evaluation sample)."""
    if family.size <= n:
        return family.all_answers()
    rng = np.random.default_rng([seed, stream])
    return rng.integers(0, family.s + 1, size=(n, family.q)).astype(family.answer_dtype)


def input_tensor(family, T: np.ndarray, dtype=torch.float32) -> torch.Tensor:
    """The 0/1 tokens ``(B, n, m)`` of the answer vectors ``T`` as a tensor."""
    return torch.tensor(unpack_bits(family.tokens(T), family.m), dtype=dtype)


def build_model(spec: CapacitySpec, m: int, q: int = 0):
    """The seeded, untrained model of ``spec`` on width-``m`` tokens (``q`` queries)."""
    torch.manual_seed(spec.seed)
    if spec.model == "softmax":
        return SoftmaxModel(m, spec.layers, spec.heads, spec.value_width)
    if spec.model == "causal":
        from sketchsim.experiments.causal_models import CausalModel

        layer_type = None
        if spec.model_plugin:
            from sketchsim.experiments.model_plugins import resolve_model

            layer_type = resolve_model(spec.model_plugin)
        return CausalModel(spec.causal_arch(m), q, layer_type=layer_type)
    layer_type = None
    if spec.model_plugin:
        from sketchsim.experiments.model_plugins import resolve_model

        layer_type = resolve_model(spec.model_plugin)
    fmap = "signed" if spec.model == "signed" else spec.feature_map
    return CapacityModel(
        m, spec.layers, spec.heads, spec.rank, spec.value_width, fmap, layer_type=layer_type
    )


def _accuracy(model, fam, T: np.ndarray, chunk: int = 4096) -> float:
    """Fraction of the inputs ``T`` whose ``q`` outputs all round to their answers."""
    right = 0
    with torch.no_grad():
        for lo in range(0, T.shape[0], chunk):
            part = T[lo : lo + chunk]
            y = model(input_tensor(fam, part))[:, : fam.q]
            err = (y - torch.as_tensor(part.astype(np.float32))).abs()
            right += int((err < 0.5).all(1).sum())
    return right / T.shape[0]


def scheduler(opt, spec: CapacitySpec):
    """The learning-rate schedule of ``spec`` on the optimizer ``opt`` (``onecycle``:
    torch's one-cycle over ``steps + 1``; ``constant``: ``lr`` at every step)."""
    if spec.schedule == "constant":
        return torch.optim.lr_scheduler.LambdaLR(opt, lambda _: 1.0)
    return torch.optim.lr_scheduler.OneCycleLR(opt, spec.lr, total_steps=spec.steps + 1)


def train_capacity(spec: CapacitySpec, device: str = "cpu", save_to=None) -> dict:
    """Train one spec; returns its row (and writes its weights file into ``save_to``).

    With ``spec.keep == "best"`` the model kept is the one, among the models each step
    evaluates (before its update), with the most training inputs whose outputs all
    round right, ties broken by the smaller training mse: a constant learning rate can
    lose a fit it had reached (docs/capacity.md, "DeltaNet at s = 7").  With
    ``spec.qat_from == "fit"`` the run trains in float until the stop rule holds, then
    goes on at ``spec.train_bits`` (same optimizer) until it holds there; the kept model
    is then one of those evaluated at ``K`` bits.  With ``spec.rebase_at = P`` the model
    kept so far is changed to its readout basis at step ``P`` (the same outputs, one query
    per register), the optimizer's moments restart and training goes on (at
    ``spec.rebase_lr`` where given, constant schedule); the model kept
    is then one of those after ``P``.  A run that stops before ``P`` is changed at the end.

    Returns
    -------
    dict
        ``spec``, ``architecture`` (label), ``accuracy`` and ``eval_inputs`` /
        ``eval_mode`` (all inputs, or a seeded sample), ``train_accuracy``,
        ``max_abs_error`` (training set), ``steps``, ``kept_step`` (the step whose
        model is kept), ``seconds``, ``weights`` (path or None).
    """
    fam = make_family(spec.family, spec.q, spec.s)
    T = family_answers(fam, spec.train_inputs, spec.seed, 11)
    X = input_tensor(fam, T).to(device)
    t = torch.as_tensor(T.astype(np.float32), device=device)
    model = build_model(spec, fam.m, fam.q).to(device)
    if spec.train_bits and spec.model == "causal":
        from sketchsim.experiments.causal_models import causal_qat_quantizer

        at_k = causal_qat_quantizer(model, spec.train_bits, spec.train_rounding == "cut")
    else:
        at_k = qat_quantizer(spec.train_bits) if spec.train_bits else None
    late = at_k is not None and spec.qat_from == "fit"
    quantize, qat_step = (None, None) if late else (at_k, 0 if at_k is not None else None)
    if spec.train_noise:
        from sketchsim.experiments.causal_models import CutNoise

        if spec.model != "causal" or spec.layers != 1 or spec.train_bits:
            raise SketchsimError("train_noise trains one-layer causal models in float")

        model.cut_noise = CutNoise(spec.train_noise)
    opt = torch.optim.Adam(model.parameters(), spec.lr)
    sched = scheduler(opt, spec)
    start, step, err, rebased = time.perf_counter(), 0, math.inf, None
    best = None  # (inputs right, -mse, step, max error, weights) of the model kept
    for step in range(spec.steps + 1):  # noqa: B007 - step is reported
        if spec.rebase_at and step == spec.rebase_at:
            _rebase(model, X, spec.q, best, opt)
            best, rebased = None, step  # the models kept from now on: those after the change
            if spec.rebase_lr:  # the constant schedule's rate from now on
                sched.base_lrs = [spec.rebase_lr for _ in sched.base_lrs]
                for group in opt.param_groups:
                    group["lr"] = spec.rebase_lr
        for _ in range(2):  # a second pass only where the float model fits: now at K bits
            y = (model(X) if quantize is None else model(X, quantize=quantize))[:, : spec.q]
            miss = (y.detach() - t).abs()
            err = float(miss.max())
            if not (late and quantize is None and err < spec.stop_below):
                break
            quantize, qat_step, best = at_k, step, None
        if spec.keep == "best" and math.isfinite(err):
            score = (int((miss < 0.5).all(1).sum()), -float((miss**2).mean()))
            if best is None or score > best[:2]:
                weights = {k: v.detach().clone() for k, v in model.state_dict().items()}
                best = (*score, step, err, weights)
        if err < spec.stop_below or step == spec.steps or not math.isfinite(err):
            break
        loss = ((y - t) ** 2).mean()
        if spec.weight_l1:
            loss = loss + spec.weight_l1 * sum(
                p.abs().sum() for p in model.parameters() if p.dim() > 1
            )
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
    seconds = time.perf_counter() - start
    model.cut_noise = None  # training only: the model is measured without it
    kept_step = step
    if best is not None and best[2] != step:
        model.load_state_dict(best[4])
        kept_step, err = best[2], best[3]
    # stopped before the step: the model kept (a diverged one has no readout basis)
    if spec.rebase_at and rebased is None and math.isfinite(err):
        _rebase(model, X, spec.q, None, opt)
        rebased = kept_step
    # a float phase that never fit leaves a model never trained at K bits
    bits = spec.train_bits if qat_step is not None else 0
    row = finish_run(spec, fam, model, T, err, step, kept_step, seconds, device, save_to, bits)
    if spec.train_bits:
        row["qat_step"] = qat_step
    if spec.rebase_at:
        row["rebased_step"] = rebased
    return row


def _rebase(model, X: torch.Tensor, q: int, best, opt) -> None:
    """The model kept so far (``best``'s, else the current one) in its readout basis; the
    optimizer's moments restart (they belong to the old basis)."""
    from sketchsim.experiments.state_basis import readout_basis

    if best is not None:
        model.load_state_dict(best[4])
    readout_basis(model, X[0, :q])
    opt.state.clear()


def finish_run(spec: CapacitySpec, fam, model, T: np.ndarray, err: float, step: int,
               kept_step: int, seconds: float, device, save_to,
               trained_bits: int | None = None, batched: bool = False) -> dict:  # fmt: skip
    """The row of a trained model (the model kept, trained on ``T``): its accuracy on the
    training set and on the evaluation inputs, and its weights file in ``save_to``
    (``trained_bits``: the register width it was trained at, default the spec's;
    ``batched``: trained in a batch, whose file is another run's than a single one's)."""
    bits = spec.train_bits if trained_bits is None else trained_bits
    model = model.cpu()
    train_acc = _accuracy(model, fam, T)
    exhaustive = fam.size <= EVAL_EXHAUSTIVE
    Te = fam.all_answers() if exhaustive else family_answers(fam, EVAL_INPUTS, spec.seed, 12)
    acc = _accuracy(model, fam, Te)
    row = {
        "spec": asdict(spec),
        "architecture": spec.label,
        "family": spec.family,
        "q": spec.q,
        "s": spec.s,
        "seed": spec.seed,
        "accuracy": acc,
        "eval_mode": "exhaustive" if exhaustive else "sampled",
        "eval_inputs": int(Te.shape[0]),
        "train_accuracy": train_acc,
        "max_abs_error": err if math.isfinite(err) else None,
        "steps": step,
        "kept_step": kept_step,
        "seconds": seconds,
        "device": str(device),
        "trained_at_bits": bits or None,
        "trained_rounding": spec.train_rounding if bits else None,
        "schedule": spec.schedule,
        "keep": spec.keep,
        "weight_l1": spec.weight_l1,
        "train_noise": spec.train_noise or None,
        "train_inputs": int(T.shape[0]),
        # what training fixed by hand: the layout and training choices (#63)
        "recipe": spec_recipe(spec, bits),
        "weights": None,
        "weights_sha256": None,
        "weights_refused": None,
    }
    if save_to is not None and _exportable(model):
        # the file's name within the --save-weights folder: no machine paths in results
        saved, why = _save(spec, fam, model, T, Te, acc, save_to, bits, batched)
        row["weights"] = saved and saved.name
        row["weights_sha256"] = saved and hashlib.sha256(saved.read_bytes()).hexdigest()
        row["weights_refused"] = why
    return row


def plugin_identity(spec: CapacitySpec) -> str | None:
    """What a run's model plug-in is (its file's sha256, or its module's), for resume keys;
    None without a plug-in."""
    if not spec.model_plugin:
        return None
    from sketchsim.sketch.plugins import file_identity, module_identity

    head, colon, _ = spec.model_plugin.partition(":")
    if not colon:  # an installed entry point
        return f"entry point {head}"
    try:
        if head.endswith(".py"):
            return file_identity(Path(head))
        import importlib

        return module_identity(importlib.import_module(head))
    except (OSError, ImportError):
        return f"unreadable {spec.model_plugin}"


def _exportable(model) -> bool:
    """Whether the engine can run ``model``: kernel layers that export their heads."""
    from sketchsim.experiments.causal_models import CausalModel
    from sketchsim.sketch.weights_file import FEATURE_MAPS

    if isinstance(model, CausalModel):
        return True
    return isinstance(model, CapacityModel) and all(
        callable(getattr(layer, "head_arrays", None))
        and getattr(layer, "feature_map", None) in FEATURE_MAPS
        for layer in model.layers
    )


def spec_recipe(spec: CapacitySpec, bits: int) -> list[str]:
    """What run ``spec`` fixed by hand (:func:`~sketchsim.experiments.recipe.recipe`);
    ``bits``: the register width it was trained at (0 when its float phase never fit)."""
    fields = asdict(spec)
    basis = "readout" if spec.rebase_at else "trained"
    return recipe(fields, spec.q, {**fields, "train_bits": bits}, basis)


def run_id(spec: CapacitySpec, batched: bool = False) -> str:
    """What names a run's weights file beside its readable fields: a digest of every setting
    that changes the model (:meth:`CapacitySpec.key`: steps, schedule, keep, noise,
    ``weight_l1``, ...; the model plug-in's content; batched or single training), so that
    two runs that differ in any of them never write one file."""
    ident = [spec.key(), plugin_identity(spec), *(["batched"] if batched else [])]
    return hashlib.sha256(json.dumps(ident).encode()).hexdigest()[:10]


def weights_name(spec: CapacitySpec, batched: bool = False) -> str:
    """The file name (in the ``--save-weights`` folder) of the run ``spec``'s weights."""
    name = spec.label.replace(" ", "-")
    # every field a plan varies is readable in the name, and the rest in its run id
    at = f"-K{spec.train_bits}" if spec.train_bits else ""
    at += "-fit" if spec.train_bits and spec.qat_from == "fit" else ""
    # a family spec's ':', '=' and ',' (mqar:pairs=8,keys=16) would not survive a protocol
    # spec (trained:weights=FILE,bits=K): the name keeps letters, digits, '.', '_' and '-'
    family = re.sub(r"[^A-Za-z0-9._-]+", "_", spec.family)
    base = f"{family}-q{spec.q}-s{spec.s}-{name}-lr{spec.lr:g}{at}-seed{spec.seed}"
    return f"{base}-{run_id(spec, batched)}.npz"


def _save(spec: CapacitySpec, fam, model, T, Te, accuracy: float, folder, bits: int,
          batched: bool = False):  # fmt: skip
    """``(path, None)`` of the weights file written, or ``(None, why)`` when it is refused.

    A file is written only when the model's outputs on the evaluated inputs ``Te``
    are finite and the file runs the trained torch model (:func:`engine_disagreement`,
    against the trained model evaluated in float64, so that float32 rounding of an
    ill-conditioned model is not taken for another model): a file never describes
    another model than the one trained.
    """
    from sketchsim.machine import versions
    from sketchsim.sketch.weights_file import FORMAT, FORMAT_VERSION, Weights, save_weights_file

    y = _outputs(model, fam, Te)
    bad = int((~np.isfinite(y)).any(1).sum())
    if bad:
        return None, f"the model's outputs are not finite on {bad:,} of {len(Te):,} inputs"
    if bits:  # the registers it was trained against: its training inputs, quantized
        calib, quantize = T, qat_quantizer(bits)
    else:
        extra = family_answers(fam, CALIBRATION_EXTRA, spec.seed, 13)
        calib = np.concatenate([T, extra]) if fam.size > spec.train_inputs else T
        quantize = None
    # leaves the model in float64
    if spec.model == "causal":  # a QAT model's registers: the exact states' range on T too
        from sketchsim.experiments.causal_models import export_causal, state_range

        chunks = (input_tensor(fam, calib[i : i + 2048], torch.float64)
                  for i in range(0, len(calib), 2048))  # fmt: skip
        cal = state_range(model, chunks)
    else:
        cal = calibrate(model, input_tensor(fam, calib, torch.float64), quantize)
    y = _outputs(model, fam, Te, torch.float64)
    model.float()
    header = {
        "architecture": dict(model.arch),
        "label": spec.label,
        "family": {
            "name": fam.name,
            "spec": spec.family,
            "q": fam.q,
            "s": fam.s,
            "seed": fam.seed,
            "options": fam.options(),
        },
        "seed": spec.seed,
        "spec": asdict(spec),
        "run_id": run_id(spec, batched),
        "recipe": spec_recipe(spec, bits),
        "accuracy": accuracy,
        "trained_at_bits": bits or None,
        **({"state_basis": "readout"} if spec.rebase_at else {}),
        "calibration_inputs": int(calib.shape[0]),
        "versions": versions(),
    }
    arrays = export_causal(model, cal) if spec.model == "causal" else export_arrays(model, cal)
    if not all(np.isfinite(np.asarray(a, dtype=np.float64)).all() for a in arrays.values()):
        return None, "its exported arrays hold non-finite numbers"
    full = {"format": FORMAT, "format_version": FORMAT_VERSION, **header}
    weights = Weights(full, {k: np.asarray(v, dtype=np.float64) for k, v in arrays.items()})
    why = engine_disagreement(weights, fam, Te, y)
    if why:
        return None, why
    path = Path(folder) / weights_name(spec, batched)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        return save_weights_file(path, header, arrays), None
    except PluginError as exc:  # a header the format refuses (a plug-in named like a map)
        return None, str(exc).split(": ", 1)[-1]


def _outputs(model, fam, T: np.ndarray, dtype=torch.float32, chunk: int = 4096) -> np.ndarray:
    """The model's ``q`` float outputs on the inputs ``T`` (float64 array; the tokens in ``dtype``,
    the model's own)."""
    out = []
    with torch.no_grad():
        for lo in range(0, T.shape[0], chunk):
            x = input_tensor(fam, T[lo : lo + chunk], dtype)
            out.append(model(x)[:, : fam.q].double().numpy())
    return np.concatenate(out) if out else np.zeros((0, fam.q))


#: Outputs this close to a rounding tie (``k + 1/2``) may round either way between
#: the trained model (float64) and the engine, whose K = 32 registers round the state.
TIE_WIDTH = 1e-3


#: Largest difference ``|y_file - y| / (1 + |y|)`` between the outputs of the model a file
#: describes and the trained model's (both in float64; the weights went through float32).
OUTPUT_TOLERANCE = 1e-6


def engine_disagreement(weights, fam, T: np.ndarray, y: np.ndarray) -> str | None:
    """Why a weights file does not run the model whose outputs on ``T`` are ``y``, or None.

    Two checks: the model the file describes (its arrays read by the header's
    feature map, :func:`~sketchsim.experiments.capacity_models.model_from_weights`)
    gives ``y`` within :data:`OUTPUT_TOLERANCE`; and the engine's answers at
    K = 32 equal ``round(y)`` (half up, clipped to ``-1..s+1`` as the engine
    does) on every input of ``T``, except outputs within :data:`TIE_WIDTH` of a tie.
    For a causal file ``y`` there is the file's model with its 32-bit registers
    (every update rounded and saturated as the engine does): a state outside the
    calibrated range on an evaluated input is the file's, not a wrong export.
    """
    from sketchsim.experiments.capacity_models import model_from_weights
    from sketchsim.experiments.causal_models import causal_from_weights
    from sketchsim.sketch.trained import trained_engine

    model = causal_from_weights(weights) if weights.causal else model_from_weights(weights)
    with torch.no_grad():
        y_file = np.concatenate(
            [
                model(input_tensor(fam, T[lo : lo + 4096], torch.float64))[:, : fam.q].numpy()
                for lo in range(0, T.shape[0], 4096)
            ]
        )
    gap = np.abs(y_file - y) / (1 + np.abs(y))
    if gap.max(initial=0.0) > OUTPUT_TOLERANCE:
        return (
            f"the file's model ({weights.arch['feature_map']} features on its arrays) gives "
            f"outputs up to {float(np.abs(y_file - y).max()):.3g} away from the trained model's; "
            "the layer computes something its exported arrays do not say"
        )

    ctx = fam.context()
    engine = trained_engine(ctx, weights, 32)
    got = engine.run(fam.variable_tokens(T), fixed=fam.fixed_tokens()).answers
    if weights.causal:  # the file's model with its K = 32 registers: saturation included
        y = _causal_fixed_point(model, weights, fam, T)
    want = np.clip(np.floor(y + 0.5), -1, fam.s + 1)
    near_tie = np.abs(y - np.floor(y) - 0.5) < TIE_WIDTH
    wrong = ((got != want) & ~near_tie).any(1)
    if wrong.any():
        k = int(np.argmax(wrong))
        return (
            f"the engine at K = 32 disagrees with the trained model on {int(wrong.sum()):,} of "
            f"{len(T):,} inputs (input {k}: {got[k].tolist()} against "
            f"{want[k].astype(int).tolist()}); "
            "the layer computes something its exported arrays do not say"
        )
    return None


def _causal_fixed_point(model, weights, fam, T: np.ndarray) -> np.ndarray:
    """A causal file's torch model run with the file's 32-bit registers (float64): what the
    engine computes, so a register that saturates on an input outside the calibration
    inputs is not taken for a wrong export."""
    from sketchsim.experiments.causal_models import fixed_point_state

    a = weights.arch
    cal = [
        tuple(np.stack([weights.arrays[f"L{l}.H{h}.{k}"] for h in range(a["heads"])])
              for k in ("lo", "span"))
        for l in range(a["layers"])
    ]  # fmt: skip
    quantize = fixed_point_state(32, cal)
    with torch.no_grad():
        parts = [input_tensor(fam, T[lo : lo + 4096], torch.float64)
                 for lo in range(0, T.shape[0], 4096)]  # fmt: skip
        return np.concatenate([model(x, quantize=quantize)[:, : fam.q].numpy() for x in parts])


def summarize_capacity(rows: list[dict]) -> list[dict]:
    """Per (family, q, s, architecture): seeds, mean accuracy and its 95% interval."""
    groups: dict[tuple, list[float]] = {}
    for r in rows:
        groups.setdefault((r["family"], r["q"], r["s"], r["architecture"]), []).append(
            r["accuracy"]
        )
    out = []
    for (fam, q, s, arch), vals in groups.items():
        ci = mean_interval(vals)
        out.append(
            {
                "family": fam,
                "q": q,
                "s": s,
                "architecture": arch,
                "seeds": len(vals),
                "mean": float(np.mean(vals)),
                "min": float(np.min(vals)),
                "max": float(np.max(vals)),
                "ci_low": ci and ci[0],
                "ci_high": ci and ci[1],
            }
        )
    return out


def run_capacity(
    specs: list[CapacitySpec],
    path=None,
    header: dict | None = None,
    resume: bool = False,
    device: str = "cpu",
    progress: Callable[[int, int], None] | None = None,
    weights_dir=None,
    client=None,
    batch_trainer: Callable | None = None,
) -> list[dict]:
    """Train every spec, writing ``path`` after each run; resumed runs are reused.

    With ``batch_trainer`` (:func:`~sketchsim.experiments.batched_training.
    train_capacity_batch`) the runs :func:`batchable` that share a :func:`batch_key`
    and are not resumed train as one batched model (one unit, one Dask task on a
    cluster); their rows say ``batched`` and their resume keys differ from single runs'.

    A resumed run keeps its row (and the weights file it wrote then) when its
    spec, its model plug-in's file (:func:`plugin_identity`) and its family
    (:func:`capacity_family_identity`) are unchanged and the file was written by
    this code (:class:`~sketchsim.checkpoint.Checkpoint`).
    With ``client`` every run is a Dask task (one torch thread, as here: the
    same rows); the workers write the weights files into ``weights_dir``, so it
    must be a folder they share with this process.
    """
    from sketchsim.checkpoint import Checkpoint
    from sketchsim.units import run_units

    refuse_json_in_weights(path, weights_dir)
    refuse_plugin_names(specs)
    batch = batch_trainer is not None
    header = header or {}
    store = Checkpoint(
        path,
        "sweep",
        header,
        "runs",
        lambda row, _file: _run_key(
            CapacitySpec(**row["spec"]),
            row.get("plugin_identity"),
            row.get("family_identity"),
            bool(row.get("batched")),
        ),
        _run_problem,
        what="capacity sweep file",
        resume=bool(resume and path),
    )
    # once, here: what each run's key holds besides its spec (a plug-in file's hash, a
    # family's source and tokens)
    identities = [plugin_identity(spec) for spec in specs]
    families = {}
    for spec in specs:
        if (spec.family, spec.q, spec.s) not in families:
            families[spec.family, spec.q, spec.s] = capacity_family_identity(spec)
    fam_ids = [families[spec.family, spec.q, spec.s] for spec in specs]
    rows = [
        _kept(store.get(_run_key(spec, ident, fam, batch and batchable(spec))), weights_dir)
        for spec, ident, fam in zip(specs, identities, fam_ids, strict=True)
    ]
    # units: lists of spec indices, the runs still to train of one batch key, or one run
    groups: dict = {}
    for k, spec in enumerate(specs):
        alone = not (batch and batchable(spec)) or rows[k] is not None
        groups.setdefault(("one", k) if alone else batch_key(spec), []).append(k)
    units = list(groups.values())
    batched = [isinstance(key, CapacitySpec) for key in groups]

    def finished(u: int, result: list[dict]) -> None:
        for k, row in zip(units[u], result, strict=True):
            row["plugin_identity"], row["family_identity"] = identities[k], fam_ids[k]
            rows[k] = row
        store.save([r for r in rows if r is not None], False, suite="capacity", header=header)

    run_units(
        [
            ([specs[k] for k in unit], device, weights_dir, batch_trainer if b else None)
            for unit, b in zip(units, batched, strict=True)
        ],  # fmt: skip
        train_unit,
        resumed=[
            [rows[k] for k in unit] if rows[unit[0]] is not None else None for unit in units
        ],  # fmt: skip
        finished=finished,
        client=client,
        progress=progress,
        task=capacity_task,
    )
    store.save(rows, True, suite="capacity", header=header)
    return rows


def refuse_json_in_weights(json_path, weights_dir) -> None:
    """Refuse a result file that ``sketchsim capacity WEIGHTS_DIR`` would read as a weights
    file (a ``.npz`` in the folder: one the run writes, or one it would then measure).

    Raises
    ------
    SketchsimError
        Before any training.
    """
    if not json_path or weights_dir is None:
        return
    out = Path(json_path).resolve()
    if out.suffix.lower() == ".npz" and out.parent == Path(weights_dir).resolve():
        raise SketchsimError(
            f"--json {out.name} is a .npz inside --save-weights {weights_dir}: it would replace "
            "a weights file the run writes, or be read as one by capacity; choose another path",
            param="json",
        )


def refuse_plugin_names(specs: list[CapacitySpec]) -> None:
    """Refuse, before any run trains, a model plug-in whose NAME its rows could not carry
    (a built-in kind's or feature map's, or not a plain name:
    :func:`~sketchsim.sketch.weights_file.check_plugin_name`)."""
    from sketchsim.experiments.model_plugins import check_spec_name

    for spec in specs:
        if spec.model_plugin:
            check_spec_name(spec.model_plugin)


def _kept(row, weights_dir):
    """A resumed ``row``, or None (run again) when the weights file it names in
    ``weights_dir`` is gone or holds other bytes than the run wrote (its ``weights_sha256``;
    a row from before that field cannot be checked and is run again)."""
    if row is None or weights_dir is None:
        return row
    if not row.get("weights"):  # a run kept without a file now asked for one: train it again
        spec = row.get("spec") or {}
        wanted = spec.get("model") != "softmax" and not row.get("weights_refused")
        return None if wanted else row
    name = str(row["weights"])
    if Path(name).name != name:  # a file name, never a path (the sweep file is input)
        return None
    try:
        path = Path(weights_dir) / name
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None
    return row if digest == row.get("weights_sha256") else None


def train_unit(specs: list[CapacitySpec], device: str, save_to, batch_trainer=None) -> list:
    """One unit of :func:`run_capacity`: runs one at a time, or ``batch_trainer(specs,
    device, save_to)`` training them as one batched model."""
    if batch_trainer is None:
        return [train_capacity(spec, device, save_to) for spec in specs]
    return batch_trainer(specs, device, save_to)


def capacity_task(specs: list[CapacitySpec], device: str, save_to, batch_trainer=None) -> list:
    """:func:`train_unit` as a Dask task: one torch thread, as in this process."""
    torch.set_num_threads(1)
    return train_unit(specs, device, save_to, batch_trainer)


def _run_key(spec: CapacitySpec, plugin: str | None, family: str | None,
             batched: bool = False) -> str:  # fmt: skip
    # a batched run rounds in another order than a single one: they do not resume each other
    return json.dumps([spec.key(), plugin, family, *(["batched"] if batched else [])])


def capacity_family_identity(spec: CapacitySpec) -> str:
    """The family a run trains on, for resume keys: its source (a plug-in file's hash) and
    a digest of its tokens (:func:`sketchsim.sketch.family_plugins.family_identity`)."""
    from sketchsim.sketch.family_plugins import family_identity

    return family_identity(spec.family, make_family(spec.family, spec.q, spec.s))


def _run_problem(row) -> str | None:
    """What is wrong with a run read back from a capacity sweep file, or None."""
    if not isinstance(row, dict) or not isinstance(row.get("spec"), dict):
        return "is not an object with a spec"
    try:
        CapacitySpec(**row["spec"])
    except TypeError as exc:
        return f"has a malformed spec ({exc})"
    for key in ("accuracy", "architecture", "weights"):
        if key not in row:
            return f"has no {key!r}"
    return None
