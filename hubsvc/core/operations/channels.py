"""Channel operations: open (optionally seeded, optionally waiting until opened), describe, list, stream the
WAL, the caller's pending turns."""

from __future__ import annotations

from collections.abc import AsyncIterator

from agentnet.v1 import channel_pb2, connect_pb2, envelope_pb2, hub_pb2

from hubsvc.adapters import get_adapter
from hubsvc.core.channel import OPENED, TERMINAL, spec_from_meta
from hubsvc.core.hub import HubCore
from hubsvc.core.operations.pages import keyed_page, ordered_page
from hubsvc.core.sessions import MAX_PENDING_TURNS, pending_turn
from hubsvc.core.util import check_seconds
from hubsvc.core.wal_follow import WalFollower
from hubsvc.storage.base import ChannelRow
from netkernel.envelope import EV_CHANNEL_CLOSED, EV_CHANNEL_OPENED, Envelope, text_envelope
from netkernel.errors import InvalidArgument, PermissionDenied, Unavailable
from netkernel.wire import dumps_json, envelope_from_wire, wire_readable_by

TERMINAL_EVENTS = (EV_CHANNEL_CLOSED,)
"""The event type that ends a channel's WAL: every end posts ``ag2.channel.closed`` last (a TTL end
posts ``ag2.channel.expired`` just before it; a WAL written before that ends at the expired one, which
the follow reads to the end of anyway)."""
STREAM_PAGE = 32
"""WAL records a ReadWal stream reads from the store at a time (what it holds while the client reads)."""


