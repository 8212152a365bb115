"""Inbox caps across replicas that divide the channels (docs/governance.md "Inbox caps").

Each replica counts what waits for an identity in the channels it holds (:class:`~hubsvc.governance.
inbox.Inboxes`). With the channels divided, an identity's channels may be held by several replicas, so
each publishes its counts of the capped identities through the store
(:class:`~hubsvc.storage.inbox_totals.InboxTotals`) every :data:`PUBLISH_SECONDS`, and before admitting
an envelope for capped recipients reads the other replicas' counts of them when its copy is older than
:data:`REFRESH_SECONDS`. A cap may therefore be passed by what other replicas admitted within that
window (at most about ``REFRESH_SECONDS + PUBLISH_SECONDS``), never by more.

A replica's published counts live as long as its liveness key (``--replica-ttl`` after its last publish):
the others stop counting them when they stop taking it for live, which is when its partitions move;
their next holder rebuilds those channels' counts from the WAL and publishes them within one ownership
round (``--replica-refresh``) and one publish.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable

from hubsvc.governance.inbox import Inboxes
from hubsvc.storage.inbox_totals import InboxTotals

log = logging.getLogger("agentnet.hub.inbox")

PUBLISH_SECONDS = 0.25
"""How often a replica publishes its counts of the capped identities that changed."""
REFRESH_SECONDS = 0.25
"""How old a replica's copy of the others' counts of a recipient may be when it admits an envelope."""
FORGET_SECONDS = 60.0
"""A recipient's copy of the others' counts not read again for this long is dropped (memory)."""


class SharedInboxes:
    """This replica's side of the inbox counts shared through ``totals``, for ``inboxes``."""

    def __init__(self, inboxes: Inboxes, totals: InboxTotals, keep_for: float) -> None:
        self._inboxes = inboxes
        self._totals = totals
        self._keep_for = keep_for
        """How long the published counts outlive the last publish (``--replica-ttl``: as long as this
        replica's liveness key, so a replica that died stops counting when the others see it dead)."""
        self._read_at: dict[str, float] = {}
        """Recipient → when the others' counts of it were last read (monotonic)."""
        self._published: dict[str, int] = {}
        """What the store holds of this replica's counts, as last published."""

    async def refresh(self, recipients: Iterable[str]) -> None:
        """Before admitting an envelope for ``recipients``: read the other replicas' counts of the capped
        ones whose copy is older than :data:`REFRESH_SECONDS` (UNAVAILABLE when the store does not
        answer: the envelope is refused, as with shared rate buckets)."""
        now = time.monotonic()
        stale = [
            agent_id
            for agent_id in dict.fromkeys(recipients)
            if now - self._read_at.get(agent_id, -REFRESH_SECONDS) >= REFRESH_SECONDS and self._inboxes.capped(agent_id)
        ]
        if not stale:
            return
        counts = await self._totals.elsewhere(stale)
        elsewhere = self._inboxes.elsewhere
        for agent_id, n in counts.items():
            self._read_at[agent_id] = now
            if n > 0:
                elsewhere[agent_id] = n
            else:
                elsewhere.pop(agent_id, None)

    async def publish(self) -> None:
        """Publish the counts of capped identities that changed since the last publish (all of them when
        the store's copy had lapsed), and keep the others alive."""
        current = self._inboxes.capped_totals()
        changed = {agent_id: n for agent_id, n in current.items() if self._published.get(agent_id) != n}
        changed.update({agent_id: 0 for agent_id in self._published if agent_id not in current})
        if not changed and not current:
            return
        kept = await self._totals.publish(changed, self._keep_for)
        self._published = current if kept or all(agent_id in changed for agent_id in current) else {}

    def forget_stale(self) -> None:
        """Drop the copies of recipients not read for :data:`FORGET_SECONDS`."""
        old = time.monotonic() - FORGET_SECONDS
        for agent_id in [a for a, at in self._read_at.items() if at < old]:
            del self._read_at[agent_id]
            self._inboxes.elsewhere.pop(agent_id, None)

    async def publish_loop(self) -> None:
        """Publish every :data:`PUBLISH_SECONDS` until cancelled (a failed publish is retried next time)."""
        while True:
            await asyncio.sleep(PUBLISH_SECONDS)
            try:
                await self.publish()
            except Exception as exc:
                log.warning("could not publish this replica's inbox counts (%r); retrying", exc)
            self.forget_stale()

    async def withdraw(self) -> None:
        """A clean stop: remove this replica's counts (its channels are handed over with them)."""
        try:
            await self._totals.withdraw()
        except Exception as exc:  # they lapse by themselves after keep_for
            log.warning("could not remove this replica's inbox counts (%r); they lapse by themselves", exc)
