"""``audit`` as a library run: the bit audit of the heads a sweep kept, and its result file."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["AuditRun", "run"]


@dataclass
class AuditRun:
    """One row per weights file of ``folder`` (JSON ``heads``), sorted by file name.

    See :func:`sketchsim.experiments.audit.audit_dir` for a row's fields.
    """

    folder: str
    heads: list = field(default_factory=list)

    def params(self) -> dict:
        """The parameters recorded in the result file."""
        return {"folder": self.folder}

    def to_dict(self) -> dict:
        """The measured keys of the result file."""
        return {"heads": self.heads}

    def write(self, json_path) -> Path:
        """Write the result file (``sketchsim audit --json``) atomically."""
        from sketchsim.results import result_payload, write_json_atomic

        return write_json_atomic(json_path, result_payload("audit", self.params(), self.to_dict()))


def run(folder, json_path=None) -> AuditRun:
    """Audit every head kept in ``folder`` (``sweep --save-weights``; torch extra).

    Parameters
    ----------
    folder : path-like
        Folder of ``run-*.pt`` files.
    json_path : path-like, optional
        Receives the result file (``sketchsim audit --json``).

    Returns
    -------
    AuditRun
    """
    from sketchsim.experiments import require_torch

    require_torch()
    from sketchsim.experiments.audit import audit_dir

    result = AuditRun(str(folder), audit_dir(folder))
    if json_path:
        result.write(json_path)
    return result
