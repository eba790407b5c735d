"""Start-up of the main job (issue #31): modules it does not need stay unimported."""

import subprocess
import sys

import pytest

#: Loaded by nothing the main job runs: the trained protocol's model code, numba's
#: thread pool (OpenMP / workqueue / TBB), which only ``parallel=True`` kernels start,
#: and scipy.stats (0.8 s; the error-rate bound uses scipy.special).
NOT_NEEDED = (
    "sketchsim.sketch.trained",
    "sketchsim.sketch.weights_file",
    "scipy.stats",
    "numba.np.ufunc.omppool",
    "numba.np.ufunc.workqueue",
    "numba.np.ufunc.tbbpool",
    "torch",
    "matplotlib",
    "dask",
)


@pytest.mark.slow
def test_main_job_leaves_unneeded_modules_unimported(tmp_path):
    # sampled, with wrong inputs (clipped-counts): the error-rate bound is computed
    args = ["transcript", "--q", "6", "--s", "3", "--sampled", "--samples", "3000", "--quiet"]
    args += ["--json", str(tmp_path / "o.json")]
    code = (
        "import sys\n"
        "from sketchsim.cli import main\n"
        "try:\n"
        f"    main({args!r})\n"
        "except SystemExit as exc:\n"
        "    assert not exc.code, exc.code\n"
        f"print('LOADED:', *[m for m in {NOT_NEEDED!r} if m in sys.modules])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    (line,) = [x for x in out.stdout.splitlines() if x.startswith("LOADED:")]
    loaded = line.split()[1:]
    assert loaded == [], f"the main job imported {loaded}"
    assert (tmp_path / "o.json").exists()


def test_trained_protocol_default_bits_is_the_models_limit():
    import importlib.util
    from pathlib import Path

    from sketchsim.sketch.weights_file import MAX_BITS

    path = Path(__file__).parents[2] / "protocols" / "trained.py"
    spec = importlib.util.spec_from_file_location("_trained_protocol", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.MAX_BITS == MAX_BITS
    bits = {p.name: p for p in module.PROTOCOL.params}["bits"]
    assert bits.default == MAX_BITS and f"1..{MAX_BITS}" in bits.help
