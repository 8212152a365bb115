"""Participants: the shared outbound surface (NetworkClient) and HumanClient.

A client is one registered identity with its live delivery stream. Outbound:
``open`` a channel, ``send`` text, ``post_envelope`` / ``send_envelope`` anything.
Inbound: every envelope goes through the client's dispatcher — for a HumanClient
the invite auto-ack, then the push callbacks, then the pull queue.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

from agentnet.v1 import envelope_pb2, hub_pb2

from agentsdk.a2a.client import AgentToAgent
from agentsdk.a2a.settings import A2ASettings
from agentsdk.a2a.tools import make_a2a_tools
from agentsdk.network.channel import Channel, ChannelMetadata
from agentsdk.network.delivery import DeliveryStream
from agentsdk.rpc import HubRpc
from agentsdk.tools import Tool
from netkernel.envelope import EV_CHANNEL_INVITE, EV_CHANNEL_INVITE_ACK, EV_TEXT, Envelope, Priority, text_envelope
from netkernel.errors import AgentNetError, Timeout
from netkernel.identity import Passport
from netkernel.wire import envelope_from_wire, envelope_to_wire

if TYPE_CHECKING:
    from agentsdk.network.hub_client import HubClient

log = logging.getLogger("agentnet.sdk")

EnvelopeCallback = Callable[[Envelope], Awaitable[None]]


class NetworkClient:
    """One identity on the network: what an AgentClient and a HumanClient share."""

    def __init__(self, hub: HubClient, agent_id: str, credential: str, passport: Passport) -> None:
        self._hub = hub
        self.agent_id = agent_id
        self.credential = credential
        self.passport = passport
        self.rpc = HubRpc(hub.connection, credential)
        """The hub's RPCs, typed, as this identity."""
        self.a2a_settings = A2ASettings()
        """This identity's A2A settings as last set through this client (disabled by default)."""
        self._stream: DeliveryStream | None = None
        self._a2a = AgentToAgent(hub.connection.target, credential, connection=hub.connection)
        self._a2a_tools: list[Tool] | None = None

    @property
    def name(self) -> str:
        """The passport name."""
        return self.passport.name

    @property
    def hub(self) -> HubClient:
        """The hub client this identity belongs to."""
        return self._hub

    @property
    def _hub_client(self) -> HubClient:
        # Same as `hub`; custom handlers may reach the hub through client._hub_client.
        return self._hub

    @property
    def a2a(self) -> AgentToAgent | None:
        """The pre-authenticated A2A client (see ``docs/a2a.md``); None when A2A is unavailable.

        A2A is unavailable when this identity's A2A is disabled, or it is disconnected.
        """
        return self._a2a if self.a2a_settings.enabled and self._stream is not None else None

    def a2a_tools(self) -> list[Tool]:
        """The LLM tools ``discover_available_agents`` and ``invoke_a2a_agent``; empty when A2A is disabled.

        The same tool objects are returned on every call.
        """
        if not self.a2a_settings.enabled:
            return []
        if self._a2a_tools is None:
            self._a2a_tools = make_a2a_tools(self.agent_id, lambda: self.a2a)
        return self._a2a_tools

    async def set_a2a_settings(self, settings: A2ASettings | str | os.PathLike[str]) -> None:
        """Replace this identity's A2A settings (or load them from an ``agent.yaml``)."""
        settings = A2ASettings.coerce(settings)
        await self.rpc.set_a2a_settings(hub_pb2.SetA2ASettingsRequest(a2a=settings.to_wire()))
        self.a2a_settings = settings

    async def _start(self, stream: DeliveryStream) -> None:
        self._stream = stream
        await stream.start()

    async def _dispatch(self, wire: envelope_pb2.Envelope) -> None:
        await self._handle(envelope_from_wire(wire))

    async def _handle(self, envelope: Envelope) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    # -- outbound ---------------------------------------------------------------------

    async def open(
        self,
        *,
        type: str,
        target: str | list[str],
        knobs: dict[str, Any] | None = None,
        intent: str = "",
        ttl: float | None = None,
        message: str | None = None,
        invite_ack_timeout: float | None = None,
        wait: bool = True,
    ) -> Channel:
        """Open a channel to ``target`` (a peer name or id, or several) and wait until it is OPENED.

        ``message`` is sent on your behalf as the first envelope once OPENED.
        """
        targets = [target] if isinstance(target, str) else list(target)
        request = hub_pb2.OpenChannelRequest(
            type=type,
            targets=targets,
            knobs_json=json.dumps(knobs) if knobs else "",
            intent=intent,
            wait_until_opened=wait,
        )
        if ttl is not None:
            request.ttl_seconds = ttl
        if invite_ack_timeout is not None:
            request.invite_ack_timeout_seconds = invite_ack_timeout
        if message is not None:
            request.message = message
        response = await self.rpc.open_channel(request)
        metadata = ChannelMetadata.from_wire(response.channel)
        self._hub.remember_names(metadata)
        return Channel(metadata, self, response.seed_envelope_id)

    def _resolve_audience(self, audience: list[str] | None) -> list[str] | None:
        return None if audience is None else [self._hub.id_for(a) for a in audience]

    async def send(
        self,
        channel_id: str,
        text: str,
        *,
        audience: list[str] | None = None,
        causation_id: str | None = None,
        priority: Priority = "normal",
        task_id: str | None = None,
    ) -> Envelope:
        """Post an EV_TEXT to ``channel_id``; ``audience`` takes peer names or ids."""
        env = text_envelope(
            channel_id,
            self.agent_id,
            text,
            audience=self._resolve_audience(audience),
            causation_id=causation_id,
            priority=priority,
            task_id=task_id,
        )
        return await self.post_envelope(env)

    async def post_envelope(self, envelope: Envelope) -> Envelope:
        """Post any envelope (custom event types, workflow packets, invite acks); returns it as admitted.

        An empty ``sender_id`` is filled with this client's id; another identity's id is
        sent as is, and the hub refuses it (PERMISSION_DENIED), as for any bridge.
        """
        wire = envelope_to_wire(dataclasses.replace(envelope, sender_id=envelope.sender_id or self.agent_id))
        if self._stream is None:
            response = await self.rpc.post_envelope(hub_pb2.PostEnvelopeRequest(envelope=wire))
            return envelope_from_wire(response.envelope)
        return envelope_from_wire(await self._stream.post(wire))

    async def send_envelope(self, envelope: Envelope) -> Envelope:
        """Same as :meth:`post_envelope` (the spelling agent handlers use)."""
        return await self.post_envelope(envelope)

    async def ack_invite(self, channel_id: str) -> Envelope:
        """Accept a channel invite (what auto_ack_invites does for you)."""
        return await self.post_envelope(
            Envelope(
                channel_id=channel_id,
                sender_id=self.agent_id,
                audience=None,
                event_type=EV_CHANNEL_INVITE_ACK,
                event_data={},
            )
        )

    async def close_channel(self, channel_id: str, reason: str = "") -> ChannelMetadata:
        """Close a channel you participate in."""
        response = await self.rpc.close_channel(hub_pb2.CloseChannelRequest(channel_id=channel_id, reason=reason))
        return ChannelMetadata.from_wire(response.channel)

    async def channel_info(self, channel_id: str) -> tuple[ChannelMetadata, dict[str, Any], list[str]]:
        """(metadata, adapter state, expected next speakers) of a channel you participate in.

        The metadata carries what the hub decided for you: the adapter tools you are offered
        now (``offered_tools``) and the channel's default view (``default_view``)."""
        response = await self.rpc.describe_channel(hub_pb2.DescribeChannelRequest(channel_id=channel_id))
        metadata = ChannelMetadata.from_describe(response, self.agent_id)
        self._hub.remember_names(metadata)
        state = json.loads(response.adapter_state_json) if response.adapter_state_json else {}
        return metadata, state, list(response.expected_next)

    async def can_send(self, channel_id: str, event_type: str = EV_TEXT) -> bool:
        """Whether a post of ``event_type`` would be admitted now."""
        response = await self.rpc.can_send(hub_pb2.CanSendRequest(channel_id=channel_id, event_type=event_type))
        return response.allowed

    async def read_wal(self, channel_id: str, *, from_seq: int = 0, until_seq: int = 0) -> list[Envelope]:
        """The part of the channel's WAL you may see, in admission order."""
        return await self._hub.read_wal_as(self.credential, channel_id, from_seq=from_seq, until_seq=until_seq)

    async def disconnect(self) -> None:
        """Stop receiving (envelopes not yet processed are redelivered on the next connect)."""
        if self._stream is not None:
            await self._stream.stop()
            self._stream = None


