"""What waits for capped identities on each replica, shared by the replicas of one store that divide
the channels (:class:`InboxTotals`); the Redis store's is
:class:`~hubsvc.storage.redis_store.inbox.RedisInboxTotals`, and what uses it is
:class:`~hubsvc.governance.inbox_share.SharedInboxes`."""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence


class InboxTotals(abc.ABC):
    """Each replica's count of what waits for an identity's answer in the channels it holds
    (docs/governance.md "Inbox caps"), published for the others, so an inbox cap counts the channels
    every replica holds. A replica's published counts lapse a moment after it stops publishing them."""

    @abc.abstractmethod
    async def publish(self, changed: Mapping[str, int], keep_for: float) -> bool:
        """Set this replica's counts of ``changed`` (agent id → pending; 0 removes it) and keep all of
        this replica's counts for ``keep_for`` more seconds; returns False when they had lapsed before
        this call (the caller publishes every count again). Raises
        :class:`~netkernel.errors.Unavailable` when the store did not answer."""

    @abc.abstractmethod
    async def elsewhere(self, agent_ids: Sequence[str]) -> dict[str, int]:
        """For each of ``agent_ids``, the sum of the other live replicas' published counts."""

    @abc.abstractmethod
    async def withdraw(self) -> None:
        """Remove this replica's counts (a clean stop: its channels are handed over)."""
