"""The hub's Prometheus metrics (served on ``--metrics-port``; docs/operations.md "Metrics").

:class:`HubMetrics` is the :class:`~hubsvc.recorder.Recorder` the core calls when metrics
are on: counters and histograms, each label child bound once up front so a call is one
locked add. Gauges (connected streams, queued deliveries and bytes, the store's write
queue, live channels, retention and the SQLite file's size) cost nothing between scrapes:
:class:`_HubGauges` reads them from the core when ``/metrics`` is scraped. Labels have bounded
values only (reason strings of netkernel/errors.py, store kinds, outcomes); never agent or channel ids.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from hubsvc.recorder import Recorder
from servicekit.metrics import RpcCounter

if TYPE_CHECKING:
    from hubsvc.core.hub import HubCore
    from hubsvc.core.retention import SweepStats
    from hubsvc.storage import HubStore

_COMMIT_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
"""Seconds: a group commit takes well under a millisecond on SQLite, more on a remote Redis."""
_GROUP_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2000)
"""Bundles per group (at most 2000, hubsvc/storage/group_commit.py MAX_GROUP)."""
_LAG_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
"""Seconds from another replica's commit until this replica applied it."""


class HubMetrics(Recorder):
    """The hub's metrics in their own registry (several hubs in one process never mix counts)."""

    __slots__ = (
        "_a2a",
        "_a2a_calls",
        "_commit_failures",
        "_commit_seconds",
        "_commits",
        "_delivered",
        "_duplicates",
        "_feed_applied",
        "_feed_lag",
        "_frames",
        "_group_bundles",
        "_new",
        "_redirects",
        "_refusals",
        "_refused",
        "_replayed",
        "_turn_failures",
        "registry",
        "rpc_counter",
    )

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        admitted = Counter(
            "agentnet_hub_posts_admitted",
            "Posts admitted (Connect Post / PostBatch and PostEnvelope); kind=duplicate: an idempotent retry "
            "answered with the envelope first written.",
            ["kind"],
            registry=r,
        )
        self._new = admitted.labels(kind="new")
        self._duplicates = admitted.labels(kind="duplicate")
        self._refusals = Counter(
            "agentnet_hub_posts_refused",
            "Posts refused, by the reason string of the refusal (docs/errors.md).",
            ["reason"],
            registry=r,
        )
        self._refused: dict[str, Counter] = {}
        self._commit_seconds = Histogram(
            "agentnet_hub_commit_seconds",
            "Seconds one group commit took in the store (every bundle queued at that moment, one transaction "
            "or script).",
            ["store"],
            buckets=_COMMIT_BUCKETS,
            registry=r,
        )
        self._group_bundles = Histogram(
            "agentnet_hub_commit_group_bundles",
            "Write bundles (a post or a run of posts, a registration, cursors, ...) per group commit.",
            ["store"],
            buckets=_GROUP_BUCKETS,
            registry=r,
        )
        self._commits: dict[str, tuple[Histogram, Histogram]] = {}
        self._commit_failures = Counter(
            "agentnet_hub_commit_failures",
            "Write bundles not stored: cause=store_write_failed (the store failed) or lost_race (another replica "
            "wrote the channel first; the post is admitted again).",
            ["store", "cause"],
            registry=r,
        )
        self._frames = Counter(
            "agentnet_hub_delivery_frames", "Connect frames carrying deliveries (a Delivery or a Batch).", registry=r
        )
        self._delivered = Counter(
            "agentnet_hub_delivered_envelopes", "Envelopes written to Connect streams (replays included).", registry=r
        )
        self._replayed = Counter(
            "agentnet_hub_replayed_envelopes",
            "Envelopes read from the WAL to replay to a resuming Connect stream.",
            registry=r,
        )
        self._a2a = Counter(
            "agentnet_hub_a2a_calls",
            "InvokeAgent calls by outcome: completed, input_required, failed (the callee's answer), or the "
            "reason of a call that ended with an error (e.g. TIMEOUT, RULE_DENIED, CANCELLED).",
            ["outcome"],
            registry=r,
        )
        self._a2a_calls: dict[str, Counter] = {}
        self._turn_failures = Counter(
            "agentnet_hub_turn_failures",
            "Failed turns members reported (ReportTurnFailure), by channel type and what the channel's "
            "on_turn_failed policy did: close, notify, or none (the channel had ended).",
            ["channel_type", "action"],
            registry=r,
        )
        self._redirects = Counter(
            "agentnet_hub_stream_redirects",
            "Connect streams this replica asked to move to the replica holding most of their channels "
            '(Redirect frames; docs/scale-out.md "Session steering").',
            registry=r,
        )
        self._feed_applied = Counter(
            "agentnet_hub_feed_entries_applied",
            "Change-feed entries of other hub replicas applied here (a shared Redis store).",
            registry=r,
        )
        self._feed_lag = Histogram(
            "agentnet_hub_feed_lag_seconds",
            "Seconds from another replica's commit to this replica applying it (wall clocks of two hosts: keep "
            "them synchronised).",
            buckets=_LAG_BUCKETS,
            registry=r,
        )

        self.rpc_counter = RpcCounter(
            Counter(
                "agentnet_hub_rpcs",
                "Calls of the hub's RPCs (HubService, OperatorService, health, reflection) by full method name, "
                "counted as each starts (a Connect stream once).",
                ["method"],
                registry=r,
            )
        )
        """The server interceptor that counts every call (:class:`servicekit.metrics.RpcCounter`)."""

    def observe(self, core: HubCore) -> None:
        """Add the gauges read from ``core`` at scrape time."""
        self.registry.register(_HubGauges(core))

    # -- Recorder -----------------------------------------------------------------------

    def admitted(self, posts: int, duplicates: int = 0) -> None:
        """Count admitted posts."""
        if posts > duplicates:
            self._new.inc(posts - duplicates)
        if duplicates:
            self._duplicates.inc(duplicates)

    def refused(self, reason: str) -> None:
        """Count a refused post by reason."""
        child = self._refused.get(reason)
        if child is None:
            child = self._refused[reason] = self._refusals.labels(reason=reason)
        child.inc()

    def committed(self, store: str, bundles: int, seconds: float) -> None:
        """Observe one group commit."""
        pair = self._commits.get(store)
        if pair is None:
            pair = self._commits[store] = (
                self._commit_seconds.labels(store=store),
                self._group_bundles.labels(store=store),
            )
        pair[0].observe(seconds)
        pair[1].observe(bundles)

    def commit_failed(self, store: str, cause: str) -> None:
        """Count a bundle that was not stored."""
        self._commit_failures.labels(store=store, cause=cause).inc()

    def delivered(self, envelopes: int) -> None:
        """Count one delivery frame and its envelopes."""
        self._frames.inc()
        self._delivered.inc(envelopes)

    def replayed(self, envelopes: int) -> None:
        """Count envelopes read from the WAL for a replay."""
        self._replayed.inc(envelopes)

    def a2a_call(self, outcome: str) -> None:
        """Count an ended InvokeAgent call."""
        child = self._a2a_calls.get(outcome)
        if child is None:
            child = self._a2a_calls[outcome] = self._a2a.labels(outcome=outcome)
        child.inc()

    def turn_failed(self, channel_type: str, action: str) -> None:
        """Count a reported turn failure (channel types and actions are bounded sets)."""
        self._turn_failures.labels(channel_type=channel_type, action=action).inc()

    def redirected(self) -> None:
        """Count a Redirect sent to a Connect stream."""
        self._redirects.inc()

    def feed_applied(self, entries: int, lag_seconds: list[float]) -> None:
        """Count applied feed entries and observe their lag."""
        self._feed_applied.inc(entries)
        for lag in lag_seconds:
            self._feed_lag.observe(max(0.0, lag))


