"""``sketchsim info``: the versions, CPU kernels, caches and devices of this machine,
the facts a bug report needs, as one dict (and its result file)."""

from __future__ import annotations

__all__ = ["facts", "run"]


def _cluster_facts() -> dict:
    """Whether the cluster extra imports, and its versions."""
    from importlib.util import find_spec

    from sketchsim.machine import versions

    out = {"importable": find_spec("distributed") is not None and find_spec("dask") is not None}
    if out["importable"]:
        from importlib.metadata import version

        out["dask"] = version("dask")
        out["distributed"] = version("distributed")
        out["bokeh"] = find_spec("bokeh") is not None
    return {**out, "sketchsim": versions()["sketchsim"]}


def facts() -> dict:
    """Versions (of every package, loaded or not), machine facts with paths, the engine
    cache folder and the cluster extra.  Imports torch and numba to ask them which
    kernels they chose."""
    from sketchsim.machine import machine_facts, versions
    from sketchsim.sketch.engine_cache import cache_dir

    return {
        "versions": versions(loaded_only=False),
        "machine": machine_facts(loaded_only=False, paths=True),
        "engine_cache_dir": str(engines) if (engines := cache_dir()) else None,
        "cluster": _cluster_facts(),
    }


def run(json_path=None) -> dict:
    """:func:`facts`, written to ``json_path`` (atomically) when given."""
    out = facts()
    if json_path:
        from sketchsim.results import write_json_atomic

        write_json_atomic(json_path, out)
    return out
