"""``prove`` and ``check-proof`` as library runs: right on every input, decided (theory.md 5.5)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from sketchsim.errors import SketchsimError

__all__ = ["ProveRun", "run", "check"]

ROUNDINGS = ("every", "cut")


@dataclass
class ProveRun:
    """The verdict on one weights file at ``bits`` bits (JSON: these fields)."""

    weights: str
    weights_sha256: str
    label: str
    family: dict
    bits: int
    rounding: str
    budget: float
    verdict: str
    seconds: float
    boxes: int
    open_boxes: int
    leaves: int
    counterexample: list | None = None
    engine_answers: list | None = None
    reason: str = ""
    bound_bits: float = 0.0
    cut_bits: int = 0
    proof: str | None = None
    evidence: str = field(default="")
    #: What training fixed by hand (the header's training fields, derived again).
    recipe: list = field(default_factory=list)

    def params(self) -> dict:
        return {"weights": self.weights, "bits": self.bits, "rounding": self.rounding,
                "budget": self.budget}  # fmt: skip

    def to_dict(self) -> dict:
        out = dict(self.__dict__)
        out.pop("budget")
        return out


def _load(path, bits: int, rounding: str):
    from sketchsim.sketch.family import HardFamily
    from sketchsim.sketch.weights_file import load_weights, weights_family

    if not 1 <= bits <= 32:
        raise SketchsimError(f"--bits must be in 1..32, got {bits}")
    if rounding not in ROUNDINGS:
        raise SketchsimError(f"--rounding must be every or cut, got {rounding!r}")
    w = load_weights(path)
    if not w.causal:
        raise SketchsimError(
            f"{path}: a kernel (bidirectional) weights file; prove covers causal files only"
        )
    family = weights_family(w)
    if family.name == "mqar":  # a superset family, for sum-state models (prove.mqar)
        from sketchsim.prove.mqar import MQARBoxModel

        MQARBoxModel.check(w, rounding)
    elif not isinstance(family, HardFamily):
        raise SketchsimError(
            f"{path}: trained on {family.name}; prove covers F(q, s) and MQAR only"
        )
    return w, family


def run(path, bits: int, rounding: str = "every", budget: float = 60.0, json_path=None,
        proof_path=None, progress=None) -> ProveRun:  # fmt: skip
    """Prove or refute that a causal weights file answers every input of its family right.

    Parameters
    ----------
    path : path-like
        A causal weights file trained on F(q, s).
    bits : int
        Register bits ``K`` (1..32).
    rounding : str
        ``every`` or ``cut`` (theory.md 5.3).
    budget : float
        Seconds before the verdict is ``unknown``.
    json_path, proof_path : path-like, optional
        The result file; the proof file (written only when ``proved``).
    progress : callable, optional
        ``(queries done, q)``.
    """
    import math

    from sketchsim.prove.proof_file import proof_record
    from sketchsim.prove.search import prove
    from sketchsim.results import result_payload, write_json_atomic
    from sketchsim.runs.capacity import file_recipe

    if not (math.isfinite(budget) and budget > 0):
        raise SketchsimError(f"--budget must be > 0 seconds, got {budget}")
    w, family = _load(path, bits, rounding)
    if proof_path and family.name != "hard":
        raise SketchsimError(
            "--proof: proof files cover F(q, s); an MQAR verdict is reported without one",
            param="proof_path",
        )
    out = prove(w, family, bits, rounding, budget=budget, progress=progress)
    a = w.arch
    result = ProveRun(
        weights=str(path), weights_sha256=w.sha256, label=w.header.get("label", ""),
        family={"name": family.name, "q": family.q, "s": family.s, "seed": family.seed,
                **family.options()},
        bits=bits, rounding=rounding, budget=budget, verdict=out.verdict,
        seconds=round(out.seconds, 3), boxes=out.boxes, open_boxes=out.open_boxes,
        leaves=out.leaves, counterexample=out.counterexample,
        engine_answers=out.engine_answers, reason=out.reason,
        bound_bits=family.bound_bits, cut_bits=a["layers"] * a["heads"] * w.entries() * bits,
        evidence={"proved": "proved", "refuted": "counterexample"}.get(out.verdict, "unknown"),
        recipe=file_recipe(w, family.q),
    )  # fmt: skip
    if proof_path and out.verdict == "proved":
        write_json_atomic(proof_path, proof_record(w, family, bits, rounding, out.trees))
        result.proof = str(proof_path)
    if json_path:
        write_json_atomic(json_path, result_payload("prove", result.params(), result.to_dict()))
    return result


def check(path, weights=None):
    """Re-verify a proof file (:func:`sketchsim.prove.check_proof.check_proof`), then that its
    layout is its family's (the one step that needs NumPy's generator), and with ``weights``
    that the proof is about that file: its sha256 and every array the proof carries.

    Returns the checker's result; raises :class:`ProofInvalid` or :class:`SketchsimError`
    (not a proof file: unreadable, not JSON).
    """
    import json

    from sketchsim.prove.check_proof import ProofInvalid, check_proof
    from sketchsim.sketch.family import HardFamily

    try:
        obj = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise SketchsimError(
            f"{path}: not a readable JSON proof file ({type(exc).__name__})"
        ) from None
    checked = check_proof(obj)
    fam = obj["family"]
    if HardFamily(fam["q"], fam["s"], fam["seed"]).perm.tolist() != obj["perm"]:
        raise ProofInvalid(f"perm is not the layout of F({fam['q']},{fam['s']}) seed {fam['seed']}")
    if weights is not None:
        _same_file(obj, weights)
    return checked


def _same_file(obj: dict, path) -> None:
    import base64

    import numpy as np

    from sketchsim.prove.check_proof import ProofInvalid
    from sketchsim.sketch.weights_file import load_weights

    w = load_weights(path)
    if w.sha256 != obj["weights_sha256"]:
        raise ProofInvalid(f"{path} is not the file the proof names (sha256 {w.sha256[:16]}...)")
    for name, a in w.arrays.items():
        got = np.frombuffer(base64.b64decode(obj["arrays"][name]["f8"]), "<f8")
        if not np.array_equal(got, np.ravel(a)):
            raise ProofInvalid(f"array {name} differs from {path}'s")
