"""Fixtures shared by the sweep tests."""

import numpy as np
import pytest

from sketchsim.certify import Family, save_family
from sketchsim.minip import minip_targets

C1, C2 = [1, 1, 1, 0, 0, 0], [0, 0, 0, 1, 1, 1]


@pytest.fixture
def tiny_path(tmp_path):
    """A witness family of 8 inputs (two codewords of width 6) saved as .npz."""
    t = []
    for x, c, d in ((C2, C1, C2), (C1, C2, C1)):
        t += [(x, c, c), (x, d, d), (x, c, d), (x, d, c)]
    tokens = np.array(t, dtype=np.uint8)
    return save_family(Family(tokens, 1, minip_targets(tokens)[:, 0], {}), tmp_path / "t.npz")
