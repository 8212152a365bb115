"""Where the Redis store keeps what: the key layout (:class:`KeyLayout`).

``P`` is the key prefix, default ``agentnet:hub:`` (``{P}`` on a Cluster, below). Every key of
one channel carries the tag ``{c:<channel_id>}``:

* ``P{c:<id>}:wal`` — the WAL, a Stream whose entry ids are ``<seq>-0`` (``XRANGE`` reads by
  seq; a later step ``XREAD``\\s it for cross-replica delivery); field ``d`` = envelope bytes.
* ``P{c:<id>}:texts`` — EV_TEXT rows only, a Stream with the same ids: ``s`` sender,
  ``c`` created_at, ``x`` text (what SearchContext / QuoteContext scan).
* ``P{c:<id>}:last`` — the last committed seq; ``P{c:<id>}:idem`` — hash
  ``<sender>\\0<key>`` → seq; ``P{c:<id>}:replies`` — hash ``<sender>\\0<causation id>`` →
  the seq of that sender's first envelope answering that envelope (FindReply);
  ``P{c:<id>}:meta`` — hash live / record / seed / order; ``P{c:<id>}:members`` — set of agent ids.

Global records carry the hash tag ``{g}``: ``P{g}:agents`` (hash id → packed row),
``P{g}:agent_names`` / ``P{g}:agent_name_of`` (the live-name index, unique like SQLite's),
``P{g}:channels:live`` (set), ``P{g}:channel_order`` (counter),
``P{g}:member_channels:<agent>`` (zset channel → creation order), ``P{g}:envelopes``
(hash envelope id → channel, seq), ``P{g}:cursors:<agent>`` (hash channel → seq),
``P{g}:tasks`` / ``P{g}:task_meta`` / ``P{g}:tasks:live``, ``P{g}:checkpoints`` (hash task id →
packed owner, saved-at time, state), ``P{g}:observed:<agent>`` (hash ``<capability>\\0<outcome>`` →
count, ``…\\0latency``, ``…\\0at``), ``P{g}:exec`` /
``P{g}:exec:meta`` / ``P{g}:exec:all`` / ``P{g}:exec:root:<root>`` /
``P{g}:exec:roots_of:<agent>`` / ``P{g}:exec:running``, A2A call tokens ``P{g}:call_tokens``
(hash secret hash → execution, agent, expiry) with ``P{g}:call_tokens:<execution>`` (set of
its hashes, deleted with the execution's end), and ``P{g}:audit`` (hash id →
packed record) with ``P{g}:audit_seq`` (INCR) and id indexes ``P{g}:audit:all``,
``P{g}:audit:kind:<kind>``, ``P{g}:audit:subject:<subject>``; ``P{g}:feed`` with
``P{g}:feed_seq`` is the change feed the replicas follow (:mod:`hubsvc.storage.redis_store.feed`);
``P{g}:sessions`` (hash agent id → session id) names each identity's current Connect stream;
``P{g}:hidden`` (hash live channel id → the agents a ``hide`` firing in it hides, with divided channels);
``P{g}:inbox:<replica id>`` (hash agent id → what waits for it in the channels that replica holds, with a
time to live; with divided channels, :mod:`hubsvc.storage.redis_store.inbox`);
``P{g}:holds:channels:<agent>`` / ``P{g}:holds:tasks:<agent>`` (sets) are the live channels an
identity initiated and the running tasks it owns, kept by the commit script from the rows it
writes (what ``max_open_channels`` / ``max_running_tasks`` count), and ``P{g}:holdings`` marks
them complete (a store written before them gets them rebuilt at open).

Replicas and partitions (docs/scale-out.md, "Partitions and ownership"): ``P{g}:replica:<id>``
(the replica's liveness key, value = its advertised gRPC address, with a time to live) and
``P{g}:replicas`` (set: the directory of replica ids, :mod:`hubsvc.storage.redis_store.liveness`);
``P{g}:partitions`` (the partition count, written once by the first store that opens with
partitions), ``P{g}:lease:<partition>`` (the lease: ``<replica id>\\0<epoch>`` with a time to
live, ``PX``) and ``P{g}:lease_epochs`` (hash partition → the last epoch given, never reset);
:mod:`hubsvc.storage.redis_store.partitions` writes them.

On a Redis Cluster (``redis+cluster://`` URL, :mod:`hubsvc.storage.redis_connect`) the whole
prefix becomes the hash tag (``{P}`` in front of every key, e.g. ``{agentnet:hub:}{c:<id>}:wal``),
so every key of the hub is in one slot and the one atomic commit script runs on that slot's master.

With ``?spread=1`` on a Cluster URL each channel's keys carry the channel's own hash tag,
``{Pc:<id>}:wal`` etc., plus ``{Pc:<id>}:outbox`` (bundle id → the bundle's global part, while
pending), ``{Pc:<id>}:lastb`` (last bundle written) and, with partitions, ``{Pc:<id>}:fence`` (the
epoch of the partition's last owner that wrote to the channel); the global keys keep ``{P}{g}:`` and add
``channels:order`` (creation order), ``outbox:done`` and ``holds:reserved`` (open-channel slots
reserved before their channel part); :mod:`hubsvc.storage.redis_store.spread` writes them.
"""

