"""The pending turns of an agent's channels other replicas hold, asked of those replicas
(docs/scale-out.md "Channels divided among the replicas").

A replica folds only the channels it holds, so the turns a followed channel awaits are known to
its holder alone. :class:`HeldTurns` asks each holder the lease map names, with
``ReplicaService.PendingTurns``, for the agent's channels it holds — all holders at once, each
within :data:`ASK_WAIT` seconds — for the Welcome of a Connect and for ListPendingTurns. A
holder that does not answer in time (or no longer holds the channel, or none does while a
partition moves) is left out and the answer marked incomplete: the Welcome then sets
``pending_turns_truncated``, so the client lists its turns again with ListPendingTurns, which
answers UNAVAILABLE (retry) while a holder stays silent.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from agentnet.v1 import connect_pb2

from hubsvc.core.placement import Placement
from hubsvc.core.sessions import MAX_PENDING_TURNS
from hubsvc.replica_peers import ReplicaPeers
from netkernel.errors import AgentNetError

log = logging.getLogger("agentnet.hub.replicas")

ASK_WAIT = 2.0
"""Seconds the asking replica waits for the holders' answers (a Connect's Welcome waits for them)."""


class HeldTurns:
    """Asks the holders of an agent's followed channels for the turns they await from it."""

    def __init__(self, placement: Placement, peers: ReplicaPeers, followed_of: Callable[[str], list[str]]) -> None:
        self._placement = placement
        self._peers = peers
        self._followed_of = followed_of

    async def __call__(self, agent_id: str) -> tuple[list[connect_pb2.PendingTurn], bool]:
        """The turns other replicas' channels await from ``agent_id``, and whether every holder answered."""
        by_holder: dict[str, list[str]] = {}
        complete = True
        for channel_id in self._followed_of(agent_id):
            if self._placement.holds(channel_id):
                continue  # taken over meanwhile: listed from this replica's own fold
            address = self._placement.owner_address(channel_id)
            if address is None:
                complete = False  # its partition is moving: no one to ask now
                continue
            by_holder.setdefault(address, []).append(channel_id)
        asks = [
            self._ask(address, agent_id, ids[start : start + MAX_PENDING_TURNS])
            for address, ids in by_holder.items()
            for start in range(0, len(ids), MAX_PENDING_TURNS)
        ]
        turns: list[connect_pb2.PendingTurn] = []
        for answer in await asyncio.gather(*asks):
            if answer is None:
                complete = False
            else:
                turns += answer
        return turns, complete

    async def _ask(self, address: str, agent_id: str, channel_ids: list[str]) -> list[connect_pb2.PendingTurn] | None:
        """The answer of the replica at ``address`` (None when it gave none in time)."""
        try:
            return await self._peers.pending_turns(address, agent_id, channel_ids, ASK_WAIT)
        except AgentNetError as err:
            log.warning("pending turns of %s not listed: the replica at %s did not answer: %s", agent_id, address, err)
            return None
