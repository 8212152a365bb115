"""Channel handles and channel metadata as SDK values."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentnet.v1 import channel_pb2, hub_pb2

from netkernel.channel_types import VIEW_FULL_TRANSCRIPT
from netkernel.envelope import Envelope, Priority
from netkernel.wire import CHANNEL_STATE

if TYPE_CHECKING:
    from agentsdk.network.clients import NetworkClient


@dataclass(frozen=True)
class ParticipantInfo:
    """One member of a channel."""

    agent_id: str
    name: str
    role: str
    """"initiator" or "target"."""
    acked: bool


@dataclass(frozen=True)
class DefaultView:
    """The view an LLM participant gets of a channel unless it picked its own, as the hub names it."""

    policy: str = VIEW_FULL_TRANSCRIPT
    """Registry name of the view (see :data:`agentsdk.network.views.VIEW_POLICIES`)."""
    recent_n: int | None = None
    """How many recent envelopes a windowed view shows (None for full views)."""

    @classmethod
    def from_wire(cls, view: hub_pb2.DefaultView) -> DefaultView:
        """Build from DescribeChannel's ``default_view`` (no policy = the full transcript; ``recent_n`` 0 = None)."""
        return cls(view.policy or cls.policy, view.recent_n or None)


@dataclass(frozen=True)
class ChannelMetadata:
    """What the hub knows about a channel, and what it decided for the participant who described it.

    Built from DescribeChannel (:meth:`from_describe`) it carries the adapter tools that
    participant is offered now and the channel's default view. Built from any other
    message (OpenChannel, CloseChannel) or by hand, it offers nothing and its default
    view is the full transcript.
    """

    channel_id: str
    type: str
    participants: tuple[ParticipantInfo, ...]
    state: str
    """"pending", "opened", "closed" or "expired"."""
    knobs: dict[str, Any] = field(default_factory=dict)
    intent: str = ""
    close_reason: str = ""
    last_seq: int = 0
    offered_tools: tuple[str, ...] = ()
    """Names of the adapter tools the hub offers ``offered_to`` in this channel right now (e.g. ``("say",)``)."""
    offered_to: str = ""
    """The participant ``offered_tools`` was answered for ("" = nobody: the hub was not asked)."""
    default_view: DefaultView = DefaultView()
    """The channel type's default view, as the hub named it."""

    @property
    def participant_ids(self) -> list[str]:
        """Agent ids, initiator first."""
        return [p.agent_id for p in self.participants]

    @property
    def initiator(self) -> str:
        """The opener's agent id."""
        return self.participants[0].agent_id

    @classmethod
    def from_wire(cls, meta: channel_pb2.ChannelMetadata) -> ChannelMetadata:
        """Build from the wire message."""
        return cls(
            channel_id=meta.channel_id,
            type=meta.type,
            participants=tuple(
                ParticipantInfo(
                    p.agent_id,
                    p.name,
                    "initiator" if p.role == channel_pb2.PARTICIPANT_ROLE_INITIATOR else "target",
                    p.acked,
                )
                for p in meta.participants
            ),
            state=CHANNEL_STATE.name_of(meta.state, "unknown"),
            knobs=json.loads(meta.knobs_json) if meta.knobs_json else {},
            intent=meta.intent,
            close_reason=meta.close_reason,
            last_seq=meta.last_seq,
        )

    @classmethod
    def from_describe(cls, response: hub_pb2.DescribeChannelResponse, caller_id: str) -> ChannelMetadata:
        """Build from DescribeChannel as answered to ``caller_id``, with its offered tools and the default view."""
        return dataclasses.replace(
            cls.from_wire(response.channel),
            offered_tools=tuple(response.offered_tools),
            offered_to=caller_id,
            default_view=DefaultView.from_wire(response.default_view),
        )


@dataclass
class Channel:
    """A channel as seen by one participant: its metadata and a way to speak in it."""

    metadata: ChannelMetadata
    client: NetworkClient
    seed_envelope_id: str = ""

    @property
    def channel_id(self) -> str:
        """The channel's id."""
        return self.metadata.channel_id

    @property
    def type(self) -> str:
        """The adapter type."""
        return self.metadata.type

    async def send(
        self,
        text: str,
        *,
        audience: list[str] | None = None,
        causation_id: str | None = None,
        priority: Priority = "normal",
        task_id: str | None = None,
        images: Sequence[Any] | None = None,
    ) -> Envelope:
        """Post an EV_TEXT; ``audience`` takes peer names or agent ids (None = broadcast); ``images``
        as for :meth:`NetworkClient.send` (``ImageInput`` s or image objects)."""
        return await self.client.send(
            self.channel_id,
            text,
            audience=audience,
            causation_id=causation_id,
            priority=priority,
            task_id=task_id,
            images=images,
        )

    async def close(self, reason: str = "") -> ChannelMetadata:
        """Close the channel ("closed_by_agent" unless a reason is given)."""
        return await self.client.close_channel(self.channel_id, reason)
