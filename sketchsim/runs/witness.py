"""``witness`` as a library run: a code's length-3 witness family, written and certified."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sketchsim.config import PAPER
from sketchsim.errors import SketchsimError

__all__ = ["WitnessPlan", "WitnessRun", "run", "PAPER_WITNESS_INPUTS", "PAPER_WITNESS_BOUND"]

#: The paper's witness suite: its number of inputs and its certified rank bound.
PAPER_WITNESS_INPUTS = PAPER["witness_inputs"]
PAPER_WITNESS_BOUND = PAPER["witness_lower_bound"]


@dataclass(frozen=True)
class WitnessPlan:
    """What ``sketchsim witness`` builds: the witness family of a constant-weight code.

    ``codewords`` words of the ``code`` kind at width ``m`` are used (0: all,
    chosen with ``seed``); ``d`` and ``w`` set greedy and random codes,
    ``complements`` adds the rows' complements to a hadamard code, ``chains``
    crosses long gaps in steps (THEORY Lemma 3), ``packed`` stores tokens as
    integer keys and certifies block by block.  The family goes to ``out``.
    """

    m: int = 24
    code: str = "hadamard"
    codewords: int = 12
    d: int | None = None
    w: int | None = None
    complements: bool = False
    chains: bool = False
    both_orders: bool = True
    seed: int = 0
    packed: bool = False
    out: object = "witness.npz"

    def params(self) -> dict:
        """The parameters recorded in the result file."""
        return {
            "m": self.m,
            "code": self.code,
            "codewords": self.codewords,
            "d": self.d,
            "w": self.w,
            "complements": self.complements,
            "chains": self.chains,
            "both_orders": self.both_orders,
            "seed": self.seed,
            "packed": self.packed,
        }

    def validate(self) -> None:
        """One-line errors for impossible settings; every option changes the family or is
        refused."""
        from sketchsim.certify.codes import check_code_options

        if self.codewords < 0:
            raise SketchsimError(f"--codewords must be >= 0, got {self.codewords}")
        if not 0 <= self.seed < 2**63:
            raise SketchsimError(f"--seed must be in 0..2^63-1, got {self.seed}")
        check_code_options(self.code, self.d, self.w)
        if self.complements and self.code != "hadamard":
            raise SketchsimError(f"--complements applies to hadamard codes, not {self.code}")

    def make_code(self):
        """The code the family is built from; a random code keeps as many words as asked
        (at least :data:`sketchsim.certify.codes.RANDOM_WORDS`)."""
        from sketchsim.certify.codes import RANDOM_WORDS, hadamard_code, make_code

        if self.code == "hadamard":
            return hadamard_code(self.m, self.complements)
        limit = max(self.codewords, RANDOM_WORDS) if self.code == "random" else None
        return make_code(self.code, self.m, self.d, self.w, seed=self.seed, limit=limit)


@dataclass
class WitnessRun:
    """The family written (its metadata and size) and its certificate."""

    plan: WitnessPlan
    meta: dict
    inputs: int
    certificate: object  # sketchsim.certify.Certificate

    @property
    def certified_rank(self) -> int:
        """The certified rank at the limit: every head with error < 1/2."""
        return self.certificate.certified_rank["0.5"]

    def to_dict(self) -> dict:
        """The measured keys of the result file: the family's metadata, size and bounds."""
        return {
            **self.meta,
            "inputs": self.inputs,
            "file": str(self.plan.out),
            "family_sha256": self.certificate.family_sha256,
            "certified_rank": self.certificate.certified_rank,
            "paper_inputs": PAPER_WITNESS_INPUTS,
            "paper_bound": PAPER_WITNESS_BOUND,
        }

    def write(self, json_path) -> Path:
        """Write the result file (``sketchsim witness --json``) atomically."""
        from sketchsim.results import result_payload, write_json_atomic

        return write_json_atomic(
            json_path, result_payload("witness", self.plan.params(), self.to_dict())
        )


def run(plan: WitnessPlan, json_path=None) -> WitnessRun:
    """Build ``plan``'s witness family, write it to ``plan.out`` and certify it.

    Parameters
    ----------
    plan : WitnessPlan
    json_path : path-like, optional
        Receives the result file (``sketchsim witness --json``).

    Returns
    -------
    WitnessRun
    """
    from sketchsim.certify.realize import realize_witness

    plan.validate()
    code = plan.make_code()
    family, inputs, cert = realize_witness(
        code,
        plan.code,
        plan.codewords,
        plan.chains,
        plan.both_orders,
        plan.seed,
        plan.complements,
        plan.out,
        plan.packed,
    )
    result = WitnessRun(plan, dict(family.meta), inputs, cert)
    if json_path:
        result.write(json_path)
    return result
