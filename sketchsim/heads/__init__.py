"""Attention heads on Min-IP (THEORY section 3): the constructions and their exhaustive check.

``attention`` defines the rank-1 length-2 head, the softmax head and the one-hot
kernel head; ``exhaustive`` enumerates all ``2^(m*N)`` inputs to check one, with its
jitted inner loop in ``exhaustive_kernel``.
"""