def partition_metrics(core: HubCore) -> Iterator[Metric]:
    """Per partition this replica holds: its live channels and the epoch of its lease (a new epoch is a
    move). One sample per held partition, so at most the store's partition count per replica."""
    ownership = core.placement.ownership
    if ownership is None:
        return
    held = ownership.held
    channels = dict.fromkeys(held, 0)
    for ch in core.channels.live():
        partition = core.placement.partition(ch.channel_id)
        if partition in channels:
            channels[partition] += 1
    live = GaugeMetricFamily(
        "agentnet_hub_partition_live_channels",
        "Live channels of each partition this replica holds.",
        labels=["partition"],
    )
    epochs = GaugeMetricFamily(
        "agentnet_hub_partition_epoch",
        "The lease epoch this replica holds each partition with (it grows each time the partition moves).",
        labels=["partition"],
    )
    for partition, epoch in sorted(held.items()):
        live.add_metric([str(partition)], channels[partition])
        epochs.add_metric([str(partition)], epoch)
    yield live
    yield epochs


def retention_metrics(stats: SweepStats, store: HubStore) -> Iterator[Metric]:
    """Retention's counts since start, its last sweep, and the SQLite file's size (one ``stat`` each)."""
    yield CounterMetricFamily(
        "agentnet_hub_retention_purged_channels",
        "Ended channels purged by retention on this hub.",
        value=stats.purged_channels,
    )
    yield CounterMetricFamily(
        "agentnet_hub_retention_purged_envelopes",
        "WAL rows retention deleted on this hub.",
        value=stats.purged_envelopes,
    )
    yield CounterMetricFamily(
        "agentnet_hub_retention_purged_audit_records",
        "Audit records retention deleted on this hub (--retain-audit).",
        value=stats.purged_audit,
    )
    yield GaugeMetricFamily(
        "agentnet_hub_retention_last_sweep_timestamp_seconds",
        "Unix time this hub's last retention sweep finished (0: none yet).",
        value=stats.last_sweep_at,
    )
    kind, path = store.location()
    if kind == "sqlite" and path not in ("", ":memory:"):
        size = sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))
        yield GaugeMetricFamily("agentnet_hub_store_bytes", "Bytes of the SQLite file and its -wal file.", value=size)


