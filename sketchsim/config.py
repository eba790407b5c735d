"""Tunables shared by every jitted kernel (one place, as in stumpy's ``config``)."""

#: numba ``fastmath`` flag for floating-point kernels.  Off: results must be
#: reproducible bit for bit and NaN checks must not be optimised away.
FASTMATH = False

#: Inputs per chunk in exhaustive enumerations (one progress-bar step).
VERIFY_CHUNK = 1 << 20

#: Largest ``m * N`` the exhaustive verifier accepts (2**26 inputs).
VERIFY_MAX_BITS = 26

#: Largest ``m`` for the 2**m one-hot feature construction.
ONEHOT_MAX_M = 20
