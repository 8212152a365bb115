"""NetworkClient: the shared surface of every participant (a registered identity with its live delivery
stream). Outbound: ``open`` a channel, ``send`` text, ``post_envelope`` / ``send_envelope`` anything;
inbound, every envelope goes through the client's dispatcher (:meth:`NetworkClient._dispatch`), which
:class:`~agentsdk.network.human_client.HumanClient` and :class:`~agentsdk.network.agent_client.AgentClient`
override. Import it from :mod:`agentsdk.network` (or :mod:`agentsdk.network.clients`)."""

from __future__ import annotations

import dataclasses
import inspect
import json
import logging
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from agentnet.v1 import connect_pb2, envelope_pb2, hub_pb2, identity_pb2
from opentelemetry import trace

from agentsdk.a2a.client import AgentToAgent
from agentsdk.a2a.settings import A2ASettings
from agentsdk.a2a.tools import make_a2a_tools
from agentsdk.events import ImageInput
from agentsdk.network._delivery import DeliveryStream
from agentsdk.network._transcripts import TranscriptCache
from agentsdk.network.channel import Channel, ChannelMetadata
from agentsdk.network.credentials import CredentialFile
from agentsdk.network.transitions import knob_json
from agentsdk.rpc import HubRpc
from agentsdk.tools import Tool
from netkernel.envelope import (
    EV_CHANNEL_INVITE_ACK,
    EV_MSG_CHUNK,
    EV_TEXT,
    Envelope,
    Priority,
    text_envelope,
)
from netkernel.errors import AgentNetError, FailedPrecondition, InvalidArgument, Unavailable
from netkernel.identity import Passport, Resume, ResumeExample
from netkernel.images import check_images
from netkernel.skills import add_skill_example
from netkernel.tracecontext import traceparent_of
from netkernel.wire import envelope_from_wire, envelope_to_wire

if TYPE_CHECKING:
    from agentsdk.network.hub_client import HubClient

log = logging.getLogger("agentnet.sdk")

EnvelopeCallback = Callable[[Envelope], Awaitable[None] | None]
"""A push callback: a coroutine function or a plain function, called with ``(envelope,)``."""


async def call_back(callback: Callable[[Envelope], Awaitable[None] | None], envelope: Envelope) -> None:
    """Call ``callback`` with ``envelope``, awaiting what it returns when that is awaitable.

    Every envelope callback of the SDK goes through here, so a plain function works
    wherever a coroutine function does."""
    result = callback(envelope)
    if result is not None and inspect.isawaitable(result):
        await result


@dataclasses.dataclass(frozen=True, slots=True)
class PendingTurn:
    """A turn a channel awaits from this identity (the wire's ``Welcome.pending_turns``): the adapter
    expects it to speak next and it has not answered ``triggering_envelope_id`` (seq ``seq``)."""

    channel_id: str
    seq: int
    triggering_envelope_id: str


