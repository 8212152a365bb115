"""Message operations: say (post text), delegate (a one-shot consultation), waiting for a peer's reply
and finding the reply a participant already gave (FindReply)."""

from __future__ import annotations

import asyncio
import contextlib

from agentnet.v1 import envelope_pb2

from hubsvc.core.hub import HubCore
from hubsvc.core.operations.channels import TERMINAL_EVENTS
from hubsvc.core.registry import AgentEntry
from hubsvc.core.util import check_seconds
from netkernel.channel_types import CONSULTING_TYPE, DEFAULT_WAIT_SECONDS
from netkernel.envelope import EV_TEXT, EV_TURN_FAILED, text_envelope
from netkernel.errors import ChannelClosed, FailedPrecondition, InvalidArgument, NotFound, Timeout, TurnFailed
from netkernel.wire import envelope_from_wire, wire_readable_by

FUNCTIONS_PREFIX = "functions."
"""The tool namespace LLMs echo into a delegate target (``functions.analyst``): tried without it too."""
MAX_LISTED_PEERS = 20
"""Most peer names an unknown delegate target's error lists (more are counted)."""


def target_candidates(target: str) -> tuple[str, ...]:
    """The names a delegate target may mean, most literal first: as given, then without ``functions.``."""
    if target.startswith(FUNCTIONS_PREFIX) and len(target) > len(FUNCTIONS_PREFIX):
        return (target, target[len(FUNCTIONS_PREFIX) :])
    return (target,)