from __future__ import annotations

DEFAULT_PREFIX = "agentnet:hub:"
HOLDINGS_MARK = "holdings"
"""Global key (``P{g}:holdings``) set once the holder sets (``P{g}:holds:…``) hold every live channel
and task: a store written before they existed has them rebuilt when a store opens it."""
REPLIES_MARK = "replies_indexed"
"""Global key (``P{g}:replies_indexed``) set once every channel's replies hash (FindReply) holds the
replies of its whole WAL: a store written before the hashes existed has them filled when a store
opens it (one pass over every WAL, once)."""
PARTITIONS = "partitions"
"""Global key (``P{g}:partitions``): the store's partition count, written once when it is created."""
LEASE_EPOCHS = "lease_epochs"
"""Global hash (``P{g}:lease_epochs``): partition → the last fencing epoch given (never reset)."""
REPLICAS = "replicas"
"""Global set (``P{g}:replicas``): the ids of the replicas that beat (the directory; lapsed ones are pruned)."""
RESERVED = "holds:reserved"
"""Global zset (``P{g}:holds:reserved``, spread layout): channel id → until when its holder-set entry
counts although the channel is not live yet (its channel part is on its way)."""


def lease_value(replica_id: str, epoch: int) -> str:
    """What a partition's lease key holds while ``replica_id`` holds it with ``epoch``."""
    return f"{replica_id}\0{epoch}"


class KeyLayout:
    """The names of one store's keys (see the module docstring).

    ``raw_prefix`` is the prefix as configured (no braces: the store checks); ``cluster``: the keys
    live on a Redis Cluster (the prefix becomes every key's hash tag); ``spread``: each channel's
    keys carry the channel's own hash tag instead (spread layout)."""

    def __init__(self, raw_prefix: str, *, cluster: bool, spread: bool) -> None:
        self.raw_prefix = raw_prefix
        """The prefix as configured (no hash tag)."""
        self.spread = spread
        """Each channel's keys carry the channel's own hash tag (spread over the Cluster's slots)."""
        # On a Cluster the prefix is the hash tag of every key: one slot, so one atomic script. With
        # spread, the global keys keep that tag and each channel's keys get the channel's own.
        self.prefix = f"{{{raw_prefix}}}" if cluster else raw_prefix
        """The prefix every key starts with (``{P}`` on a Cluster)."""
        self.g = self.prefix + "{g}:"
        """The start of every global key (``P{g}:``)."""

    def channel(self, channel_id: str, name: str) -> str:
        """A key of one channel (hash tag ``{c:<id>}``; ``{<prefix>c:<id>}`` with the spread layout)."""
        if self.spread:
            return f"{{{self.raw_prefix}c:{channel_id}}}:{name}"
        return f"{self.prefix}{{c:{channel_id}}}:{name}"

    def lease(self, partition: int) -> str:
        """The lease key of one partition (``P{g}:lease:<partition>``; value ``<replica id>\\0<epoch>``)."""
        return f"{self.g}lease:{partition}"

    def holder(self, kind: str, agent_id: str) -> str:
        """The set of live ``kind`` ("channels": those the identity initiated; "tasks": those it owns
        and runs) an identity holds, kept by the commit script (what the governance limits count)."""
        return f"{self.g}holds:{kind}:{agent_id}"

    def rate_bucket(self, agent_id: str) -> str:
        """An identity's posts-per-second bucket shared by the replicas (``lua/rate.lua``)."""
        return f"{self.g}rate:{agent_id}"

    def outbox_pattern(self) -> str:
        """(spread) The SCAN MATCH pattern of every channel's outbox."""
        return "{" + glob_escape(self.raw_prefix) + "c:*}:outbox"

    def channel_id_of_meta(self, key: str) -> str | None:
        """(single-slot layout) The channel whose ``meta`` key ``key`` is, or None (another key)."""
        head, tail = f"{self.prefix}{{c:", "}:meta"
        if key.startswith(head) and key.endswith(tail):
            return key[len(head) : -len(tail)]
        return None

    def meta_pattern(self) -> str:
        """(single-slot layout) The SCAN MATCH pattern of every channel's ``meta`` key."""
        return f"{glob_escape(self.prefix)}{{c:*}}:meta"


def glob_escape(text: str) -> str:
    """``text`` matched literally in a Redis glob pattern (SCAN MATCH)."""
    return "".join("\\" + ch if ch in "*?[]\\" else ch for ch in text)
