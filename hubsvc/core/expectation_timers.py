"""The expectation timers: one heap entry per channel's next deadline, and the actions that fire.

The deadlines come from the channel's WAL (:class:`~hubsvc.governance.expectations.ExpectationTrack`
folds them), never from process memory, so hydrate re-arms them after a restart and a
deadline that passed while the hub was down fires at start. Each firing is recorded in
the channel's WAL as an ``ag2.channel.expectation_violated`` envelope (its audience is
what the action requires: everyone, the violators, or no one), which the fold reads
back: an expectation fires once per clock, across restarts too.

Cheap for many channels: a channel's entry is re-armed when a commit moves its next
deadline earlier (or when its entry comes due), so the heap holds about one entry per
channel with expectations, and one task sleeps until the earliest deadline.

Actions (docs/governance.md "Expectations"): ``audit`` (an audit row only), ``notify_channel``
(the envelope to everyone), ``warn`` (to the violators only), ``hide`` (to the violators,
who are left out of ListAgents, DiscoverAgents and the ``peers`` tool until they next post
in that channel or it ends), ``auto_close`` (to everyone, then the channel closes with reason
``expectation_<name>``). Every firing writes, in the same commit as its one envelope, one
``expectation_violated`` audit row per violator — or a single row for the channel (actor "")
when the expectation is channel-wide (``max_silence``: the channel went silent, no one
participant did).
"""

from __future__ import annotations

import asyncio
import heapq
import json
import logging
from collections.abc import Callable
from typing import Any

from hubsvc.core.admission import Admission, Batch
from hubsvc.core.channel import ChannelRuntime
from hubsvc.core.live_channels import LiveChannels
from hubsvc.core.util import Clock, iso_z
from hubsvc.governance.expectations import Violation, pending
from netkernel.envelope import EV_EXPECTATION_VIOLATED

log = logging.getLogger("agentnet.hub")

AUDIT_KIND = "expectation_violated"
"""The audit kind of a firing (one row per violator; subject: the channel)."""


def close_reason(name: str) -> str:
    """The close reason of a channel an expectation's ``auto_close`` ended."""
    return f"expectation_{name}"


