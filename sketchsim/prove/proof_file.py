"""The proof file `sketchsim prove --proof` writes (format 1, docs/cli.md "prove").

Everything a referee needs to re-verify the claim without the weights file or
sketchsim: the statement (the file's sha256, ``K``, rounding, the family and its
layout), the architecture and every array (base64 of little-endian float64), and
per query the tree of splits in preorder (a leaf is ``-1``; a split ``j, v``
is followed by the subtree of ``t_j <= v``, then that of ``t_j > v``), and a
``digest``: the sha256 of the canonical JSON of every other field.
:mod:`sketchsim.prove.check_proof` checks it with the standard library alone.
"""

from __future__ import annotations

import base64
import hashlib
import json

import numpy as np

__all__ = ["FORMAT", "CLAIM", "proof_record", "digest"]

FORMAT = "sketchsim-proof"
CLAIM = "every input of the family is answered right"


def digest(record: dict) -> str:
    """The sha256 of the canonical JSON of every field but ``digest``."""
    body = {k: v for k, v in record.items() if k != "digest"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def proof_record(weights, family, bits: int, rounding: str, trees: list) -> dict:
    """The proof file's JSON object for a ``proved`` outcome's ``trees``."""
    arrays = {}
    for name, a in sorted(weights.arrays.items()):
        a = np.ascontiguousarray(a, dtype="<f8")
        arrays[name] = {"shape": list(a.shape), "f8": base64.b64encode(a.tobytes()).decode()}
    record = {
        "format": FORMAT,
        "version": 1,
        "claim": CLAIM,
        "weights_sha256": weights.sha256,
        "bits": int(bits),
        "rounding": rounding,
        "family": {"name": "hard", "q": family.q, "s": family.s, "seed": family.seed},
        "perm": family.perm.tolist(),
        "architecture": dict(weights.arch),
        "arrays": arrays,
        "trees": [list(map(int, t)) for t in trees],
        "leaves": int(sum(t.count(-1) for t in trees)),
    }
    record["digest"] = digest(record)
    return record
