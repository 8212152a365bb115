"""redis-py asyncio connections that pack commands with hiredis, as redis-py's synchronous client does.

redis-py's synchronous connections pack a command into the Redis protocol with hiredis's C packer when
hiredis is installed; its asyncio connections always pack in Python, argument by argument. A hub on
Redis sends most of its work as one ``EVALSHA`` with many keys and arguments per commit, so the Python
packer was about a tenth of a replica's CPU per text (bench/HISTORY.md, "Packing Redis commands").
The classes here are redis-py's own connection classes with redis-py's own hiredis serializer
(``redis.connection.HiredisRespSerializer``): the bytes sent are the same, refusals of an argument
type raise redis-py's ``DataError`` as before.

Used by the hub's Redis store (``hubsvc/storage/redis_connect.py``) and the knowledge service's
(``knowledgestore/redis_store.py``) for clients they build from a ``redis://``, ``rediss://`` or
``unix://`` URL. Needs the ``redis`` extra (redis-py and hiredis).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from redis.asyncio.connection import AbstractConnection, Connection, SSLConnection, UnixDomainSocketConnection
from redis.connection import HiredisRespSerializer
from redis.utils import HIREDIS_AVAILABLE

__all__ = ["HiredisPacking", "connection_class_for"]


class HiredisPacking(AbstractConnection):
    """A connection whose :meth:`pack_command` is hiredis's (mixed in before a redis-py connection class)."""

    _serializer = HiredisRespSerializer()

    def pack_command(self, *args: Any) -> list[bytes]:
        """The command in the Redis protocol, packed in C (same bytes as redis-py's Python packer)."""
        packed: list[bytes] = self._serializer.pack(*args)
        return packed


class _PackedConnection(HiredisPacking, Connection):
    """A TCP connection packing with hiredis."""


class _PackedSSLConnection(HiredisPacking, SSLConnection):
    """A TLS connection packing with hiredis."""


class _PackedUnixConnection(HiredisPacking, UnixDomainSocketConnection):
    """A Unix-socket connection packing with hiredis."""


_PACKED: dict[str, type[AbstractConnection]] = {
    "redis": _PackedConnection,
    "rediss": _PackedSSLConnection,
    "unix": _PackedUnixConnection,
}
_PLAIN: dict[str, type[AbstractConnection]] = {
    "redis": Connection,
    "rediss": SSLConnection,
    "unix": UnixDomainSocketConnection,
}


def connection_class_for(url: str) -> type[AbstractConnection]:
    """The ``connection_class`` for ``redis.asyncio.Redis.from_url(url, connection_class=…)``: the
    hiredis-packing class of the URL's scheme (redis-py's own class without hiredis; ``from_url`` itself
    refuses a scheme it does not know)."""
    by_scheme = _PACKED if HIREDIS_AVAILABLE else _PLAIN
    return by_scheme.get(urlsplit(url).scheme.lower(), Connection)
