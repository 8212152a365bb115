"""Real local processes for the tests, the benchmarks and the scripts: our services started as
subprocesses on free ports (:mod:`localprocs.procs`), redis-server instances and clusters
(:mod:`localprocs.redis_server`) and groups of hub replicas on one Redis
(:mod:`localprocs.replicas`). Not a test module, so ``bench/`` and ``scripts/`` depend on it
rather than on ``tests/``."""
