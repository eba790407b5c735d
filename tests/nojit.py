"""Run a snippet in a fresh interpreter with ``NUMBA_DISABLE_JIT=1`` (the plain-Python paths)."""

import os
import subprocess
import sys


def run_without_jit(code: str) -> list[str]:
    """The lines ``code`` prints; the run must succeed."""
    env = dict(os.environ, NUMBA_DISABLE_JIT="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout.split("\n")


def with_and_without_jit(code: str) -> tuple:
    """``result`` as ``code`` sets it here (jitted) and in a fresh interpreter without JIT.

    ``result`` must be a literal-printable value (lists of numbers).
    """
    here: dict = {}
    exec(code, here)
    plain = eval(run_without_jit(code + "\nprint(repr(result))\n")[0])
    return here["result"], plain
