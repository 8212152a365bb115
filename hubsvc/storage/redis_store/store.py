"""Redis implementation of :class:`HubStore` (``python -m hubsvc --store redis://HOST:PORT/DB``).

Same semantics as :mod:`hubsvc.storage.sqlite`: bundles are group-committed in submission
order, each atomically, a failing bundle fails alone and fences its channels
(:mod:`hubsvc.storage.group_commit`). docs/scale-out.md describes the deployment. This module is
the facade; the package's other modules do one job each (``__init__``'s docstring lists them).

A write is acknowledged only once Redis has replied. Whether Redis then survives its own
crash depends on its persistence settings: :meth:`RedisHubStore.open` reads ``appendonly`` /
``appendfsync`` and warns when the append-only file is off.
"""

from __future__ import annotations

from typing import Any

from redis.asyncio.cluster import RedisCluster

from hubsvc.storage.base import StoreUnconfirmed, Writes
from hubsvc.storage.faults import StoreFaults
from hubsvc.storage.group_commit import GroupCommitStore
from hubsvc.storage.redis_connect import RedisClient, connect, is_cluster_url, parse_cluster_url
from hubsvc.storage.redis_settings import DEFAULT_TIMEOUT, DEFAULT_WAIT_TIMEOUT
from hubsvc.storage.redis_store import scripts
from hubsvc.storage.redis_store.commit import CommitScript, RedisClock, commit_group
from hubsvc.storage.redis_store.failures import UNREACHABLE, StoreUnreachable
from hubsvc.storage.redis_store.feed import RedisChangeFeed
from hubsvc.storage.redis_store.history import RedisHistory
from hubsvc.storage.redis_store.inbox import RedisInboxTotals
from hubsvc.storage.redis_store.keys import DEFAULT_PREFIX, REPLICAS, KeyLayout
from hubsvc.storage.redis_store.liveness import RedisLiveness
from hubsvc.storage.redis_store.partitions import RedisPartitions
from hubsvc.storage.redis_store.plan import Plan
from hubsvc.storage.redis_store.rate import RedisRateBuckets
from hubsvc.storage.redis_store.reads import ChannelReads
from hubsvc.storage.redis_store.records import RecordReads
from hubsvc.storage.redis_store.spread import OUTBOX_SWEEP, SpreadWriter
from hubsvc.storage.redis_store.upkeep import Upkeep
from netkernel.partitions import MAX_PARTITIONS