class NetworkClient:
    """One identity on the network: what an AgentClient and a HumanClient share."""

    def __init__(self, hub: HubClient, agent_id: str, credential: str, passport: Passport) -> None:
        self._hub = hub
        self.agent_id = agent_id
        self.credential = credential
        self.passport = passport
        """The identity's passport as the hub registered it (``kind`` filled in: ``"agent"``,
        ``"human"`` or ``"remote_agent"``)."""
        self.rpc = HubRpc(hub.connection, credential)
        """The hub's RPCs, typed, as this identity."""
        self.a2a_settings = A2ASettings()
        """This identity's A2A settings as last set through this client (disabled by default)."""
        self.credential_file: CredentialFile | None = None
        """Where this identity's credential is kept (``register(..., credential_file=...)``); None otherwise."""
        self._resumed_record: identity_pb2.AgentRecord | None = None
        self._resume = Resume()
        self._stream: DeliveryStream | None = None
        self._a2a = AgentToAgent(hub.connection.target, credential, connection=hub.connection)
        self._a2a_tools: list[Tool] | None = None
        self._unregistered: list[str] | None = None
        self._leaving = False
        """An Unregister of this identity is in flight (the stream's end it brings is expected)."""
        self.transcripts = TranscriptCache()
        """What this identity already read of its channels' WALs (see :meth:`read_wal_before`)."""
        self._chunk_callbacks: list[EnvelopeCallback] = []

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

    @property
    def a2a_caller(self) -> AgentToAgent | None:
        """The A2A client for calling other agents while connected, whatever this identity's own A2A
        settings (those govern whether others can call it; the hub does not require them of a caller);
        None when disconnected. ``agentnet mcp`` offers a person's MCP host the A2A tools through it."""
        return self._a2a if self._stream is not None else None

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

    async def set_rule(self, rule: dict[str, Any] | None) -> None:
        """Replace this identity's own governance rule (AG2's ``set_rule``; None removes it).

        The rule has the policy file's shape (``access``, ``limits``, ``rate``, ``inbox``;
        docs/governance.md), is validated by the hub (InvalidArgument naming the problem),
        audited as ``rule_set`` and enforced from the next call on. Like the rule given at
        registration it only narrows what the hub's policy allows."""
        await self.rpc.set_rule(hub_pb2.SetRuleRequest(rule_json=json.dumps(rule) if rule is not None else ""))

    async def get_rule(self) -> dict[str, Any] | None:
        """This identity's own governance rule (AG2's ``get_rule``; None when it has none)."""
        response = await self.rpc.get_rule(hub_pb2.GetRuleRequest())
        rule: dict[str, Any] | None = json.loads(response.rule_json) if response.rule_json else None
        return rule

    async def effective_rule(self) -> dict[str, Any]:
        """Everything that governs this identity: ``{"rules": [{"id", "rule"}, ...], "limits": ...,
        "rate": ..., "inbox": ...}`` — every rule that applies (the policy's default, the matching
        entries, its own; an action needs all of them to allow it) and what they combine to."""
        response = await self.rpc.get_rule(hub_pb2.GetRuleRequest())
        combined: dict[str, Any] = json.loads(response.effective_json)
        rules = [{"id": r.id, "rule": json.loads(r.rule_json)} for r in response.rules]
        return {"rules": rules, **combined}

    async def _start(self, stream: DeliveryStream) -> None:
        self._stream = stream
        await stream.start()

    @property
    def stream_error(self) -> AgentNetError | None:
        """The error that ended this identity's delivery stream for good, else None. ``Superseded``: a
        newer ``Connect`` of the same identity (another process, or another client in this one) took
        the stream over — this client stopped receiving and does not reconnect (docs/hub.md, "One
        stream per identity"); a refused credential (``Unauthenticated`` / ``PermissionDenied``)."""
        return self._stream.fatal if self._stream is not None else None

    @property
    def session_id(self) -> str:
        """The hub's id of this identity's current delivery session ("" before the stream began). A new
        one each time the stream begins again: after a reconnect — a hub restarted, a replica stopped
        and the client moved to another (docs/scale-out.md, "Rolling restart")."""
        return self._stream.session_id if self._stream is not None else ""

    @property
    def redirected_to(self) -> str | None:
        """The hub replica address a Redirect moved this identity's stream to (None: the stream is on the
        target given; docs/scale-out.md "Session steering")."""
        return self._stream.redirected_to if self._stream is not None else None

    @property
    def pending_turns(self) -> list[PendingTurn]:
        """The turns this identity's channels awaited from it when its stream last began (Welcome's
        ``pending_turns``: the adapter expects it to speak and it has not answered the latest
        message). The handler runs each once, without waiting to be asked (docs/network.md)."""
        if self._stream is None:
            return []
        return [PendingTurn(t.channel_id, t.seq, t.envelope_id) for t in self._stream.pending_turns]

    async def resume_pending_turns(self) -> int:
        """Ask the hub for the turns this identity's channels await from it now (``ListPendingTurns``)
        and run the handler on each of them once; returns how many it started (AG2's
        ``AgentClient.resume_pending_turns``).

        The client resumes the turns a new stream's Welcome lists by itself, but never one it
        handled already; call this to run again the turns its handler finished without answering
        (e.g. the model call failed). A turn whose handler is still running, or whose envelope is
        still to be delivered, is left alone, so nothing is answered twice."""
        if self._stream is None:
            raise FailedPrecondition(f"{self.name} is not connected: connect it (register / resume) first.")
        stream = self._stream
        turns, listing = await stream.list_pending_turns()
        return stream.resume(turns, stream.cursors.snapshot(), rerun_before=listing)

    def _stream_ended(self, error: AgentNetError) -> None:
        """The delivery stream stopped for good with ``error`` (see :attr:`stream_error`); said in the log
        unless this client unregistered its identity itself (the hub then ends the stream)."""
        if not (self._leaving and error.metadata.get("cause") == "unregistered"):
            log.error("%s stopped receiving for good: %s", self.name, error.message)

    def _welcomed(self, welcome: connect_pb2.Welcome) -> None:
        """A stream began (the first or a reconnect's); its pending turns are being resumed."""

    def _dispatch(self, wire: envelope_pb2.Envelope, size: int) -> Awaitable[None] | None:
        """The delivery stream's dispatcher: what to await for ``wire`` (its wire size ``size`` bytes;
        None: handled already)."""
        envelope = envelope_from_wire(wire)
        if envelope.event_type == EV_MSG_CHUNK:
            return self._chunk(envelope)
        return self._handle(envelope)

    # -- streamed replies ----------------------------------------------------------------

    def on_chunk(self, callback: EnvelopeCallback) -> None:
        """Add a callback for the ``ag2.msg.chunk`` envelopes of replies being streamed to you
        (``event_data["delta"]`` is the text; ``causation_id`` the envelope being answered);
        a coroutine function or a plain function."""
        self._chunk_callbacks.append(callback)

    async def receive_chunk(self, delta: object, *, channel_id: str, parent_envelope_id: str) -> None:
        """AG2's hook for a piece of a reply still being streamed: a no-op here; override it in a
        subclass (or use :meth:`on_chunk`) to show the reply as it grows. The complete reply
        arrives afterwards as a normal envelope; chunk envelopes never reach the envelope
        handler, the push callbacks or the pull queue."""
        return None

    async def _chunk(self, envelope: Envelope) -> None:
        """Hand one chunk envelope to :meth:`receive_chunk` and the :meth:`on_chunk` callbacks."""
        delta = envelope.event_data.get("delta", "")
        try:
            await self.receive_chunk(
                delta, channel_id=envelope.channel_id, parent_envelope_id=envelope.causation_id or ""
            )
        except Exception:
            log.exception("%s: receive_chunk failed", self.name)
        for callback in list(self._chunk_callbacks):
            try:
                await call_back(callback, envelope)
            except Exception:
                log.exception("chunk callback %r failed", callback)

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
            knobs_json=json.dumps(knobs, default=knob_json) if knobs else "",
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
        images: Sequence[ImageInput | Mapping[str, Any]] | None = None,
    ) -> Envelope:
        """Post an EV_TEXT to ``channel_id``; ``audience`` takes peer names or ids.

        ``images`` go with the text (``event_data["images"]``; an
        :class:`~agentsdk.events.ImageInput`, or an item shaped as docs/network.md "Images"
        describes): the recipients' views show them to their models. A malformed image raises
        InvalidArgument here, before anything is sent."""
        items = [i.to_event_data() if isinstance(i, ImageInput) else dict(i) for i in images] if images else None
        env = text_envelope(
            channel_id,
            self.agent_id,
            text,
            audience=self._resolve_audience(audience),
            causation_id=causation_id,
            priority=priority,
            task_id=task_id,
            images=items,
        )
        check_images(env.event_type, env.event_data)
        if self._hub.connection.tracing:
            return await self.post_envelope(env)
        # post_envelope's untraced path inline (one coroutine less per send); the admitted envelope's
        # event_data is the dict built here when the hub kept its JSON text as sent (it is not parsed
        # back: nobody else holds that dict).
        data = env.event_data
        wire = self._untraced_wire(env)
        del env  # not kept while the post waits (one object less for the garbage collector to look at)
        stream = self._stream
        queued = stream.post_nowait(wire) if stream is not None else None
        if stream is None or queued is None:
            posted = await self._post_wire(wire)
        else:  # DeliveryStream.post inline: this coroutine waits for the stream's answer itself
            request_id, fut = queued
            try:
                result: connect_pb2.PostResult | None = await fut
            except Unavailable:
                result = None  # the stream broke: finish_post posts it by PostEnvelope, same key
            finally:
                stream.forget_post(request_id)
            if result is not None and result.WhichOneof("result") == "envelope":
                posted = result.envelope
            else:
                posted = await stream.finish_post(wire, result)
        if posted.event_data_json == wire.event_data_json:
            return envelope_from_wire(posted, event_data=data)
        return envelope_from_wire(posted)

    async def post_envelope(self, envelope: Envelope) -> Envelope:
        """Post any envelope (custom event types, workflow packets, invite acks); returns it as admitted.

        An empty ``sender_id`` is filled with this client's id; another identity's id is
        sent as is, and the hub refuses it (PERMISSION_DENIED), as for any bridge. Without a
        ``trace_id`` of its own the envelope carries the W3C traceparent of this post's span (a
        child of the running handler turn's span, so a reply continues the trace it answers).
        """
        connection = self._hub.connection
        if not connection.tracing:
            return envelope_from_wire(await self._post_wire(self._untraced_wire(envelope)))
        with connection.tracer.start_as_current_span(
            "agentnet.post",
            kind=trace.SpanKind.PRODUCER,
            attributes={"agentnet.channel_id": envelope.channel_id, "agentnet.event_type": envelope.event_type},
        ) as span:
            wire = self._wire_of(envelope)
            if not wire.HasField("trace_id"):  # a client's own trace_id is sent as it is
                traceparent = traceparent_of(span)  # inside a handler turn: that turn's trace goes on
                if traceparent is not None:
                    wire.trace_id = traceparent
            posted = await self._post_wire(wire)
            span.set_attributes({"agentnet.seq": posted.seq, "agentnet.envelope_id": posted.envelope_id})
            return envelope_from_wire(posted)

    def _untraced_wire(self, envelope: Envelope) -> envelope_pb2.Envelope:
        """:meth:`_wire_of` when no span would be recorded: no no-op span is made. The envelope still
        carries the context that no-op span would have named, the current one (a handler turn's: the
        trace the delivered envelope carried goes on)."""
        wire = self._wire_of(envelope)
        if not wire.HasField("trace_id"):
            traceparent = traceparent_of(trace.get_current_span())
            if traceparent is not None:
                wire.trace_id = traceparent
        return wire

    def _wire_of(self, envelope: Envelope) -> envelope_pb2.Envelope:
        """``envelope`` as the wire message to post, its empty ``sender_id`` filled with this client's id."""
        wire = envelope_to_wire(envelope)
        if not envelope.sender_id:
            wire.sender_id = self.agent_id
        return wire

    def _post_wire(self, wire: envelope_pb2.Envelope) -> Awaitable[envelope_pb2.Envelope]:
        """Post ``wire`` over the delivery stream (PostEnvelope while not connected); awaits the admitted
        envelope (the stream's own coroutine when connected: no coroutine of this one per post)."""
        if self._stream is None:
            return self._post_unary(wire)
        return self._stream.post(wire)

    async def _post_unary(self, wire: envelope_pb2.Envelope) -> envelope_pb2.Envelope:
        response = await self.rpc.post_envelope(hub_pb2.PostEnvelopeRequest(envelope=wire))
        return response.envelope

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

    async def call_tool(
        self, name: str, arguments: dict[str, Any], *, channel_id: str = "", task_id: str = "", causation_id: str = ""
    ) -> Any:
        """Run a network tool on the hub (CallTool); returns its JSON result.

        ``causation_id`` is the envelope the running turn answers (a ``delegate`` then
        counts one hop more than it, so delegation chains stop at the hub's depth limit).
        """
        response = await self.rpc.call_tool(
            hub_pb2.CallToolRequest(
                name=name,
                arguments_json=json.dumps(arguments),
                channel_id=channel_id,
                task_id=task_id,
                causation_id=causation_id,
            )
        )
        return json.loads(response.result_json)

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

    async def can_send(self, channel_id: str, event_type: str = EV_TEXT, *, causation_id: str = "") -> bool:
        """Whether a post of ``event_type`` (answering envelope ``causation_id``, if given: its
        delegation depth counts) would be admitted now."""
        request = hub_pb2.CanSendRequest(channel_id=channel_id, event_type=event_type, causation_id=causation_id)
        response = await self.rpc.can_send(request)
        return response.allowed

    async def find_reply(self, channel_id: str, causation_id: str, *, sender: str = "") -> Envelope | None:
        """The first envelope ``sender`` (a peer name or id; "" = you) posted to ``channel_id`` whose
        ``causation_id`` is ``causation_id`` — whether that envelope was answered already — or None.

        One indexed lookup on the hub (``FindReply``), whatever the channel's length."""
        request = hub_pb2.FindReplyRequest(channel_id=channel_id, causation_id=causation_id, sender=sender)
        response = await self.rpc.find_reply(request)
        return envelope_from_wire(response.envelope) if response.HasField("envelope") else None

    async def read_wal(self, channel_id: str, *, from_seq: int = 0, until_seq: int = 0) -> list[Envelope]:
        """The part of the channel's WAL you may see, in admission order."""
        return await self._hub.read_wal_as(self.credential, channel_id, from_seq=from_seq, until_seq=until_seq)

    async def read_wal_before(self, channel_id: str, seq: int) -> list[Envelope]:
        """The part of the channel's WAL you may see below ``seq``, a seq the hub delivered or admitted.

        Everything below such a seq is committed and never changes, so this reads from the
        hub only what :attr:`transcripts` does not hold yet (see
        :mod:`agentsdk.network._transcripts`). The envelopes are shared with the cache:
        treat them as read-only."""
        upto = seq - 1
        if upto < 1:
            return []
        cached, covered = self.transcripts.prefix(channel_id, upto)
        if covered >= upto:
            return cached
        wires = await self._hub.read_wal_wire_as(self.credential, channel_id, from_seq=covered + 1, until_seq=upto)
        fresh = [(envelope_from_wire(wire), wire.ByteSize()) for wire in wires]
        self.transcripts.extend(channel_id, covered, upto, fresh)
        return cached + [envelope for envelope, _ in fresh]

    # -- what peers read about you -------------------------------------------------------

    @property
    def resume(self) -> Resume:
        """This identity's resume as this client last knew it (AG2's cached ``AgentClient.resume``): the
        one given at registration, the hub's when resumed from a credential, else what :meth:`set_resume`
        and :meth:`add_example` last read back. No call is made; ``hub.get_resume(name)`` reads the hub's
        current one (with the track record tasks add later)."""
        return self._resume

    async def set_resume(self, resume: Resume) -> Resume:
        """Replace this identity's resume (SetResume, audited; AG2's ``AgentClient.set_resume``), then
        read it back from the hub, so :attr:`resume` holds what peers see: the hub stamps
        ``last_updated`` and keeps the ``observed`` track record. Returns that resume."""
        await self.rpc.set_resume(hub_pb2.SetResumeRequest(resume=resume.to_wire()))
        self._resume = await self._read_resume()
        return self._resume

    async def _read_resume(self) -> Resume:
        response = await self.rpc.describe_agent(hub_pb2.DescribeAgentRequest(agent_id=self.agent_id))
        return Resume.from_wire(response.agent.resume)

    async def add_example(self, example: ResumeExample | str) -> Resume:
        """Add an example of your work to your resume and skill (AG2's ``add_example``); returns the resume.

        Reads your record from the hub first (so a resume or skill set meanwhile is kept), appends
        the example's line (:meth:`ResumeExample.line`) to ``resume.examples`` (SetResume) and,
        when you registered a skill of your own, to its ``## Examples`` section (SetSkill; a
        fallback skill is re-rendered from the resume by the hub): peers see it in
        ``peers(action="describe")``. An empty example raises InvalidArgument."""
        line = example.line() if isinstance(example, ResumeExample) else " ".join(example.split())
        if not line:
            raise InvalidArgument("the example is empty; give it a title (what the work was).")
        response = await self.rpc.describe_agent(hub_pb2.DescribeAgentRequest(agent_id=self.agent_id))
        record = response.agent
        resume = Resume.from_wire(record.resume)
        resume.examples.append(line)
        resume = await self.set_resume(resume)
        if record.skill_md and not record.skill_is_fallback:
            skill_md = add_skill_example(record.skill_md, line)
            await self.rpc.set_skill(hub_pb2.SetSkillRequest(skill_md=skill_md))
        return resume

    async def disconnect(self) -> None:
        """Stop receiving (envelopes not yet processed are redelivered on the next connect)."""
        if self._stream is not None:
            await self._stream.stop()
            self._stream = None

    async def unregister(self) -> list[str]:
        """Retire this identity: the hub removes it (its name becomes free, its live channels close
        with ``participant_left``), the client disconnects and its credential file (and cursor
        file) is deleted. Returns the ids of the channels that closed.

        Calling it again on this client is a no-op that returns ``[]`` (the identity is gone
        already; nothing is asked of the hub)."""
        if self._unregistered is not None:
            return []
        self._leaving = True  # stays once it succeeded: the stream's end may come after the answer
        try:
            response = await self.rpc.unregister(hub_pb2.UnregisterRequest())
        except BaseException:
            self._leaving = False
            raise
        self._unregistered = list(response.closed_channel_ids)
        await self.disconnect()
        self._hub.forget_identity(self.agent_id)
        if self.credential_file is not None:
            self.credential_file.remove()
        return list(self._unregistered)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        """Disconnect (the identity stays registered; see :meth:`unregister`)."""
        await self.disconnect()