class ExpectationTimers:
    """Arms each live channel's next expectation deadline and fires what comes due."""

    def __init__(
        self,
        channels: LiveChannels,
        admission: Admission,
        clock: Clock,
        spawn: Callable[[Any, str], asyncio.Task[Any]],
    ) -> None:
        self._channels = channels
        self._admission = admission
        self._clock = clock
        self._spawn = spawn
        self._heap: list[tuple[float, str]] = []
        self._armed: dict[str, float] = {}
        """channel id -> the deadline its live heap entry has (other entries of it are stale)."""
        self._wake = asyncio.Event()
        self._firing: set[asyncio.Task[Any]] = set()
        self._hidden_in: dict[str, frozenset[str]] = {}
        """channel id -> the agents a ``hide`` firing in it hides."""
        self._hidden: dict[str, set[str]] = {}
        """agent id -> the channels hiding it."""

    # -- arming -----------------------------------------------------------------------

    def settled(self, ch: ChannelRuntime) -> None:
        """A channel's committed state changed: update what it hides and arm its next deadline."""
        if ch.track is None:
            return
        live = not ch.is_terminal and self._channels.get(ch.channel_id) is ch
        self._set_hidden(ch.channel_id, frozenset(ch.track.hidden) if live else frozenset())
        if not live:
            if self._armed.pop(ch.channel_id, None) is not None:
                self._compact()
            return
        deadlines = [v.deadline for v in pending(ch.expectations, ch.facts())]
        if deadlines:
            self._arm(ch.channel_id, min(deadlines))

    def _compact(self) -> None:
        """Drop stale heap entries once they outnumber the live ones (ended channels leave theirs)."""
        if len(self._heap) > 2 * len(self._armed) + 1024:
            self._heap = [(deadline, channel_id) for channel_id, deadline in self._armed.items()]
            heapq.heapify(self._heap)

    def _arm(self, channel_id: str, deadline: float) -> None:
        armed = self._armed.get(channel_id)
        if armed is not None and armed <= deadline:
            return  # the earlier entry re-arms the channel when it comes due
        self._armed[channel_id] = deadline
        if not self._heap or deadline < self._heap[0][0]:
            self._wake.set()
        heapq.heappush(self._heap, (deadline, channel_id))

    async def run(self) -> None:
        """Sleep until the earliest deadline, fire what is due, repeat (runs until cancelled)."""
        while True:
            self._start_due()
            self._wake.clear()
            timeout = self._heap[0][0] - self._clock() if self._heap else None
            try:
                await asyncio.wait_for(self._wake.wait(), timeout)
            except TimeoutError:
                pass

    async def fire_due(self) -> None:
        """Fire every deadline passed by now and wait until every firing in flight is committed.

        The timer task does this on its own; a test that moved an injected clock forward
        calls it to see the outcome without waiting for the timer."""
        self._start_due()
        while self._firing:
            await asyncio.wait(list(self._firing))

    def _start_due(self) -> None:
        now = self._clock()
        while self._heap and self._heap[0][0] <= now:
            deadline, channel_id = heapq.heappop(self._heap)
            if self._armed.get(channel_id) != deadline:
                continue  # superseded by an earlier entry, or the channel ended
            del self._armed[channel_id]
            task = self._spawn(self._fire(channel_id), f"expectation-{channel_id}")
            self._firing.add(task)
            task.add_done_callback(self._firing.discard)

    # -- firing -----------------------------------------------------------------------

    async def _fire(self, channel_id: str) -> None:
        """Fire every expectation of the channel now due (under its lock), then re-arm it."""
        async with self._channels.locked(channel_id) as ch:
            if ch is None or ch.is_terminal or ch.track is None:
                return
            now = self._clock()
            due = [v for v in pending(ch.expectations, ch.facts()) if v.deadline <= now]
            if not due:
                self.settled(ch)  # woken early or the clock went back: arm the real deadline
                return
            batch = Batch()
            due.sort(key=lambda v: v.spec.action == "auto_close")  # records first, the close last
            for violation in due:
                self._stage(ch, violation, batch)
                if violation.spec.action == "auto_close" and not ch.is_terminal:
                    detail = {"expectation": violation.name, "expected_of": list(violation.expected_of)}
                    self._admission.end(ch, close_reason(violation.name), batch, detail=detail)
            fut = self._channels.commit(ch, batch)
        try:
            await fut
        except Exception:  # the channel is rebuilt from the store and re-armed from what it holds
            log.warning("recording the expectation firing of channel %s failed", channel_id, exc_info=True)

    def _stage(self, ch: ChannelRuntime, v: Violation, batch: Batch) -> None:
        """Stage one firing: its envelope (audience as the action requires) and its audit rows."""
        action = v.spec.action
        whom = list(v.expected_of)
        audience: list[str] | None
        if action in ("notify_channel", "auto_close") or (action in ("warn", "hide") and v.channel_wide):
            audience = None  # a channel-wide firing has no violators to address: the channel is told
        elif action in ("warn", "hide"):
            audience = whom
        else:  # audit: recorded in the WAL (so it fires once) but shown to no one
            audience = []
        names = ", ".join(f"{ch.spec.names.get(a, a)} ({a})" for a in whom) or "the channel"
        expected = f"{names}: {v.description}"
        if action == "hide":
            expected += "; hidden from discovery until posting in this channel again"
        data = {
            "expectation": v.name,
            "action": action,
            "seconds": v.spec.seconds,
            "expected_of": whom,
            "expected": expected,
            "since_seq": v.since_seq,
            "since": iso_z(v.since),
            "deadline": iso_z(v.deadline),
        }
        self._admission.post_as_hub(ch, EV_EXPECTATION_VIOLATED, data, audience, batch)
        detail = json.dumps(
            {
                "expectation": v.name,
                "action": action,
                "seconds": v.spec.seconds,
                "channel_type": ch.meta.type,
                "since_seq": v.since_seq,
                "deadline": data["deadline"],
            }
        )
        now = self._clock()
        if v.channel_wide:  # one row for the channel, with no violator (actor)
            batch.writes.audit.append((AUDIT_KIND, "", ch.channel_id, detail, now))
        else:
            batch.writes.audit.extend((AUDIT_KIND, agent_id, ch.channel_id, detail, now) for agent_id in whom)

    # -- hide -------------------------------------------------------------------------

    def hidden(self, agent_id: str) -> bool:
        """Whether a ``hide`` firing keeps ``agent_id`` out of discovery now."""
        return agent_id in self._hidden

    def _set_hidden(self, channel_id: str, agents: frozenset[str]) -> None:
        before = self._hidden_in.get(channel_id, frozenset())
        if before == agents:
            return
        for agent_id in before - agents:
            channels = self._hidden.get(agent_id)
            if channels is not None:
                channels.discard(channel_id)
                if not channels:
                    del self._hidden[agent_id]
        for agent_id in agents - before:
            self._hidden.setdefault(agent_id, set()).add(channel_id)
        if agents:
            self._hidden_in[channel_id] = agents
        else:
            self._hidden_in.pop(channel_id, None)