class ChannelOps:
    """OpenChannel, DescribeChannel, ListChannels and ReadWal."""

    def __init__(self, core: HubCore) -> None:
        self.core = core

    async def open_channel(
        self, caller: str, request: hub_pb2.OpenChannelRequest
    ) -> tuple[channel_pb2.ChannelMetadata, str]:
        """Create, invite, optionally seed and wait until OPENED; returns (metadata, seed envelope id)."""
        if request.wait_timeout_seconds:  # checked with the rest of the request, before anything is created
            limit = self.core.options.max_wait_seconds
            check_seconds(request.wait_timeout_seconds, "wait_timeout_seconds", limit, absent="the default")
        seed: Envelope | None = None
        which = request.WhichOneof("seed")
        if which == "message":
            seed = text_envelope("", caller, request.message)
        elif which == "seed_envelope":
            seed = envelope_from_wire(request.seed_envelope, max_json_depth=self.core.options.max_json_depth)
            if seed.sender_id and seed.sender_id != caller:
                raise PermissionDenied("seed_envelope.sender_id must be empty or your own agent id.")
        ch = await self.core.open_channel(
            caller,
            type=request.type,
            targets=list(request.targets),
            knobs_json=request.knobs_json,
            intent=request.intent,
            ttl_seconds=request.ttl_seconds if request.HasField("ttl_seconds") else None,
            invite_ack_timeout=request.invite_ack_timeout_seconds
            if request.HasField("invite_ack_timeout_seconds")
            else None,
            seed=seed,
        )
        meta = ch.meta
        if request.wait_until_opened:
            timeout = request.wait_timeout_seconds or meta.invite_ack_timeout_seconds + 5.0
            meta = await self.core.wait_channel(
                ch.channel_id, lambda m: m.state == OPENED or m.state in TERMINAL, timeout
            )
        seed_id = ""
        if seed is not None and meta.state != channel_pb2.CHANNEL_STATE_PENDING:
            seed_id = await self._seed_id(caller, ch.channel_id)
        return meta, seed_id

    async def _seed_id(self, caller: str, channel_id: str) -> str:
        opened = False
        for wire in await self.core.read_wal(caller, channel_id, 1, 0, 0):
            if wire.event_type == EV_CHANNEL_OPENED:
                opened = True
            elif opened and wire.sender_id == caller:
                return wire.envelope_id
        return ""

    async def describe_channel(self, caller: str, channel_id: str) -> hub_pb2.DescribeChannelResponse:
        """Metadata, adapter state JSON (an ended channel's final state), expected next speakers, the
        caller's offered adapter tools and the channel type's default view."""
        meta = await self.core.require_member(caller, channel_id)
        ch = self.core.live_channel(channel_id)
        if ch is None and meta.state not in TERMINAL:
            self.core.placement.require(channel_id)  # live, held by another replica: it answers
        response = hub_pb2.DescribeChannelResponse(channel=meta)
        if ch is None:  # ended (or unknown here): its final adapter state, folded from the WAL
            policy, recent_n = get_adapter(meta.type).default_view(spec_from_meta(meta))
            final = await self.core.final_state(channel_id)
            if final is not None:
                response.adapter_state_json = dumps_json(final)
        else:
            policy, recent_n = ch.adapter.default_view(ch.spec)
            response.adapter_state_json = dumps_json(ch.adapter.state_json(ch.state))
            response.expected_next.extend(ch.expected_next())
            response.offered_tools.extend(ch.offered_tools(caller))
        response.default_view.policy = policy
        response.default_view.recent_n = recent_n
        return response

    def current_meta(self, row: ChannelRow) -> channel_pb2.ChannelMetadata:
        """A stored channel's metadata as it is now: the runtime's when this hub holds the channel
        live (its row may lag a commit), else the row's."""
        live = self.core.live_channel(row.channel_id)
        return live.meta if live is not None else channel_pb2.ChannelMetadata.FromString(row.record)

    async def list_channels(
        self, caller: str, *, include_ended: bool, type: str = "", limit: int = 0, page_token: str = ""
    ) -> tuple[list[channel_pb2.ChannelMetadata], str]:
        """The caller's channels, newest first, a page of ``limit`` (0 = 100); returns (channels,
        next page token)."""
        if limit < 0:
            raise InvalidArgument("limit must not be negative.")

        def pick(row: ChannelRow) -> channel_pb2.ChannelMetadata | None:
            meta = self.current_meta(row)
            return None if (type and meta.type != type) or (not include_ended and meta.state in TERMINAL) else meta

        async def fetch(before: int, size: int) -> list[tuple[int, ChannelRow]]:
            return await self.core.store.list_channels_for(
                caller, include_ended=include_ended, limit=size, before=before
            )

        return await ordered_page("channels", fetch, pick, limit or 100, page_token)

    async def list_pending_turns(
        self, caller: str, *, limit: int = 0, page_token: str = ""
    ) -> tuple[list[connect_pb2.PendingTurn], str]:
        """The turns the caller's live channels await from it, by channel id, a page of ``limit``
        (0 = 100, at most :data:`MAX_PENDING_TURNS`); returns (turns, next page token). On a store
        shared by replicas a channel the store holds more of is caught up first (a turn answered
        through another replica is not listed); with the channels divided, the turns of the channels
        other replicas hold are asked of them (UNAVAILABLE when one does not answer in time)."""
        if limit < 0 or limit > MAX_PENDING_TURNS:
            raise InvalidArgument(
                f"limit {limit} is out of range: ask for 1 to {MAX_PENDING_TURNS} turns (0 = 100) and page with "
                "next_page_token.",
                metadata={"field": "limit", "value": str(limit), "limit": str(MAX_PENDING_TURNS)},
            )
        await self.core.channels.refresh_turns_of(caller)
        turns = [
            turn
            for ch in self.core.channels.live()
            if caller in ch.participants and (turn := pending_turn(ch, caller)) is not None
        ]
        remote_turns = self.core.sessions.remote_turns
        if remote_turns is not None:  # the channels other replicas hold: asked of them
            remote, complete = await remote_turns(caller)
            if not complete:
                raise Unavailable(
                    "a hub replica holding one of your channels did not answer in time, so its pending turns "
                    "cannot be listed: retry ListPendingTurns.",
                    metadata={"cause": "replica_unreachable"},
                )
            turns = sorted([*turns, *remote], key=lambda t: t.channel_id)
        return keyed_page("pending_turns", turns, lambda t: (t.channel_id,), limit or 100, page_token)

    async def stream_wal(
        self, caller: str | None, channel_id: str, from_seq: int, until_seq: int, limit: int, *, follow: bool
    ) -> AsyncIterator[envelope_pb2.Envelope]:
        """The visible WAL (all of it for the operator: ``caller`` None); with ``follow``, then every
        new envelope until the channel ends."""
        if limit < 0:
            raise InvalidArgument("limit must not be negative.")
        if caller is None:
            await self.core.channel_meta(channel_id)  # NotFound for an unknown channel
        else:
            await self.core.require_member(caller, channel_id)
        if not follow:
            async for wire in self.core.iter_wal(caller, channel_id, from_seq, until_seq, limit, page=STREAM_PAGE):
                yield wire
            return
        follower = WalFollower(self.core.watch, channel_id, max_bytes=self.core.options.max_stream_buffer_bytes)
        try:
            sent = 0
            last = max(from_seq, 1) - 1
            async for wire in self.core.iter_wal(caller, channel_id, from_seq, until_seq, limit, page=STREAM_PAGE):
                yield wire
                last = wire.seq
                sent += 1
                if wire.event_type in TERMINAL_EVENTS or (limit and sent >= limit):
                    return
            if (
                self.core.live_channel(channel_id) is None
                and (await self.core.channel_meta(channel_id)).state in TERMINAL
            ):
                # It ended meanwhile: whatever came after our first read is in the WAL.
                async for wire in self.core.iter_wal(caller, channel_id, last + 1, until_seq, 0, page=STREAM_PAGE):
                    yield wire
                    sent += 1
                    if limit and sent >= limit:
                        return
                return
            while True:
                wire = await follower.next(resume_from=last + 1)
                if wire.seq <= last or (caller is not None and not wire_readable_by(wire, caller)):
                    continue
                if until_seq and wire.seq > until_seq:
                    return
                yield wire
                last = wire.seq
                sent += 1
                if wire.event_type in TERMINAL_EVENTS or (limit and sent >= limit):
                    return
        finally:
            follower.close()
