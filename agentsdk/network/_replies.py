"""Waiting for the answer to a question: the reply, or a typed error saying why none is coming.

:meth:`HumanClient.wait_reply` and :meth:`HumanClient.ask` read the client's pull queue for the
first of: a substantive envelope another member posted to the channel after the question (the
reply), an ``ag2.channel.turn_failed`` naming the question (the answering agent's turn failed:
:class:`~netkernel.errors.TurnFailed`), or the channel's ``ag2.channel.closed``
(:class:`~netkernel.errors.ChannelClosed`) — so a person waiting on an agent whose model call fails
learns it at once instead of at their own timeout.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from netkernel.envelope import EV_CHANNEL_CLOSED, EV_TURN_FAILED, SUBSTANTIVE_EVENT_TYPES, Envelope
from netkernel.errors import ChannelClosed, TurnFailed

if TYPE_CHECKING:
    from agentsdk.network.clients import HumanClient


def _ends_wait(client: HumanClient, channel_id: str, question: Envelope) -> Callable[[Envelope], bool]:
    def matches(env: Envelope) -> bool:
        if env.channel_id != channel_id:
            return False
        if env.event_type == EV_TURN_FAILED:
            return env.event_data.get("envelope_id") == question.envelope_id
        if env.event_type == EV_CHANNEL_CLOSED:
            return True
        return env.event_type in SUBSTANTIVE_EVENT_TYPES and env.sender_id != client.agent_id and env.seq > question.seq

    return matches


async def wait_reply(client: HumanClient, question: Envelope, *, timeout: float | None) -> Envelope:
    """The reply to ``question`` (an envelope ``client`` posted); TurnFailed, ChannelClosed or Timeout
    when none is coming."""
    env = await client.next_envelope(predicate=_ends_wait(client, question.channel_id, question), timeout=timeout)
    if env.event_type == EV_TURN_FAILED:
        data = env.event_data
        raise TurnFailed(
            f"{data.get('agent_name') or data.get('agent_id')} could not answer: its turn failed with "
            f"{data.get('error_class', '')}: {data.get('message', '')} (channel action: {data.get('action', '')}).",
            metadata={
                "channel_id": question.channel_id,
                "envelope_id": question.envelope_id,
                "agent_id": str(data.get("agent_id", "")),
                "error_class": str(data.get("error_class", "")),
            },
        )
    if env.event_type == EV_CHANNEL_CLOSED:
        reason = env.event_data.get("reason", "")
        raise ChannelClosed(
            f"channel '{question.channel_id}' closed (reason: {reason}) before anyone answered; ask again in a "
            "new channel.",
            metadata={"channel_id": question.channel_id, "reason": str(reason)},
        )
    return env
