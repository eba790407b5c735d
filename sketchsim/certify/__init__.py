"""Certified feature-rank lower bounds at N = 3 (THEORY section 4).

``chains`` computes the gap-domination factors ``rho`` and best chain
products, ``witness`` builds and stores length-3 families from codes, and
``certificate`` turns any length-3 family into a bound on the feature rank of
every normalized nonnegative kernel head that solves it.
"""

from sketchsim.certify.certificate import Certificate, certify
from sketchsim.certify.chains import best_chain_product, rho
from sketchsim.certify.witness import Family, build_witness, load_family, save_family

__all__ = [
    "Certificate",
    "certify",
    "best_chain_product",
    "rho",
    "Family",
    "build_witness",
    "load_family",
    "save_family",
]
