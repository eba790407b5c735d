"""What a cluster transcript task carries: the job, and plug-in files shipped by content."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from sketchsim.errors import PluginError

__all__ = ["TranscriptJob", "shipped_source", "worker_spec", "make_job"]


@dataclass(frozen=True)
class TranscriptJob:
    """What a worker needs to rebuild the family, the protocol and its engine.

    Specs are passed as text and resolved on the worker.  A plug-in given as a
    file travels with the job (``family_source``, ``protocol_source``: its file
    name and bytes): the worker writes it under its own temporary folder, keyed
    by the content's hash, and never opens the client's path, so the run works
    on machines that do not share the client's files.  ``identity`` is the
    client's protocol source identity, checked there, so a worker never measures
    another version of a plug-in.  A file plug-in must be self-contained (install
    a plug-in that imports sibling files as a package on the workers).
    """

    family_spec: str
    q: int
    s: int
    seed: int
    protocol_spec: str
    identity: str
    family_digest: str
    mode: str
    inputs: int
    family_source: tuple | None = None
    protocol_source: tuple | None = None

    def cache_key(self) -> tuple:
        return (
            self.family_spec,
            self.q,
            self.s,
            self.seed,
            self.protocol_spec,
            self.identity,
            self.family_digest,
        )


def shipped_source(spec: str) -> tuple | None:
    """``(file name, bytes)`` of a ``path/file.py:NAME`` spec's file, or None for other specs."""
    head = spec.partition(":")[0].strip()
    if not head.endswith(".py"):
        return None
    path = Path(head)
    try:
        return path.name, path.read_bytes()
    except OSError as exc:
        raise PluginError(f"cannot read plug-in file {head}: {exc.strerror or exc}") from None


def worker_spec(spec: str, source: tuple | None) -> str:
    """``spec`` with its file head replaced by a worker-local copy of ``source``.

    The copy lives in ``<tmp>/sketchsim-plugins/<sha256 prefix>/<name>``, written
    once per content (atomically), so equal content is shared and a changed file
    never reuses an old copy.
    """
    if source is None:
        return spec
    import tempfile

    from sketchsim.results import atomic_path

    name, content = source
    _, sep, rest = spec.partition(":")
    digest = hashlib.sha256(content).hexdigest()[:32]
    path = Path(tempfile.gettempdir()) / "sketchsim-plugins" / digest / name
    if not path.exists() or path.read_bytes() != content:
        with atomic_path(path, suffix=".py") as tmp:
            tmp.write_bytes(content)
    return str(path) + sep + rest


def make_job(
    family, family_spec: str, spec: str, resolved, mode: str, inputs: int
) -> TranscriptJob:
    """What every map task of one protocol's run carries (plug-in files by content)."""
    return TranscriptJob(
        family_spec,
        family.q,
        family.s,
        family.seed,
        spec,
        resolved.identity,
        family.digest(),
        mode,
        inputs,
        family_source=shipped_source(family_spec),
        protocol_source=shipped_source(spec),
    )
