"""The tests' name for :mod:`localprocs.redis_server` (moved there so the benchmarks need not import the tests)."""

from localprocs.redis_server import (
    RedisCluster,
    RedisServer,
    RedisServerMissing,
    connected_replicas,
    free_port,
    start_redis_cluster,
    start_redis_replica,
    start_redis_server,
)

__all__ = [
    "RedisCluster",
    "RedisServer",
    "RedisServerMissing",
    "connected_replicas",
    "free_port",
    "start_redis_cluster",
    "start_redis_replica",
    "start_redis_server",
]
