"""Library runs: every measuring command as a plan, a ``run`` and a result object.

Each module here owns one command's loop (over protocols, cells, widths or
seeds), its checkpoint file (:class:`sketchsim.checkpoint.Checkpoint`) and its
choice between this process and a Dask cluster (:mod:`sketchsim.runs.clusters`);
:mod:`sketchsim.api` exposes them and the CLI only parses, calls and renders.
"""
