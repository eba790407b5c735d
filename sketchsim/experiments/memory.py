"""Memory a capacity-suite run will need, estimated before anything is allocated (#47).

``sweep --suite capacity`` accepts sizes (``--q`` up to 4,096, ``--ranks`` and
``--value-widths`` up to 4,096, ...) whose training tensors need terabytes: the
state of one kernel layer has ``E = r (d + 1)`` entries per head, and training
keeps it for every token of every training input.  :func:`capacity_memory`
estimates a run's peak bytes from its spec alone (no tensor is built) and
:func:`check_capacity_memory` refuses a plan in one line, before any training,
when its largest run would not fit in the memory available
(:func:`available_memory`); ``allow_large`` (``--allow-large``) overrides.

The estimate (float32 training, 4 bytes a number; ``B`` training inputs,
``N`` tokens per input, token width ``m``, ``L`` layers, ``H`` heads, feature
rank ``r``, value width ``d``, ``E`` state entries per head)::

    per layer, per token   a = 2 m + 6 H (r + d) + 2 H E      (kernel layer)
                           a = 2 m + 6 H d + 2 H N            (softmax layer)
    parameter count        P = L (2 (m+1) H (r + d) + H m d) + m + 1       (kernel)
                           P = L (4 (m+1) H d + H d m) + m + 1             (softmax)
    parameters             4 P x 4      (weights, gradients, Adam's two moments)
    inputs                 B N m x 4 + B N (m + 64 w)
                                        (the float inputs, kept during the run, and the
                                         bits they are unpacked from)
    training               B N (3 m + (L + 1) a) x 4 + 2 L B H E x 4
                                        (activations autograd keeps for every layer,
                                         one more layer's worth of gradients, the states)
                           + 3 L B N H E x 4 with ``train_bits`` (the quantizer's
                                         temporaries, outside autograd)
    evaluation             C N (3 m + a) x 4 + C N (m + 64 w)
                                        (chunks of C <= 4,096 inputs, no autograd)
    calibration            K N (2 m + L H E + H E + a) x 8 + K N (m + 64 w) + P x 8
                                        (with save_weights, kernel models: the K
                                         calibration inputs, the training inputs plus
                                         16,384 draws, at once in float64, every
                                         layer's contributions kept)

``w`` is 64-bit words per packed token.  The peak is the parameters and the
training inputs plus the largest of the three phases.  The kernel terms count
every tensor :class:`~sketchsim.experiments.capacity_models.KernelLayer`
builds (its largest, ``phi(k) v`` and the contributions, are ``H E`` each), so
the estimate is conservative by a small factor (F(64, 7) with ``r = d = 4096``:
torch's first training allocation is 2.2 TB; the estimate is 32.6 TiB, most of
it evaluation's 4,096 inputs at once, whose contributions alone are 17.9 TB);
a user layer (``model_plugin``) is estimated as a kernel layer of its spec's
size.  On CUDA the training phase is compared with the GPU's free memory, and
evaluation and calibration (on the CPU) with the machine's.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from sketchsim.errors import SketchsimError
from sketchsim.estimates import byte_size

__all__ = [
    "EVAL_CHUNK",
    "CapacityMemory",
    "capacity_memory",
    "available_memory",
    "check_capacity_memory",
]

#: Inputs evaluated at once (``capacity_suite._accuracy``'s chunk).
EVAL_CHUNK = 4096
_F32, _F64 = 4, 8


@dataclass(frozen=True)
class CapacityMemory:
    """Estimated bytes of one capacity run, by phase (see the module's formula)."""

    parameters: int
    inputs: int
    train: int
    evaluate: int
    calibrate: int

    @property
    def device_peak(self) -> int:
        """Bytes on the training device: parameters, inputs and training activations."""
        return self.parameters + self.inputs + self.train

    @property
    def peak(self) -> int:
        """Bytes when everything runs on the CPU."""
        return self.parameters + self.inputs + max(self.train, self.evaluate, self.calibrate)

    @property
    def host_peak(self) -> int:
        """Bytes on the CPU when training runs on a GPU (evaluation and calibration stay)."""
        return self.parameters + max(self.inputs, self.evaluate, self.calibrate)


def _layer_numbers(model: str, m: int, n: int, heads: int, r: int, d: int, fmap: str):
    """``(activations per token, parameters, state entries per head)`` of one layer."""
    from sketchsim.sketch.weights_file import head_entries

    if model == "softmax":
        return 2 * m + 6 * heads * d + 2 * heads * n, 4 * (m + 1) * heads * d + heads * d * m, 0
    e = head_entries(r, d, "signed" if model == "signed" else fmap)
    act = 2 * m + 6 * heads * (r + d) + 2 * heads * e
    return act, 2 * (m + 1) * heads * (r + d) + heads * m * d, e


def capacity_memory(spec, save_weights: bool = False) -> CapacityMemory:
    """The estimated bytes of training (and evaluating, calibrating) one
    :class:`~sketchsim.experiments.capacity_suite.CapacitySpec`; nothing is allocated.

    ``save_weights``: the run writes a weights file (its calibration pass counts).
    """
    from sketchsim.experiments.capacity_suite import (
        CALIBRATION_EXTRA,
        EVAL_EXHAUSTIVE,
        EVAL_INPUTS,
    )
    from sketchsim.sketch.family_plugins import make_family

    fam = make_family(spec.family, spec.q, spec.s)
    m, n, words, size = fam.m, fam.n_tokens, fam.words, fam.size
    L, H = spec.layers, spec.heads
    if spec.model == "causal":  # every token's state is kept for the backward pass
        from sketchsim.sketch.causal import causal_entries

        e = causal_entries(spec.causal_arch(m))
        act, per_layer, _ = _layer_numbers("kernel", m, n, H, spec.rank, spec.value_width, "elu1")
        act += 4 * H * e
    else:
        act, per_layer, e = _layer_numbers(
            spec.model, m, n, H, spec.rank, spec.value_width, spec.feature_map
        )
    params = L * per_layer + m + 1
    b = min(spec.train_inputs, size)
    unpack = n * (m + 64 * words)  # uint8 bits of one input before the float copy
    inputs = b * n * m * _F32 + b * unpack
    train = b * n * (3 * m + (L + 1) * act) * _F32 + 2 * L * b * H * e * _F32
    if getattr(spec, "train_bits", 0):  # the quantized state: three more [B, N, H, E] per layer
        train += 3 * L * b * n * H * e * _F32
    chunk = min(EVAL_CHUNK, size if size <= EVAL_EXHAUSTIVE else EVAL_INPUTS)
    evaluate = chunk * n * (3 * m + act) * _F32 + chunk * unpack
    calibrate = 0
    if save_weights and spec.model == "causal":  # in chunks of 2,048 inputs, token by token
        k = min(2048, b + CALIBRATION_EXTRA if size > spec.train_inputs else b)
        calibrate = k * (n * m + 2 * act + 2 * L * H * e) * _F64 + k * unpack + params * _F64
    elif save_weights and spec.model != "softmax":
        k = b + CALIBRATION_EXTRA if size > spec.train_inputs else b
        calibrate = k * n * (2 * m + L * H * e + H * e + act) * _F64 + k * unpack
        calibrate += params * _F64
    return CapacityMemory(params * 4 * _F32, inputs, train, evaluate, calibrate)


def _meminfo_available() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _cgroup_room() -> int | None:
    """What this process's cgroup (v2) still allows, when it sets a limit."""
    try:
        with open("/sys/fs/cgroup/memory.max") as f:
            limit = f.read().strip()
        if limit == "max":
            return None
        with open("/sys/fs/cgroup/memory.current") as f:
            current = int(f.read().strip())
        return max(int(limit) - current, 0)
    except (OSError, ValueError):
        return None


def available_memory() -> int:
    """Bytes this process may still allocate on this machine.

    ``MemAvailable`` of ``/proc/meminfo`` (else the physical memory,
    ``SC_PHYS_PAGES x SC_PAGE_SIZE``), and no more than the cgroup's remaining
    limit where one is set.
    """
    found = _meminfo_available()
    if found is None:
        try:
            found = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            found = 0
    room = _cgroup_room()
    if room is not None and (found <= 0 or room < found):
        found = room
    return int(found)


def _gpu_free(device) -> int | None:
    import torch

    try:
        return int(torch.cuda.mem_get_info(device)[0])
    except Exception:  # no CUDA runtime, or a device torch cannot query
        return None


def check_capacity_memory(specs, device="cpu", save_weights: bool = False, available=None,
                          batch: bool = False):  # fmt: skip
    """Refuse, in one line, a plan whose largest run needs more memory than there is.

    Parameters
    ----------
    specs : iterable of CapacitySpec
        The plan's runs (each distinct size is estimated once).
    device : str or torch.device
        Where training runs (``cuda``: the training phase is compared with the
        GPU's free memory, the rest with the machine's).
    save_weights : bool
        The runs write weights files (their calibration pass counts).
    available : int, optional
        Bytes available on the CPU (default: :func:`available_memory`).
    batch : bool
        The plan's ``batch``: runs trained as one batched model hold their inputs,
        parameters and training activations at once (``M`` times one run's).

    Returns
    -------
    int
        The largest estimate (bytes; the device's on CUDA), for the record.

    Raises
    ------
    SketchsimError
        When the largest run's estimate exceeds the memory available; the message
        names the estimate, the memory and the override (``--allow-large``).
    """
    from dataclasses import replace

    cuda = str(device).startswith("cuda")
    host = available_memory() if available is None else int(available)
    gpu = _gpu_free(device) if cuda else None
    from sketchsim.experiments.capacity_suite import batch_key, batchable

    specs = list(specs)
    batches: dict = {}  # per batch key, how many runs train as one model
    for spec in specs:
        if batch and batchable(spec):
            batches[batch_key(spec)] = batches.get(batch_key(spec), 0) + 1
    seen: dict = {}
    together: dict = {}  # per size, the largest batch of it
    for spec in specs:
        key = replace(spec, seed=0, lr=0.0, steps=0, stop_below=0.0)
        if key not in seen:
            seen[key] = (spec, capacity_memory(spec, save_weights))
        together[key] = max(together.get(key, 1), batches.get(batch_key(spec), 1))
    largest = 0
    for key, (spec, need) in seen.items():
        M = together.get(key, 1)
        if M > 1:
            need = replace(need, parameters=M * need.parameters, inputs=M * need.inputs,
                           train=M * need.train)  # fmt: skip
        checks = [(need.peak, host, "")]
        if cuda:
            checks = [(need.host_peak, host, ""), (need.device_peak, gpu, " GPU")]
        for est, room, where in checks:
            largest = max(largest, est)
            if room is not None and est > room:
                raise SketchsimError(
                    f"the capacity run {spec.label} on {spec.family} q={spec.q} s={spec.s} "
                    f"{f'({M} trained together) ' if M > 1 else ''}needs about "
                    f"{byte_size(est)} of{where} memory (estimated: training "
                    f"inputs x tokens x per-token state and activations, plus parameters), "
                    f"more than the {byte_size(room)} available; choose smaller sizes, or "
                    "pass allow_large to try anyway"
                )
    return largest
