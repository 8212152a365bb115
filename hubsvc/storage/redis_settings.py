"""What the hub's command line knows about a Redis store without loading the Redis client (so a hub on
SQLite starts without importing redis): the URL forms ``--store`` takes, the default timeouts and the
error an unreachable Redis raises. The client itself is built in :mod:`hubsvc.storage.redis_connect`."""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass

DEFAULT_TIMEOUT = 5.0
"""Seconds a Redis connect or call may take before it fails (``--redis-timeout``)."""
DEFAULT_WAIT_TIMEOUT = 1.0
"""Seconds a commit waits for its Redis replicas' confirmation (``--redis-wait-timeout``)."""


class StoreUnreachable(ConnectionError):
    """Redis did not answer when the store was opened."""


CLUSTER_SCHEMES = ("redis+cluster", "rediss+cluster")


@dataclass(frozen=True)
class ClusterUrl:
    """A parsed ``redis+cluster://`` URL."""

    nodes: tuple[tuple[str, int], ...]
    """The seed nodes (host, port)."""
    tls: bool
    username: str | None
    password: str | None
    spread: bool = False
    """``?spread=1``: each channel's keys under the channel's own hash tag (docs/scale-out.md)."""


def is_cluster_url(url: str) -> bool:
    """Whether ``url`` names a Redis Cluster (``redis+cluster://`` / ``rediss+cluster://``)."""
    return url.partition("://")[0].lower() in CLUSTER_SCHEMES


def parse_cluster_url(url: str) -> ClusterUrl:
    """The seed nodes and options of a Cluster URL; ValueError saying what is wrong otherwise."""
    scheme, sep, rest = url.partition("://")
    example = "e.g. redis+cluster://10.0.0.1:7000,10.0.0.2:7000"
    if not sep or scheme.lower() not in CLUSTER_SCHEMES:
        raise ValueError(f"a Redis Cluster URL starts with redis+cluster:// or rediss+cluster://, not {url!r}")
    rest, _, query = rest.partition("?")
    location, _, path = rest.partition("/")
    if path.strip("/") not in ("", "0") or "#" in rest or "#" in query:
        raise ValueError(f"a Redis Cluster has only database 0: write no /DB or fragment, not {url!r} ({example})")
    spread = _spread(query, url)
    credentials, at, hosts = location.rpartition("@")
    username = password = None
    if at:
        user, colon, secret = credentials.partition(":")
        username = urllib.parse.unquote(user) or None
        password = urllib.parse.unquote(secret) if colon else None
    nodes: list[tuple[str, int]] = []
    for entry in hosts.split(","):
        host, colon, port = entry.strip().rpartition(":")
        host = host.strip("[]")
        if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"every Cluster node needs a host and a port in 1..65535, not {entry!r} ({example})")
        nodes.append((host, int(port)))
    return ClusterUrl(tuple(nodes), scheme.lower() == "rediss+cluster", username, password, spread)


def _spread(query: str, url: str) -> bool:
    """The ``spread`` option of a Cluster URL's query (the only option it takes)."""
    options = urllib.parse.parse_qs(query, keep_blank_values=True) if query else {}
    unknown = sorted(set(options) - {"spread"})
    if unknown or any(len(v) != 1 or v[0] not in ("0", "1") for v in options.values()):
        raise ValueError(
            "a Redis Cluster URL takes one option, spread=0 or spread=1 "
            f"(e.g. redis+cluster://10.0.0.1:7000?spread=1), not {'?' + query!r} in {url!r}"
        )
    return options.get("spread", ["0"])[0] == "1"
