"""The verdicts of a protocol run (THEORY section 5) and the sample statistics they quote.

``decodable`` (the true answers are a function of the transcript) and
``decoded`` (the protocol's readout is right), each three-valued: ``True``
only when the run proves it, ``False`` only when it refutes it, else ``None``;
with the Clopper-Pearson bound on a sampled error rate and the reach of the
sampled collision check.
"""

from __future__ import annotations

from sketchsim import config

__all__ = [
    "collision_power",
    "decodability",
    "decodable_verdict",
    "decoded_text",
    "entropy_below_bound",
    "error_rate_upper",
]


def decodability(
    exact: bool,
    collision: dict | None,
    entropy_high: float,
    bound: float,
    inputs: int,
    unresolved: bool = False,
    confidence: float = config.ENTROPY_CONFIDENCE,
    undersampled: int = 0,
) -> tuple[bool | None, str]:
    """``(decodable, reason)``: ``True`` only when proved, ``False`` only when refuted.

    Parameters
    ----------
    exact : bool
        Every input of the family was run (exhaustive mode).
    collision : dict or None
        A verified collision (same exact transcript, different answers).
    entropy_high : float
        Upper end of the entry entropy's interval (the exact value when ``exact``).
    bound : float
        The family's bound in bits.
    inputs : int
        Inputs run.
    unresolved : bool
        Fingerprint groups held inputs with different answers whose exact
        transcripts differ (a 128-bit fingerprint collision) and no verified
        collision was found among the pairs checked: no proof either way.
    undersampled : int
        Entries taking more than n/10 values in a sample: their entropy
        estimates (and the interval) are biased low, so the entropy argument is
        not used.
    """
    tol = config.BITS_TOLERANCE
    if collision is not None:
        i, j = collision["inputs"]
        return False, (
            f"refuted: verified collision (inputs #{i} and #{j} share a transcript, "
            f"answers differ at query {collision['position']})"
        )
    if entropy_high < bound - tol and (exact or not undersampled):
        where = "exact" if exact else f"upper end of its {100 * confidence:.0f}% interval"
        return False, (
            f"refuted by the entropy argument: entry entropy ({where}) {entropy_high:,.2f} "
            f"< bound {bound:,.2f} bits"
        )
    if exact and not unresolved:
        return True, (
            f"proved: exhaustive run over all {inputs:,} inputs, no two with different "
            "answers share a transcript"
        )
    if exact:
        return None, (
            f"not refuted ({inputs:,} inputs, all of them; a 128-bit fingerprint collision "
            "left some pairs unchecked)"
        )
    skipped = (
        f"; entry entropy interval not used: {undersampled:,} undersampled entries"
        if undersampled and entropy_high < bound - tol
        else ""
    )
    return None, (
        f"not refuted ({inputs:,} sampled inputs, collision check reach "
        f"{_reach(collision_power(inputs))}{skipped})"
    )


def entropy_below_bound(
    entropy_high: float, bound: float, exact: bool, undersampled: int = 0
) -> bool:
    """The entropy argument applies: the entry entropy (the upper end of its interval
    when sampled) is below ``bound``, and in a sample no entry is undersampled (their
    estimates are biased low; the interval would not support the claim)."""
    return entropy_high < bound - config.BITS_TOLERANCE and (exact or not undersampled)


def _reach(power: float | None) -> str:
    return "-" if power is None else f"{power:.2g}"


def decodable_verdict(r: dict) -> tuple[bool | None, str]:
    """``(decodable, reason)`` of a report's JSON entry.

    Every entry a run reads back holds ``decodable_reason`` (the resume checks of
    :mod:`sketchsim.runs.transcript` and :mod:`sketchsim.runs.frontier` refuse one
    without it, and a file of other code resumes nothing).
    """
    return r.get("decodable"), r["decodable_reason"]


def decoded_text(r: dict) -> str:
    """The readout's verdict of a report's JSON entry, saying what the run covered."""
    n, wrong = int(r.get("inputs", 0)), int(r.get("wrong_inputs", 0))
    if not r.get("capped", True):
        return "correct on every input" if not wrong else "wrong on some input"
    if wrong:
        return f"wrong on {wrong:,} of {n:,} sampled inputs"
    upper = r.get("error_rate_upper95")
    rate = f" (error rate < {upper:.2g} at 95%)" if upper is not None else ""
    return f"correct on {n:,} sampled inputs{rate}"


def error_rate_upper(wrong: int, n: int, confidence: float = 0.95) -> float:
    """One-sided Clopper-Pearson upper bound on an error rate from ``wrong`` of ``n``.

    With no errors it is ``1 - (1 - confidence)^(1/n)`` (about ``3/n``).
    """
    if n <= 0:
        return 1.0
    if wrong >= n:
        return 1.0
    if wrong == 0:
        return 1.0 - (1.0 - confidence) ** (1.0 / n)
    # the beta quantile scipy.stats.beta.ppf returns, without importing scipy.stats
    # (0.8 s, a quarter of the main job); the two are compared in the tests
    from scipy.special import betaincinv

    return float(betaincinv(wrong + 1, n - wrong, confidence))


def collision_power(n: int, expected: float = 3.0) -> float | None:
    """The per-pair collision probability a sample of ``n`` inputs detects.

    Two independent draws collide (same transcript, different answers) with
    probability ``mu`` for a protocol that is not decodable on the distribution;
    ``n`` draws then hold ``mu * n (n - 1) / 2`` colliding pairs on average.  This
    returns the ``mu`` for which that average is ``expected`` (3): merges at
    least that likely are expected to show in the sample; rarer ones may not.
    """
    pairs = n * (n - 1) / 2
    return expected / pairs if pairs > 0 else None
