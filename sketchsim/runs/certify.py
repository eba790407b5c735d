"""``certify`` as a library run: a family's certified rank bound, its result and proof files."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from sketchsim.errors import SketchsimError

__all__ = ["CertifyPlan", "CertifyRun", "run"]


@dataclass(frozen=True)
class CertifyPlan:
    """What ``sketchsim certify`` bounds: the feature rank of every head solving a family.

    ``family`` is a family file's path, a :class:`sketchsim.certify.WitnessFamily` or
    a :class:`sketchsim.certify.packed.PackedFamily`; ``eps`` the error levels
    below 1/2 (default :data:`sketchsim.certify.certificate.DEFAULT_EPS`; the
    limit 1/2 is always certified); ``position_independent`` certifies only
    heads whose maps ignore position.
    """

    family: object
    eps: Sequence[float] | None = None
    position_independent: bool = False

    @property
    def eps_levels(self) -> tuple[float, ...]:
        """The error levels as given (the default when none)."""
        from sketchsim.certify.certificate import DEFAULT_EPS

        return tuple(self.eps) if self.eps else DEFAULT_EPS

    @property
    def path(self) -> str | None:
        """The family file's path, or None for a family in memory."""
        return str(self.family) if isinstance(self.family, str | Path) else None

    def params(self) -> dict:
        """The parameters recorded in the result file."""
        return {
            "path": self.path,
            "eps": list(self.eps_levels),
            "position_independent": self.position_independent,
        }

    def validate(self) -> None:
        """One-line errors for impossible settings, before the family is read."""
        for e in self.eps_levels:
            if not 0 < e < 0.5:
                raise SketchsimError(f"eps must be in (0, 1/2), got {e}", param="eps")


@dataclass
class CertifyRun:
    """The certificate of one family (and the proof object, when one was asked for)."""

    plan: CertifyPlan
    certificate: object  # sketchsim.certify.Certificate
    proof: dict | None = None

    @property
    def position_independent(self) -> bool:
        return self.plan.position_independent

    def to_dict(self) -> dict:
        """The measured keys of the result file (the certificate's fields)."""
        return self.certificate.to_dict()

    def write(self, json_path) -> Path:
        """Write the result file (``sketchsim certify --json``) atomically."""
        from sketchsim.results import result_payload, write_json_atomic

        return write_json_atomic(
            json_path, result_payload("certify", self.plan.params(), self.to_dict())
        )

    def write_proof(self, proof_path) -> Path:
        """Write the proof at the limit eps -> 1/2 (``sketchsim certify --certificate``)."""
        from sketchsim.results import write_json_atomic

        if self.proof is None:
            raise ValueError("this run built no proof (run it with proof_path=)")
        return write_json_atomic(proof_path, self.proof)


def _load(plan: CertifyPlan):
    from sketchsim.certify.packed import load_any_family

    return load_any_family(plan.family) if plan.path is not None else plan.family


def _check_proof_size(family, plan: CertifyPlan) -> None:
    """Refuse a proof of a packed family past the in-memory limit, before certifying it."""
    from sketchsim.certify.packed import PackedFamily
    from sketchsim.certify.witness import WITNESS_MAX_INPUTS

    if isinstance(family, PackedFamily) and family.inputs > WITNESS_MAX_INPUTS:
        where = plan.path if plan.path is not None else "the family"
        raise SketchsimError(
            f"proof objects are written for families of up to {WITNESS_MAX_INPUTS:,} "
            f"inputs; {where} holds {family.inputs:,}"
        )


def _proof(family, plan: CertifyPlan) -> dict:
    """The proof object of ``family`` at the limit; packed families are unpacked (small ones)."""
    from sketchsim.certify.packed import PackedFamily
    from sketchsim.certify.proof import certificate_proof

    if isinstance(family, PackedFamily):
        family = family.unpack()
    return certificate_proof(family, positional=not plan.position_independent)


def run(plan: CertifyPlan, json_path=None, proof_path=None) -> CertifyRun:
    """Certify ``plan``'s family; write the result file and the proof file when asked.

    Parameters
    ----------
    plan : CertifyPlan
    json_path : path-like, optional
        Receives the result file (``sketchsim certify --json``), written before
        the proof is built.  A proof of a packed family too large to unpack is
        refused before the family is certified.
    proof_path : path-like, optional
        Receives the proof at the limit eps -> 1/2 (``--certificate``), for
        ``sketchsim check-certificate``; families of up to
        :data:`sketchsim.certify.witness.WITNESS_MAX_INPUTS` inputs.

    Returns
    -------
    CertifyRun
    """
    from sketchsim.certify.certificate import certify
    from sketchsim.certify.packed import PackedFamily
    from sketchsim.certify.packed_certify import certify_packed

    plan.validate()
    family = _load(plan)
    if proof_path:
        _check_proof_size(family, plan)
    eps = sorted(set(plan.eps_levels))
    positional = not plan.position_independent
    if isinstance(family, PackedFamily):
        cert = certify_packed(family, eps, positional=positional)
    else:
        cert = certify(family, eps, positional=positional)
    result = CertifyRun(plan, cert)
    if json_path:
        result.write(json_path)
    if proof_path:
        result.proof = _proof(family, plan)
        result.write_proof(proof_path)
    return result