class MessageOps:
    """Say, Delegate and FindReply, and the reply wait Delegate and InvokeAgent share."""

    def __init__(self, core: HubCore) -> None:
        self.core = core

    async def say(
        self, caller: str, content: str, audience: list[str], channel_id: str, *, causation_id: str | None = None
    ) -> envelope_pb2.Envelope:
        """Post EV_TEXT to a channel the caller participates in; audience by peer names or ids."""
        if not channel_id:
            raise InvalidArgument("say needs a channel: pass channel_id (the current channel when called as a tool).")
        await self.core.require_member(caller, channel_id)
        ids = [(await self.core.registry.find(name)).agent_id for name in audience] if audience else None
        wire, _ = await self.core.post(
            caller, text_envelope(channel_id, caller, content, audience=ids, causation_id=causation_id)
        )
        return wire

    async def find_reply(
        self, caller: str, channel_id: str, causation_id: str, sender: str = ""
    ) -> envelope_pb2.Envelope | None:
        """The first envelope ``sender`` (a name or id; "" = the caller) posted to the channel
        answering ``causation_id``, when the caller may read it; one indexed store lookup."""
        if not channel_id:
            raise InvalidArgument("channel_id is empty; name the channel the reply was posted to.")
        if not causation_id:
            raise InvalidArgument("causation_id is empty; name the envelope whose reply you look for.")
        await self.core.require_member(caller, channel_id)
        sender_id = (await self.core.registry.find(sender)).agent_id if sender else caller
        data = await self.core.store.find_reply(channel_id, sender_id, causation_id)
        if data is None:
            return None
        wire = envelope_pb2.Envelope.FromString(data)
        return wire if wire_readable_by(wire, caller) else None

    async def delegate(
        self,
        caller: str,
        target: str,
        prompt: str,
        *,
        capability: str = "",
        timeout: float = DEFAULT_WAIT_SECONDS,
        causation_id: str = "",
    ) -> tuple[str, str, str]:
        """Consult ``target`` once: returns (reply text, channel id, reply envelope id)."""
        if not prompt:
            raise InvalidArgument("prompt is empty; say what to ask.")
        check_seconds(
            timeout, "timeout_seconds", self.core.options.max_wait_seconds, absent=f"{DEFAULT_WAIT_SECONDS:g} seconds"
        )
        entry = await self._delegate_target(caller, target)
        if entry.agent_id == caller:
            raise InvalidArgument("you cannot delegate to yourself; pick a peer with peers(action='find').")
        if capability and capability.lower() not in (c.lower() for c in entry.record.resume.claimed_capabilities):
            raise FailedPrecondition(
                f"{entry.name} does not claim capability {capability!r}; find a peer that does with "
                f"peers(action='find', capability={capability!r}).",
            )
        depth = 1
        if causation_id:
            cause = await self.core.store.find_envelope(causation_id)
            if cause is not None:
                depth = envelope_pb2.Envelope.FromString(cause).depth + 1
        self.core.rules.check_call_depth("delegate", caller, depth, entry.name)
        seed = text_envelope("", caller, prompt, depth=depth, causation_id=causation_id or None)
        ch = await self.core.open_channel(
            caller,
            type=CONSULTING_TYPE,
            targets=[entry.agent_id],
            intent=f"delegate: {capability}" if capability else "delegate",
            seed=seed,
            action="delegate",
        )
        reply = await self.await_reply(caller, ch.channel_id, entry.agent_id, timeout)
        return envelope_from_wire(reply).event_data.get("text", ""), ch.channel_id, reply.envelope_id

    async def _delegate_target(self, caller: str, target: str) -> AgentEntry:
        """The identity a delegate ``target`` names (``functions.<name>`` as ``<name>``); NotFound
        listing the peers the caller may delegate to (at most :data:`MAX_LISTED_PEERS`)."""
        if not target:
            raise InvalidArgument("target is empty; name the peer to delegate to (peers(action='find') lists them).")
        for candidate in target_candidates(target):
            with contextlib.suppress(NotFound):
                return await self.core.registry.find(candidate)
        peers = self.core.rules.reachable_peers(caller, "delegate")
        if not peers:
            listed = "there is no peer you may delegate to"
        else:
            listed = "you may delegate to: " + ", ".join(peers[:MAX_LISTED_PEERS])
            if len(peers) > MAX_LISTED_PEERS:
                listed += f" and {len(peers) - MAX_LISTED_PEERS} more (peers(action='find') lists them)"
        raise NotFound(f"no agent named or with id {target!r}; {listed}.", metadata={"agent": target})

    async def await_reply(
        self, caller: str, channel_id: str, sender: str, timeout: float, *, timeout_reason: str = "delegate_timeout"
    ) -> envelope_pb2.Envelope:
        """The first EV_TEXT of ``sender`` in the channel. Raises Timeout (after closing the
        channel with ``timeout_reason``), TurnFailed when ``sender`` reports that its turn failed
        (ReportTurnFailure), or ChannelClosed when the channel ends first."""
        queue: asyncio.Queue[envelope_pb2.Envelope] = asyncio.Queue()
        unsubscribe = self.core.watch(channel_id, queue.put_nowait)
        try:
            for wire in await self.core.read_wal(caller, channel_id):
                queue.put_nowait(wire)
            loop = asyncio.get_running_loop()
            deadline = loop.time() + timeout
            while True:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    await self.core.close_channel(caller, channel_id, timeout_reason)
                    raise Timeout(
                        f"no reply from {self.core.name_for(sender)} within {timeout:g}s; the channel was closed.",
                        metadata={"channel_id": channel_id},
                    )
                try:
                    wire = await asyncio.wait_for(queue.get(), remaining)
                except TimeoutError:
                    continue
                if wire.event_type == EV_TEXT and wire.sender_id == sender:
                    return wire
                if wire.event_type == EV_TURN_FAILED and wire.event_data_json:
                    failed = envelope_from_wire(wire).event_data
                    if failed.get("agent_id") == sender:
                        raise TurnFailed(
                            f"{self.core.name_for(sender)} could not answer: its turn failed with "
                            f"{failed.get('error_class', '')}: {failed.get('message', '')}",
                            metadata={
                                "channel_id": channel_id,
                                "agent_id": sender,
                                "envelope_id": str(failed.get("envelope_id", "")),
                                "error_class": str(failed.get("error_class", "")),
                            },
                        )
                if wire.event_type in TERMINAL_EVENTS:
                    reason = envelope_from_wire(wire).event_data.get("reason", "")
                    raise ChannelClosed(
                        f"channel '{channel_id}' ended before {self.core.name_for(sender)} replied (reason: {reason}).",
                        metadata={"channel_id": channel_id, "reason": str(reason)},
                    )
        finally:
            unsubscribe()
