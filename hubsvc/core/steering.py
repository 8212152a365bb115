"""Session steering: ask a Connect stream to move to the replica that holds most of its channels.

With the channels divided among replicas (docs/scale-out.md "Session steering"), a stream on one
replica whose channels another replica holds costs a forward for each post it sends and a remote
delivery (a notice, a WAL read) for each envelope it receives. When envelopes of a channel held
elsewhere reach a stream whose client follows redirects (``Hello.follows_redirects``), or it posts
into such a channel, this replica counts where the agent's live channels are held (one store read
of the agent's channels, at most once per ``--steer-interval`` seconds per stream) and, when one
other replica holds more of them than this one does, sends the stream a ``Redirect`` naming that
replica's advertised address. The
client reconnects there and resumes from its cursors; a client that does not follow redirects is
never asked, and its stream works where it is.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from hubsvc.core.delivery import Session
from hubsvc.core.placement import Placement
from hubsvc.core.util import Clock
from hubsvc.recorder import Recorder
from hubsvc.storage import HubStore

log = logging.getLogger("agentnet.hub.partitions")

RECONSIDER_AFTER = 1.0
"""Seconds before a stream is considered again when its channels could not all be counted."""
COUNTED_CHANNELS = 1000
"""Most of an agent's channels (the newest) counted when choosing where its stream belongs."""


def best_replica(here: int, elsewhere: Counter[str]) -> str | None:
    """The address of the replica holding the most of an agent's live channels when that is more than
    ``here`` (the number this replica holds); None when this replica holds at least as many as any
    other (ties stay: a stream moves only to a replica that holds strictly more)."""
    if not elsewhere:
        return None
    address, count = max(elsewhere.items(), key=lambda item: (item[1], item[0]))
    return address if count > here else None


class SessionSteering:
    """Sends Redirect frames to the streams whose channels another replica mostly holds."""

    def __init__(
        self,
        placement: Placement,
        store: HubStore,
        clock: Clock,
        interval: float,
        spawn: Callable[[Any, str], asyncio.Task[Any]],
        recorder: Recorder,
    ) -> None:
        self._placement = placement
        self._store = store
        self._clock = clock
        self._interval = interval
        """Seconds at least between two considerations of one stream."""
        self._spawn = spawn
        self._recorder = recorder

    def used_elsewhere(self, sessions: Iterable[Session]) -> None:
        """``sessions`` were offered envelopes of a channel another replica holds, or posted into one:
        consider moving those whose clients follow redirects and were not considered in the last interval."""
        now = self._clock()
        for session in sessions:
            if session.follows_redirects and now >= session.steer_after and not session.closed:
                session.steer_after = now + self._interval
                self._spawn(self._consider(session), f"steer-{session.agent_id}")

    async def _consider(self, session: Session) -> None:
        """Count where the agent's live channels are held; redirect the stream if another replica
        holds more of them."""
        rows = await self._store.list_channels_for(session.agent_id, include_ended=False, limit=COUNTED_CHANNELS)
        live = [row.channel_id for _, row in rows if row.live]
        here, elsewhere, unknown = self.where_held(live)
        if unknown:  # a holder the lease map read last did not name (it moved since): read it again
            await self._placement.read()
            here, elsewhere, unknown = self.where_held(live)
        if unknown or not (here or elsewhere):
            # The channel that drew this is not counted yet (its member index or holder still on the
            # way): consider the stream again at its next envelope from elsewhere, after a short pause.
            session.steer_after = min(session.steer_after, self._clock() + RECONSIDER_AFTER)
        address = best_replica(here, elsewhere)
        if address is None or session.closed:
            return
        reason = f"{elsewhere[address]} of your {here + sum(elsewhere.values())} live channels are held at {address}"
        session.redirect(address, reason)
        self._recorder.redirected()
        log.debug("asked the stream of %s to move to %s (%s)", session.agent_id, address, reason)

    def where_held(self, channel_ids: Iterable[str]) -> tuple[int, Counter[str], int]:
        """How many of ``channel_ids`` this replica holds, how many each other replica holds by its
        address, and how many have a holder the lease map as last read does not name (not counted)."""
        here, elsewhere, unknown = 0, Counter[str](), 0
        for channel_id in channel_ids:
            if self._placement.holds(channel_id):
                here += 1
            elif (address := self._placement.owner_address(channel_id)) is not None:
                elsewhere[address] += 1
            else:
                unknown += 1
        return here, elsewhere, unknown
