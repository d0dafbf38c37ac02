"""The runtime every step shares: how a step is declared and cached (cache, source_graph, results, cache_audit),
run (runner; remote on a GPU work pool; sharding and dask_worker over a Dask cluster), and what it writes
(outputs, checkpoints), with the secrets it may read. The steps themselves are the modules of `tasks/`, except the
two that sharded scoring adds around every score step (`shards`, `merge-scores`, in sharding.py)."""
