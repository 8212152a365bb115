"""Shared builders for the view / SDK-adapter tests (no hub, no network)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentsdk.network.channel import ChannelMetadata, DefaultView, ParticipantInfo
from netkernel.envelope import EV_TEXT, Envelope

NAMES = {"a1": "alice", "b2": "bob", "c3": "carol", "d4": "dave", "e5": "erin"}


def meta(
    channel_type: str = "conversation",
    ids: tuple[str, ...] = ("a1", "b2"),
    *,
    state: str = "opened",
    knobs: dict[str, Any] | None = None,
    channel_id: str = "ch1",
    offered: tuple[str, tuple[str, ...]] | None = None,
    default_view: DefaultView | None = None,
) -> ChannelMetadata:
    """Channel metadata with the given participants (initiator first).

    ``offered`` = (participant, tool names) and ``default_view`` stand in for the hub's
    DescribeChannel answer; without them the metadata is as if the hub was not asked.
    """
    hub_said: dict[str, Any] = {}
    if offered is not None:
        hub_said.update(offered_to=offered[0], offered_tools=offered[1])
    if default_view is not None:
        hub_said["default_view"] = default_view
    return ChannelMetadata(
        channel_id=channel_id,
        type=channel_type,
        participants=tuple(
            ParticipantInfo(agent_id=i, name=NAMES.get(i, i), role="initiator" if n == 0 else "target", acked=True)
            for n, i in enumerate(ids)
        ),
        state=state,
        knobs=dict(knobs or {}),
        **hub_said,
    )


def text(sender: str, body: str, audience: list[str] | None = None, *, seq: int = 0) -> Envelope:
    """An EV_TEXT from ``sender``."""
    return Envelope(
        channel_id="ch1", sender_id=sender, audience=audience, event_type=EV_TEXT, event_data={"text": body}, seq=seq
    )


def env(sender: str, event_type: str, data: dict[str, Any] | None = None) -> Envelope:
    """Any envelope."""
    return Envelope(channel_id="ch1", sender_id=sender, audience=None, event_type=event_type, event_data=data or {})


@dataclass(eq=False)
class FakeClient:
    """Records ``send`` calls like NetworkClient.send (returns an admitted-looking envelope)."""

    agent_id: str = "a1"
    sent: list[tuple[str, str, list[str] | None]] = field(default_factory=list)

    async def send(self, channel_id: str, content: str, *, audience: list[str] | None = None) -> Envelope:
        self.sent.append((channel_id, content, audience))
        out = Envelope(
            channel_id=channel_id,
            sender_id=self.agent_id,
            audience=audience,
            event_type=EV_TEXT,
            event_data={"text": content},
        )
        out.envelope_id = f"env{len(self.sent)}"
        return out
