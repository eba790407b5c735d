"""The public Python API: what each command measures, without the terminal.

Every function here is what the CLI command of the same name calls; the CLI
adds parsing, progress bars, resume files and rendering.  Imported lazily
from :mod:`sketchsim` (``import sketchsim; sketchsim.verify(4, 3)``)::

    import sketchsim

    res = sketchsim.verify(4, 3, "rank1")          # THEORY section 3, all 2^12 inputs
    run = sketchsim.transcript(q=4, s=3)          # protocols on F(4, 3), exhaustively
    cert = sketchsim.certify("w.npz")             # certified feature-rank bound
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "verify",
    "transcript",
    "TranscriptRun",
    "frontier",
    "certify",
    "sweep",
    "audit",
    "reproduce",
]


def verify(
    m: int,
    n: int = 3,
    construction: str = "rank1",
    beta: float = 2.0,
    causal: bool = False,
    progress: Callable[[int, int], None] | None = None,
):
    """Check a THEORY section 3 construction on all ``2^(m n)`` inputs.

    See :func:`sketchsim.heads.verify.verify`; returns its ``VerifyResult``.
    """
    from sketchsim.heads.verify import verify as run

    return run(m, n, construction, beta=beta, causal=causal, progress=progress)


@dataclass
class TranscriptRun:
    """Protocols measured on one family: the family, the input mode and one report each."""

    family: object
    mode: str
    inputs: int
    reports: list = field(default_factory=list)

    def to_dict(self) -> dict:
        """JSON-ready: the bound, the mode and every protocol's report."""
        return {
            "bound_bits": self.family.bound_bits,
            "mode": self.mode,
            "inputs": self.inputs,
            "protocols": [r.to_dict() for r in self.reports],
        }


def transcript(
    q: int = 64,
    s: int = 7,
    protocols: Sequence[str] = (),
    family: str = "hard",
    samples: int = 100_000,
    exhaustive: bool | None = None,
    seed: int = 0,
    progress: Callable[[str, int, int], None] | None = None,
) -> TranscriptRun:
    """Run sketch protocols on a family and measure their transcripts against the bound.

    Parameters
    ----------
    q, s : int
        ``q`` independent answers in ``0..s``; the bound is ``q log2(s+1)`` bits.
    protocols : sequence of str
        Protocol specs (``kernel:bits=8``, ``path/file.py:NAME``); default: the
        family's default set.
    family : str
        Family spec (``hard`` is F(q, s); ``mqar``; plug-ins).
    samples : int
        Inputs drawn in sampled mode.
    exhaustive : bool, optional
        Enumerate all ``(s+1)^q`` inputs; default when there are at most 2^20.
    seed : int
        Bit layout and sampling.
    progress : callable, optional
        ``progress(spec, done, total)`` after each chunk.
    """
    from sketchsim.sketch.inputs import build_family, check_support, resolve_protocols
    from sketchsim.sketch.transcript import choose_answers, measure

    fam, default_specs = build_family(family, q, s, samples, seed)
    resolved = resolve_protocols(protocols or default_specs)
    check_support(resolved, fam)
    mode, T = choose_answers(fam, exhaustive, samples)
    run = TranscriptRun(fam, mode, int(T.shape[0]))
    for spec, r in resolved:
        update = None if progress is None else (lambda d, t, spec=spec: progress(spec, d, t))
        rep = measure(fam, T, r.protocol, r.params, r.source, progress=update)
        rep.spec = spec
        run.reports.append(rep)
    return run


def frontier(
    protocol: str,
    vary: str,
    q: int,
    s: int,
    family: str = "hard",
    samples: int = 20_000,
    search: str = "auto",
    seed: int = 0,
):
    """The smallest value of a protocol parameter that is correct on F(q, s).

    ``vary`` is ``NAME=LO..HI`` (``bits=1..12``); returns a
    :class:`sketchsim.sketch.frontier.Cell`.
    """
    from sketchsim.sketch.frontier import frontier_cell, parse_vary
    from sketchsim.sketch.inputs import build_family, check_support, resolve_protocols

    fam, _ = build_family(family, q, s, samples, seed)
    ((spec, r),) = resolve_protocols([protocol])
    check_support([(spec, r)], fam)
    return frontier_cell(
        fam, r.protocol, r.params, parse_vary(vary), spec, r.source, samples, search
    )


def certify(family, eps: Sequence[float] | None = None, positional: bool = True):
    """Certified lower bound on the feature rank of any head solving a length-3 family.

    ``family`` is a :class:`sketchsim.certify.Family`, a
    :class:`sketchsim.certify.packed.PackedFamily` (certified block by block) or
    the path of a family file of either kind; returns a
    :class:`sketchsim.certify.Certificate`.
    """
    from sketchsim.certify.certificate import DEFAULT_EPS
    from sketchsim.certify.certificate import certify as run
    from sketchsim.certify.packed import PackedFamily, certify_packed, load_any_family

    if isinstance(family, str | Path):
        family = load_any_family(family)
    eps = DEFAULT_EPS if eps is None else tuple(eps)
    if isinstance(family, PackedFamily):
        return certify_packed(family, eps, positional=positional)
    return run(family, eps, positional=positional)


def sweep(
    plan=None,
    path=None,
    resume: bool = False,
    device: str = "auto",
    family=None,
    client=None,
    progress: Callable[[int, int], None] | None = None,
    save_weights=None,
):
    """Train the heads of a plan (default: reproduce's OOD plan) and summarize them.

    Parameters
    ----------
    plan : Plan or str, optional
        A :class:`sketchsim.experiments.plan.Plan`, or a suite name for its
        default plan (``"witness"``, ``"ood"``).
    path : path-like, optional
        Sweep file written after every run (and resumed from with ``resume``).
    device : {"auto", "cpu", "cuda"}
    family : Family, optional
        Witness suite: train on this family instead of the plan's.
    client : distributed.Client, optional
        Run the training runs as Dask tasks.
    progress : callable, optional
        ``progress(done, total)`` after each run.
    save_weights : path-like, optional
        Keep every head trained (not resumed) in this folder for :func:`audit`.

    Returns
    -------
    sketchsim.experiments.plan.SweepResult
    """
    from sketchsim.experiments import require_torch

    require_torch()
    from sketchsim.experiments.plan import default_plan, run_plan

    if plan is None or isinstance(plan, str):
        plan = default_plan(plan or "ood")
    return run_plan(plan, path, resume, device, family, client, progress, save_weights)


def audit(folder) -> list[dict]:
    """Bit audit of the heads a sweep kept (``save_weights``): accuracy per bits of state.

    See :mod:`sketchsim.experiments.audit`.
    """
    from sketchsim.experiments import require_torch

    require_torch()
    from sketchsim.experiments.audit import audit_dir

    return audit_dir(folder)


def reproduce(
    out: str | Path = "results",
    quick: bool = True,
    log=print,
    device: str = "auto",
    settings=None,
    client=None,
):
    """Run every experiment into ``out`` and write ``report.md``; returns the table rows.

    See :func:`sketchsim.experiments.reproduce.reproduce` (needs the torch extra);
    ``settings`` overrides the sizes of ``quick``, ``client`` is a Dask client.
    """
    from sketchsim.experiments import require_torch

    require_torch()
    from sketchsim.experiments.reproduce import reproduce as run

    return run(Path(out), quick, log=log, device=device, settings=settings, client=client)
