import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))

# an unreachable test scheduler is given up after 1 s instead of the default 5 s
os.environ.setdefault("SKETCHSIM_CONNECT_TIMEOUT", "1")
# no helper process compiling engine loops beside the tests' runs (tests/sketch/test_prewarm.py
# turns it on where it is tested)
os.environ.setdefault("SKETCHSIM_PREWARM", "0")
# the torch tests' device: SKETCHSIM_TEST_DEVICE (cpu unless set; benchmarks/gpu_check.py sets
# cuda), the device every run that asks for "auto" gets (sketchsim.experiments.train.pick_device)
TEST_DEVICE = os.environ.get("SKETCHSIM_TEST_DEVICE", "") or "cpu"
os.environ["SKETCHSIM_DEVICE"] = TEST_DEVICE
# rich tables wrap at the terminal width; the tests read whole cells, so give them
# the same wide console whether pytest runs in a terminal, in CI or in xdist workers
os.environ["COLUMNS"] = "200"


@pytest.fixture
def test_device():
    """The torch tests' device (``SKETCHSIM_TEST_DEVICE``, cpu unless set)."""
    return TEST_DEVICE


@pytest.fixture(params=["serial", "parallel"])
def kernel_path(request, monkeypatch):
    """Min-IP tests: run a test through the calling-thread path and through the parallel kernels."""
    import sketchsim.minip.kernel as minip

    if request.param == "parallel":
        monkeypatch.setattr(minip, "_SERIAL_BYTES", -1)
        monkeypatch.setattr(minip, "_SERIAL_WORD_PAIRS", -1)
        monkeypatch.setattr(minip, "_TASK_WORDS", 64)  # many small tasks
    return request.param


C1, C2 = [1, 1, 1, 0, 0, 0], [0, 0, 0, 1, 1, 1]


@pytest.fixture
def tiny_path(tmp_path):
    """Sweep tests: a witness family of 8 inputs (two codewords of width 6) saved as .npz."""
    from sketchsim.certify import WitnessFamily, save_family
    from sketchsim.minip.kernel import minip_targets

    t = []
    for x, c, d in ((C2, C1, C2), (C1, C2, C1)):
        t += [(x, c, c), (x, d, d), (x, c, d), (x, d, c)]
    tokens = np.array(t, dtype=np.uint8)
    fam = WitnessFamily(tokens, 1, minip_targets(tokens)[:, 0], {})
    return save_family(fam, tmp_path / "t.npz")