class HumanClient(NetworkClient):
    """A participant without an LLM: a person at a UI, a bridge, a scripted seeder.

    Consume inbound envelopes by push (``on_envelope``), pull (``next_envelope``)
    or streaming (``async for env in client.envelopes()``).
    """

    def __init__(
        self, hub: HubClient, agent_id: str, credential: str, passport: Passport, *, auto_ack_invites: bool = True
    ) -> None:
        super().__init__(hub, agent_id, credential, passport)
        self.auto_ack_invites = auto_ack_invites
        self._callbacks: list[EnvelopeCallback] = []
        self._inbox: list[Envelope] = []
        self._arrived = asyncio.Condition()
        self._closed = False

    def on_envelope(self, callback: EnvelopeCallback) -> None:
        """Add a push callback (called for every inbound envelope, in registration order)."""
        self._callbacks.append(callback)

    def remove_envelope_callback(self, callback: EnvelopeCallback) -> None:
        """Remove a push callback."""
        with contextlib.suppress(ValueError):
            self._callbacks.remove(callback)

    async def _handle(self, envelope: Envelope) -> None:
        if self.auto_ack_invites and envelope.event_type == EV_CHANNEL_INVITE:
            try:
                await self.ack_invite(envelope.channel_id)
            except AgentNetError as err:
                log.warning("could not ack invite to %s: %s", envelope.channel_id, err.message)
        for callback in list(self._callbacks):
            try:
                await callback(envelope)
            except Exception:
                log.exception("envelope callback %r failed", callback)
        async with self._arrived:
            self._inbox.append(envelope)
            self._arrived.notify_all()

    async def next_envelope(
        self, *, predicate: Callable[[Envelope], bool] | None = None, timeout: float | None = None
    ) -> Envelope:
        """The next inbound envelope matching ``predicate`` (any when None); Timeout after ``timeout`` seconds."""

        def take() -> Envelope | None:
            for i, env in enumerate(self._inbox):
                if predicate is None or predicate(env):
                    return self._inbox.pop(i)
            return None

        async with self._arrived:
            try:
                async with asyncio.timeout(timeout):
                    while (found := take()) is None:
                        if self._closed:
                            raise Timeout("the client disconnected before a matching envelope arrived")
                        await self._arrived.wait()
            except TimeoutError:
                raise Timeout(f"no matching envelope within {timeout:g}s") from None
        return found

    async def envelopes(self) -> AsyncIterator[Envelope]:
        """Every inbound envelope, until :meth:`disconnect`."""
        while True:
            async with self._arrived:
                while not self._inbox and not self._closed:
                    await self._arrived.wait()
                if not self._inbox:
                    return
                env = self._inbox.pop(0)
            yield env

    async def disconnect(self) -> None:
        """Stop receiving and end :meth:`envelopes` iterations."""
        await super().disconnect()
        async with self._arrived:
            self._closed = True
            self._arrived.notify_all()
