"""What the hub tells its metrics: the small interface the core and the store writer call.

:class:`Recorder` does nothing; :class:`hubsvc.metrics.HubMetrics` records into Prometheus
when the hub serves metrics (``--metrics-port``). The core never imports Prometheus: it
calls these methods, once per admitted post or refusal, per committed group, per written
frame, per replayed WAL page and per applied feed read, never per envelope where a count
says the same. Gauges (queue depths, connected streams) are read at scrape time instead.
"""

from __future__ import annotations


class Recorder:
    """The hub's metric events; every method is a no-op here (metrics off)."""

    __slots__ = ()

    def admitted(self, posts: int, duplicates: int = 0) -> None:
        """``posts`` posts were admitted (``duplicates`` of them answered as idempotent retries)."""

    def refused(self, reason: str) -> None:
        """A post was refused with ``reason`` (a netkernel/errors.py reason string)."""

    def committed(self, store: str, bundles: int, seconds: float) -> None:
        """A group of ``bundles`` write bundles committed to ``store`` in one call of ``seconds``."""

    def commit_failed(self, store: str, cause: str) -> None:
        """A write bundle was not stored (``cause``: store_write_failed or lost_race)."""

    def delivered(self, envelopes: int) -> None:
        """One frame carrying ``envelopes`` deliveries was handed to a Connect stream."""

    def replayed(self, envelopes: int) -> None:
        """``envelopes`` were read from the WAL for a resuming stream."""

    def a2a_call(self, outcome: str) -> None:
        """An InvokeAgent call ended with ``outcome`` (its status, or the refusal's reason)."""

    def turn_failed(self, channel_type: str, action: str) -> None:
        """A member reported a failed turn (ReportTurnFailure) in a ``channel_type`` channel; the channel's
        policy took ``action`` ("close", "notify", or "none" for a channel that had ended)."""

    def redirected(self) -> None:
        """A Connect stream was asked to move to the replica holding most of its channels (a Redirect)."""

    def feed_applied(self, entries: int, lag_seconds: list[float]) -> None:
        """``entries`` change-feed entries of other replicas were applied, each ``lag_seconds``
        after its commit (entries without a commit time are left out of the lag)."""


NO_RECORDER = Recorder()
"""The recorder of a hub without metrics."""