class RedisHubStore(ChannelReads, RecordReads, RedisHistory, GroupCommitStore):
    """The hub's state in Redis (one server or a Cluster; :mod:`hubsvc.storage.redis_store.keys`
    describes the key layout).

    ``url_or_client`` is a Redis URL (``redis://``, or ``redis+cluster://`` for a Cluster: the
    store creates and closes its client, whose connects and calls give up after ``timeout``
    seconds) or a ``redis.asyncio.Redis`` / ``redis.asyncio.cluster.RedisCluster`` built with
    ``decode_responses=False`` (the caller keeps it and sets its timeouts; ``timeout`` then
    only sets the commit deadline). ``partitions`` (``--partitions``): the store divides its channels
    into partitions with leases (:attr:`partitions`); the count is recorded by the first store to
    open and a later one uses the recorded count. ``faults`` (tests
    only) is told at the store's fault points (:class:`~hubsvc.storage.faults.StoreFaults`); without
    it the store never looks for one.
    """

    kind = "redis"

    def __init__(
        self,
        url_or_client: str | RedisClient,
        *,
        prefix: str = DEFAULT_PREFIX,
        timeout: float = DEFAULT_TIMEOUT,
        wait_replicas: int = 0,
        wait_timeout: float = DEFAULT_WAIT_TIMEOUT,
        spread: bool = False,
        sweep_interval: float = OUTBOX_SWEEP,
        partitions: int | None = None,
        faults: StoreFaults | None = None,
    ) -> None:
        super().__init__()
        if "{" in prefix or "}" in prefix:
            raise ValueError(f"the key prefix may not contain braces (they delimit hash tags): {prefix!r}")
        if not 0 < timeout < float("inf"):
            raise ValueError(f"the Redis timeout must be a positive number of seconds, not {timeout!r}")
        if wait_replicas and isinstance(url_or_client, str) and is_cluster_url(url_or_client):
            raise ValueError(
                "--redis-wait-replicas is not supported with a Redis Cluster store yet: a Cluster's own "
                "replicas and failover protect its shards (docs/scale-out.md)"
            )
        if wait_replicas < 0:
            raise ValueError(f"the number of Redis replicas to wait for may not be negative, not {wait_replicas!r}")
        if wait_replicas and not 0 < wait_timeout < timeout:
            raise ValueError(
                f"the Redis replica wait ({wait_timeout!r} s) must be positive and shorter than the Redis "
                f"timeout ({timeout!r} s), or the commit call would time out first"
            )
        self._timeout = timeout
        self._wait_replicas = wait_replicas
        self._wait_ms = max(1, int(wait_timeout * 1000))
        if isinstance(url_or_client, str):
            spread = spread or (is_cluster_url(url_or_client) and parse_cluster_url(url_or_client).spread)
            self._client: RedisClient = connect(url_or_client, timeout)
            self._owns_client = True
        else:
            if _connection_kwargs(url_or_client).get("decode_responses"):
                raise ValueError("RedisHubStore needs a client with decode_responses=False (it stores bytes)")
            self._client, self._owns_client = url_or_client, False
        if spread and not isinstance(self._client, RedisCluster):
            raise ValueError("spread=1 spreads channels over a Redis Cluster's shards: use a redis+cluster:// URL")
        if partitions is not None and not 1 <= partitions <= MAX_PARTITIONS:
            raise ValueError(f"the partition count must be in [1, {MAX_PARTITIONS}], not {partitions!r}")
        self._wanted_partitions = partitions
        self.spread = spread
        """Each channel's keys carry the channel's own hash tag (spread over the Cluster's slots)."""
        self._keys = KeyLayout(prefix, cluster=isinstance(self._client, RedisCluster), spread=spread)
        self._script = CommitScript(self._client)
        self._clock = RedisClock(self._client, timeout, self._on_home_node)
        self.feed: RedisChangeFeed = RedisChangeFeed(
            self._client,
            self._keys.g + "feed",
            self._keys.g + "feed_seq",
            self._on_home_node if isinstance(self._client, RedisCluster) else None,
            notices=None if partitions is None else self._keys.g,
        )
        self.liveness: RedisLiveness = RedisLiveness(
            self._client,
            self._keys.g + "replica:",
            self.feed.replica_id,
            self._keys.g + REPLICAS,
            scripts.REPLICAS,
            self._keys.g + "replica_key",
            on_lapse=self.feed.lapsed,
            notices=None if partitions is None else self._keys.g,
        )
        self.partitions: RedisPartitions | None = (
            None if partitions is None else RedisPartitions(self._client, self._keys, self._clock, self.feed.replica_id)
        )
        """The partition leases (:mod:`hubsvc.storage.redis_store.partitions`) when opened with ``partitions``."""
        self.rate_buckets: RedisRateBuckets = RedisRateBuckets(self._client, self._keys)
        """The identities' rate buckets, shared by the replicas (:mod:`hubsvc.storage.redis_store.rate`)."""
        self.inbox_totals: RedisInboxTotals | None = (
            None if partitions is None else RedisInboxTotals(self._client, self._keys, self.feed.replica_id)
        )
        """The replicas' inbox counts when they divide the channels (:mod:`hubsvc.storage.redis_store.inbox`)."""
        self._scan_script = self._client.register_script(scripts.SCAN_TEXTS)
        self._purge_script = self._client.register_script(scripts.PURGE_CHANNEL)
        self._upkeep = Upkeep(self._client, self._keys, spread=spread, on_home_node=self._on_home_node, reads=self)
        self._spread_writer = (
            SpreadWriter(
                self._client,
                self._keys,
                self._plan,
                self._script,
                self._clock,
                sweep_interval=sweep_interval,
                faults=faults,
            )
            if spread
            else None
        )

    @property
    def timeout(self) -> float:
        """Seconds a Redis call may take (``--redis-timeout``); a commit's deadline is this after sending."""
        return self._timeout

    @property
    def prefix(self) -> str:
        """The key prefix of this store."""
        return self._keys.prefix

    @property
    def address(self) -> str:
        """``host:port/db`` of the server, or ``cluster host:port,…`` (no credentials), for messages."""
        if isinstance(self._client, RedisCluster):
            return "cluster " + ",".join(node.name for node in self._client.startup_nodes)
        kwargs = self._client.connection_pool.connection_kwargs
        if "path" in kwargs:
            return f"unix:{kwargs['path']}/{kwargs.get('db', 0)}"
        return f"{kwargs.get('host', '?')}:{kwargs.get('port', '?')}/{kwargs.get('db', 0)}"

    def location(self) -> tuple[str, str]:
        """("redis", HOST:PORT/DB): :attr:`address`, without credentials."""
        return ("redis", self.address)

    def channel_key(self, channel_id: str, name: str) -> str:
        """The key ``name`` (``wal``, ``last``, …) of one channel: its slot is the channel's shard."""
        return self._keys.channel(channel_id, name)

    def holder_key(self, kind: str, agent_id: str) -> str:
        """The set of live ``kind`` ("channels": those the identity initiated; "tasks": those it owns
        and runs) an identity holds, kept by the commit script (what the governance limits count)."""
        return self._keys.holder(kind, agent_id)

    def _on_home_node(self) -> dict[str, Any]:
        """Arguments that send a keyless command (TIME, CONFIG) where the commit script runs: on a
        Cluster, to the master of the hub's slot (asked again on every call: a failover moves it)."""
        if isinstance(self._client, RedisCluster):
            return {"target_nodes": self._client.get_node_from_key(self._keys.g + "feed")}
        return {}

    # -- lifecycle ---------------------------------------------------------------------

    async def open(self) -> None:
        """Check that Redis answers, warn if its persistence cannot keep acked writes, start the writer."""
        try:
            await self._client.ping()
        except UNREACHABLE as exc:
            raise StoreUnreachable(f"cannot reach Redis at {self.address}: {exc}") from exc
        await self._upkeep.check_layout()
        await self._upkeep.rebuild_holdings()
        await self._upkeep.index_replies()
        await self._upkeep.check_durability()
        await self._clock.measure()
        if self.partitions is not None and self._wanted_partitions is not None:
            await self.partitions.open(self._wanted_partitions)
        else:
            await self._upkeep.refuse_undivided()
        self._start_writer()
        if self._spread_writer is not None:
            await self._spread_writer.start()

    async def close(self) -> None:
        """Drain the queue, stop the writer and close the client if the store created it."""
        if self._spread_writer is not None:
            await self._spread_writer.stop_sweeping()
        await self._stop_writer()
        if self._spread_writer is not None:
            await self._spread_writer.finish()
        if self._owns_client:
            await self._client.aclose()

    async def hidden_agents(self) -> frozenset[str]:
        """What ``hide`` firings hide (``P{g}:hidden``); without partitions nothing is recorded there
        (every replica folds every channel), so nothing is read."""
        return await super().hidden_agents() if self.partitions is not None else frozenset()

    # -- writes ------------------------------------------------------------------------

    def _plan(self) -> Plan:
        """An empty commit plan on this store's keys."""
        leases = self.partitions
        if leases is None:
            return Plan(self._keys, self.feed, self._timeout)
        return Plan(self._keys, self.feed, self._timeout, leases.count, leases.until_us if self.spread else None)

    async def _apply(self, group: list[Writes]) -> None:
        """Write the bundles with one script call (:func:`~hubsvc.storage.redis_store.commit.commit_group`;
        :class:`StoreConflict`, nothing written, on a conflict), or with the spread layout a channel part
        and a global part each (:class:`~hubsvc.storage.redis_store.spread.SpreadWriter`)."""
        if self._spread_writer is not None:
            await self._spread_writer.apply(group)
            return
        plan = self._plan()
        for writes in group:
            plan.add(writes)
        if plan.empty:
            return
        await commit_group(plan, self._script, self._clock, wait_replicas=self._wait_replicas, wait_ms=self._wait_ms)

    async def complete_pending(self, *, immediately: bool = False) -> int:
        """(spread layout) Apply the global part of every bundle left in a channel's outbox; how many
        (:meth:`~hubsvc.storage.redis_store.spread.SpreadWriter.complete_pending`). 0 without spread."""
        if self._spread_writer is None:
            return 0
        return await self._spread_writer.complete_pending(immediately=immediately)

    def _retry_alone(self, exc: Exception) -> bool:
        """A conflict is one bundle's; a Redis that did not answer fails the whole group at once, and
        so does a group its replicas did not confirm (it is stored: writing it again would conflict)."""
        return not isinstance(exc, (*UNREACHABLE, StoreUnconfirmed))


def _connection_kwargs(client: RedisClient) -> dict[str, Any]:
    """The connection settings a client was built with."""
    if isinstance(client, RedisCluster):
        return dict(client.get_connection_kwargs())
    return dict(client.connection_pool.connection_kwargs)
