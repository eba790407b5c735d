"""Certified feature-rank lower bounds at N = 3 (THEORY section 4).

``chains`` computes the gap-domination factors ``rho`` and best chain
products, ``witness`` builds and stores length-3 families from codes, and
``certificate`` turns any length-3 family into a bound on the feature rank of
every normalized nonnegative kernel head that solves it; ``proof`` writes that
bound's proof object and ``check`` re-verifies one with exact rationals.  The
names below are imported on first use, so ``check`` (standard library only)
runs without loading numba.
"""

from sketchsim.lazy import lazy_exports

_LAZY = {
    "Certificate": "sketchsim.certify.certificate",
    "certify": "sketchsim.certify.certificate",
    "best_chain_product": "sketchsim.certify.chains",
    "rho": "sketchsim.certify.chains",
    "WitnessFamily": "sketchsim.certify.witness",
    "build_witness": "sketchsim.certify.witness",
    "load_family": "sketchsim.certify.witness",
    "save_family": "sketchsim.certify.witness",
}

__all__ = list(_LAZY)


_lazy_getattr, __dir__ = lazy_exports(__name__, globals(), _LAZY)


def __getattr__(name: str):
    if name == "Family":  # the name before #62: still importable, with a warning
        from sketchsim.certify import witness

        return witness.__getattr__("Family")
    return _lazy_getattr(name)