class _HubGauges(Collector):
    """The hub's gauges, read from the core when scraped (on the hub's event loop)."""

    def __init__(self, core: HubCore) -> None:
        self._core = core

    def collect(self) -> Iterator[Metric]:
        """One sample of each gauge."""
        core = self._core
        streams, envelopes, queued, largest = core.sessions.queue_stats()
        yield GaugeMetricFamily("agentnet_hub_connected_streams", "Connect streams open on this hub.", value=streams)
        yield GaugeMetricFamily(
            "agentnet_hub_session_queued_envelopes",
            "Deliveries queued for Connect streams and not yet written to them (all streams).",
            value=envelopes,
        )
        yield GaugeMetricFamily(
            "agentnet_hub_session_queued_bytes",
            "Bytes queued for Connect streams and not yet written to them (all streams; each stream is bounded by "
            "--max-stream-buffer-bytes).",
            value=queued,
        )
        yield GaugeMetricFamily(
            "agentnet_hub_session_queued_bytes_max",
            "Bytes queued for the most backed-up Connect stream (a slow consumer nears --max-stream-buffer-bytes).",
            value=largest,
        )
        store = core.store
        writes = GaugeMetricFamily(
            "agentnet_hub_store_write_queue_bundles",
            "Write bundles waiting for the store's writer (not yet in a group commit).",
            labels=["store"],
        )
        writes.add_metric([store.kind], getattr(store, "write_queue", 0))
        yield writes
        yield GaugeMetricFamily(
            "agentnet_hub_live_channels",
            "Channels live in this hub's memory.",
            value=sum(1 for _ in core.channels.live()),
        )
        ownership = core.placement.ownership
        if ownership is not None:  # the channels are divided among replicas
            yield GaugeMetricFamily(
                "agentnet_hub_partitions_held", "Partitions this replica holds.", value=len(ownership.held)
            )
            yield GaugeMetricFamily(
                "agentnet_hub_followed_channels",
                "Live channels another replica holds that this one delivers to its members.",
                value=len(core.channels.followers.channels),
            )
            yield from partition_metrics(core)
        yield from retention_metrics(core.retention.stats, core.store)
