"""The same commands on a Dask cluster (``pip install 'sketchsim[cluster]'``).

``client`` connects, tracks shard state and resumes; ``verify`` and
``transcript`` split their command into tasks whose merges give the
single-process result.  Nothing here imports Dask until a cluster is asked for.
"""
