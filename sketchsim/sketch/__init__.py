"""Deterministic multilayer sketch models (THEORY section 5).

``protocol`` declares what a protocol is, ``channels`` what each channel's range
is, ``family`` builds the hard Min-IP family F(q, s), ``engine`` runs a protocol
over a batch (jitted, or plain Python), ``measure`` turns its transcripts into
bits and verdicts, ``trained`` runs a saved model's weights file as a protocol.
"""

from sketchsim.sketch.channels import CHANNELS, declared_bits
from sketchsim.sketch.family import HardFamily
from sketchsim.sketch.protocol import Context, Layer, Param, Plan, Protocol

__all__ = [
    "CHANNELS",
    "declared_bits",
    "HardFamily",
    "Context",
    "Layer",
    "Param",
    "Plan",
    "Protocol",
]
