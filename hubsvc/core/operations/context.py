"""Context operations: search past text, and quote a speaker's latest words, across the caller's channels."""

from __future__ import annotations

from agentnet.v1 import envelope_pb2, hub_pb2

from hubsvc.core.hub import HubCore
from netkernel.errors import InvalidArgument
from netkernel.wire import envelope_from_wire, wire_readable_by


class ContextOps:
    """SearchContext and QuoteContext."""

    def __init__(self, core: HubCore) -> None:
        self.core = core

    async def search_context(
        self, caller: str, query: str, channel_id: str, limit: int
    ) -> list[hub_pb2.ContextExcerpt]:
        """Visible EV_TEXT containing ``query`` (case-insensitive), newest first."""
        if not query:
            raise InvalidArgument("query is empty; give the text to search for.")
        if limit < 0 or limit > 1000:
            raise InvalidArgument("limit must be between 1 and 1000 (0 = 10).")
        limit = limit or 10
        channels = await self._channels_of(caller, channel_id)
        out = []
        for data in await self.core.store.search_text(channels, query, limit * 4):
            wire = envelope_pb2.Envelope.FromString(data)
            if wire_readable_by(wire, caller):
                out.append(self._excerpt(wire))
        out.sort(key=lambda e: e.created_at, reverse=True)
        return out[:limit]

    async def quote_context(
        self, caller: str, speaker: str, recent_n: int, channel_id: str
    ) -> list[hub_pb2.ContextExcerpt]:
        """The speaker's latest visible EV_TEXT, oldest first."""
        if not speaker:
            raise InvalidArgument("speaker is empty; name whose words to quote.")
        if recent_n < 0 or recent_n > 1000:
            raise InvalidArgument("recent_n must be between 1 and 1000 (0 = 1).")
        recent_n = recent_n or 1
        speaker_id = (await self.core.registry.find(speaker)).agent_id
        channels = await self._channels_of(caller, channel_id)
        picked = []
        for data in await self.core.store.texts_from(channels, speaker_id, recent_n * 4):
            wire = envelope_pb2.Envelope.FromString(data)
            if wire_readable_by(wire, caller):
                picked.append(self._excerpt(wire))
        picked.sort(key=lambda e: e.created_at, reverse=True)
        return list(reversed(picked[:recent_n]))

    async def _channels_of(self, caller: str, channel_id: str) -> list[str]:
        if channel_id:
            await self.core.require_member(caller, channel_id)
            return [channel_id]
        rows = await self.core.store.list_channels_for(caller, include_ended=True, limit=10_000)
        return [r.channel_id for _, r in rows]

    def _excerpt(self, wire: envelope_pb2.Envelope) -> hub_pb2.ContextExcerpt:
        text = envelope_from_wire(wire).event_data.get("text", "")
        return hub_pb2.ContextExcerpt(
            channel_id=wire.channel_id,
            envelope_id=wire.envelope_id,
            seq=wire.seq,
            sender_id=wire.sender_id,
            sender_name=self.core.name_for(wire.sender_id),
            text=text if isinstance(text, str) else "",
            created_at=wire.created_at,
            created_time=wire.created_time if wire.HasField("created_time") else None,
        )
