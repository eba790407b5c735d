"""What machine a result was measured on: CPU, instruction sets chosen, threads, versions.

Two CPUs with the same library versions can round float32 differently (torch,
oneDNN and MKL pick kernels per instruction set), so result files record which
kernels ran, not just versions; ``sketchsim info`` prints the same facts for bug
reports.  Nothing here imports torch or numba: a library that the process has
not loaded did not take part in the result and is described only when asked.
"""

from __future__ import annotations

import os
import platform
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import sketchsim

__all__ = [
    "ENV_KNOBS",
    "cpu_model",
    "versions",
    "torch_facts",
    "numba_facts",
    "machine_facts",
    "portable_argv",
    "package_digest",
    "portable_value",
]

#: Environment variables that change which kernels run or how many threads they use.
ENV_KNOBS = (
    "ATEN_CPU_CAPABILITY",
    "NUMBA_CPU_NAME",
    "NUMBA_CPU_FEATURES",
    "MKL_ENABLE_INSTRUCTIONS",
    "MKL_CBWR",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "NUMBA_NUM_THREADS",
    "OPENBLAS_CORETYPE",
)


def _dist(name: str) -> str | None:
    try:
        return version(name)
    except PackageNotFoundError:
        return None


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo`` on Linux, else what ``platform`` says)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("model name", "Model", "cpu model")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def versions(loaded_only: bool = True) -> dict:
    """Versions of everything that can change a result.

    Parameters
    ----------
    loaded_only : bool
        Name torch only when this process has imported it (a result that never
        touched torch does not depend on its version).
    """
    out = {
        "sketchsim": sketchsim.__version__,
        "python": platform.python_version(),
        "numpy": _dist("numpy"),
        "numba": _dist("numba"),
    }
    if not loaded_only or "torch" in sys.modules:
        out["torch"] = _dist("torch")
    return out


def torch_facts() -> dict:
    """torch's version, the CPU kernels it dispatches to, its threads and devices."""
    try:
        import torch
    except ImportError:
        return {"installed": False}
    facts = {
        "installed": True,
        "version": torch.__version__,
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "threads": torch.get_num_threads(),
        "interop_threads": torch.get_num_interop_threads(),
        "mkl": bool(torch.backends.mkl.is_available()),
        "cuda": bool(torch.cuda.is_available()),
    }
    if facts["cuda"]:
        facts["cuda_device"] = torch.cuda.get_device_name(0)
    return facts


def numba_facts(paths: bool = False) -> dict:
    """numba's version, the CPU it compiles for, its threads and its cache folder.

    ``paths``: include the cache folder's path (``sketchsim info``); result files
    record only where it came from, never a machine path.
    """
    from numba import config
    from numba.core.registry import cpu_target

    from sketchsim import numba_cache

    chosen = numba_cache.configure()
    codegen = cpu_target.target_context.codegen()
    facts = {
        "version": _dist("numba"),
        "target_cpu": codegen._get_host_cpu_name(),
        "threads": config.NUMBA_NUM_THREADS,
        "threading_layer": config.THREADING_LAYER,
        "cache_source": chosen.source,
        "cache_writable": chosen.path is not None and numba_cache.writable(chosen.path),
        "jit_disabled": bool(config.DISABLE_JIT),
    }
    if paths:
        facts["cache_dir"] = chosen.path
    return facts


def machine_facts(loaded_only: bool = True, paths: bool = False) -> dict:
    """CPU model and count, which kernels torch and numba chose, threads, the knobs set.

    Parameters
    ----------
    loaded_only : bool
        Describe torch and numba only when this process has imported them.
    paths : bool
        Include machine paths (numba's cache folder): for ``sketchsim info`` only.
    """
    facts = {
        "cpu": cpu_model(),
        "machine": platform.machine(),
        "system": platform.system(),
        "cpu_count": os.cpu_count(),
        "env": {k: os.environ[k] for k in ENV_KNOBS if k in os.environ},
    }
    if hasattr(os, "sched_getaffinity"):
        facts["usable_cpus"] = len(os.sched_getaffinity(0))
    if not loaded_only or "numba" in sys.modules:
        facts["numba"] = numba_facts(paths)
    if not loaded_only or "torch" in sys.modules:
        facts["torch"] = torch_facts()
    return facts


def _portable(arg: str, cwd: Path) -> str:
    if not os.path.isabs(arg):
        return arg
    path = Path(os.path.normpath(arg))
    try:
        return str(path.relative_to(cwd))
    except ValueError:
        return f"<outside>/{path.name}"


def portable_value(value, cwd: str | os.PathLike | None = None):
    """``value`` with every absolute path string made portable (as in :func:`portable_argv`).

    Walks lists, tuples and dicts; other values are returned as they are.
    """
    cwd = Path(os.getcwd() if cwd is None else cwd).resolve()
    if isinstance(value, str):
        return _portable(value, cwd)
    if isinstance(value, list | tuple):
        return [portable_value(v, cwd) for v in value]
    if isinstance(value, dict):
        return {k: portable_value(v, cwd) for k, v in value.items()}
    return value


def portable_argv(argv: list[str] | None = None, cwd: str | os.PathLike | None = None) -> list:
    """The command line with no absolute machine paths.

    The program becomes its name (``sketchsim``, ``ablation.py``); absolute paths
    under the working directory become relative to it, and others keep only
    their file name after ``<outside>/``, also in ``--flag=/path`` form.
    """
    argv = list(sys.argv if argv is None else argv)
    cwd = Path(os.getcwd() if cwd is None else cwd).resolve()
    out = []
    for i, arg in enumerate(argv):
        arg = str(arg)
        if i == 0:
            name = Path(arg).name
            out.append("sketchsim" if name in ("__main__.py", "sketchsim") else name)
        elif arg.startswith("-") and "=" in arg:
            flag, value = arg.split("=", 1)
            out.append(f"{flag}={_portable(value, cwd)}")
        else:
            out.append(_portable(arg, cwd))
    return out


_PACKAGE_DIGEST: str | None = None


def package_digest() -> str:
    """sha256 (hex) of every ``.py`` file of the installed sketchsim package, with its path.

    Keys anything that compiled or computed code may have left behind (generated
    engine modules, cluster state): another source never reuses it.
    """
    global _PACKAGE_DIGEST
    if _PACKAGE_DIGEST is None:
        import hashlib

        root = Path(sketchsim.__file__).resolve().parent
        h = hashlib.sha256()
        for path in sorted(root.rglob("*.py")):
            h.update(str(path.relative_to(root)).encode())
            h.update(path.read_bytes())
        _PACKAGE_DIGEST = h.hexdigest()
    return _PACKAGE_DIGEST
