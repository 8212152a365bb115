"""The Redis client a ``--store`` URL names: one server (``redis://``) or a Redis Cluster
(``redis+cluster://HOST:PORT[,HOST:PORT…]``).

A Cluster URL lists one or more of the Cluster's nodes (seeds): the client asks any of them for
the slot map and then talks to whichever node holds a key, following the Cluster when slots move
or a replica takes over a failed master. A Cluster has only database 0, so the URL has no
database path. ``rediss+cluster://`` uses TLS; ``user:password@`` before the first node
authenticates with every node. ``?spread=1`` spreads one hub's channels over the Cluster's
shards (each channel's keys under its own hash tag) instead of keeping the whole hub in one slot.
docs/scale-out.md "On a Redis Cluster" and "Channels spread over the shards".
"""

from __future__ import annotations

from typing import TypeAlias

import redis.asyncio as aioredis
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.maint_notifications import MaintNotificationsConfig

from hubsvc.storage.redis_settings import CLUSTER_SCHEMES, ClusterUrl, is_cluster_url, parse_cluster_url
from netkernel.redis_packing import connection_class_for

__all__ = ["CLUSTER_SCHEMES", "ClusterUrl", "RedisClient", "connect", "is_cluster_url", "parse_cluster_url"]

RedisClient: TypeAlias = "aioredis.Redis | RedisCluster"
"""What the store talks to: a client of one server, or of a Cluster."""

NO_MAINT_NOTIFICATIONS = MaintNotificationsConfig(enabled=False)
"""Maintenance notifications (a RESP3 push feature of managed Redis offerings) stay off: redis-py's
default ("auto") makes its pool skip the check that replaces a pooled connection the server has
closed, so after a Redis restart a write would take a dead connection and fail."""


def connect(url: str, timeout: float) -> RedisClient:
    """A client (not yet connected) for ``url`` whose connects and calls give up after ``timeout`` s."""
    if not is_cluster_url(url):
        return aioredis.Redis.from_url(
            url,
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
            maint_notifications_config=NO_MAINT_NOTIFICATIONS,
            connection_class=connection_class_for(url),  # commands packed with hiredis (netkernel/redis_packing.py)
        )
    parsed = parse_cluster_url(url)
    return RedisCluster(
        startup_nodes=[ClusterNode(host, port) for host, port in parsed.nodes],
        ssl=parsed.tls,
        username=parsed.username,
        password=parsed.password,
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        maint_notifications_config=NO_MAINT_NOTIFICATIONS,
    )
