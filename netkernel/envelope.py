"""The Envelope dataclass, event-type constants, priority and audience helpers.

Shared by the SDK and the hub: the hub's adapters fold these same objects.
``seq`` is the hub-stamped per-channel sequence number (0 until admitted). The wire
form is ``agentnet.v1.Envelope``; :mod:`netkernel.wire` converts between the two.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

Priority = Literal["background", "normal", "urgent"]
"""Delivery priority: urgent envelopes are delivered before normal, normal before background."""

# Substantive events.
EV_TEXT = "ag2.msg.text"
"""Plain text; ``event_data = {"text": "<body>"}``, optionally with ``"images"`` (:mod:`netkernel.images`)."""
EV_PACKET = "ag2.packet"
"""Workflow round-end capture; ``event_data = {"routing": {...}, "context_updates": {...}, "body": "<text>"}``
(the shape: :mod:`netkernel.packet`)."""

EV_MSG_CHUNK = "ag2.msg.chunk"
"""A piece of a reply a model is still streaming (posted by the SDK while a turn runs); a custom
event type to the hub: delivered to its audience, never takes a turn. ``event_data = {"delta":
"<text>", "index": <0, 1, … per turn>, "call": <the turn's model call>}``, ``causation_id`` = the
envelope being answered; the reply itself follows as the normal EV_TEXT / EV_PACKET."""

# Channel lifecycle events.
EV_CHANNEL_INVITE = "ag2.channel.invite"
"""Posted by the hub to each target when a channel is created."""
EV_CHANNEL_INVITE_ACK = "ag2.channel.invite_ack"
"""Posted by each invitee accepting its invite."""
EV_CHANNEL_INVITE_REJECT = "ag2.channel.invite_reject"
"""Optionally posted by an invitee rejecting its invite."""
EV_CHANNEL_OPENED = "ag2.channel.opened"
"""Posted by the hub once every invitee acked."""
EV_CHANNEL_CLOSED = "ag2.channel.closed"
"""Posted by the hub on every terminal path; ``event_data.reason`` says why."""
EV_CHANNEL_EXPIRED = "ag2.channel.expired"
"""Posted by the hub when the TTL sweeper closes a channel."""
EV_EXPECTATION_VIOLATED = "ag2.channel.expectation_violated"
"""Posted by the hub when an expectation threshold is breached with the notify handler."""
EV_TURN_FAILED = "ag2.channel.turn_failed"
"""Posted by the hub when a participant reports that its turn on an envelope failed (ReportTurnFailure);
``event_data = {"agent_id", "agent_name", "envelope_id", "error_class", "message", "attempts", "action"}``."""

# Context and task events.
EV_CONTEXT_SET = "ag2.context.set"
"""Changes channel-scoped context_vars; ``event_data = {"set": {...}, "delete": [...]}``."""
EV_TASK_CANCEL_REQUEST = "ag2.task.cancel_request"
"""A peer asks a task's owner to cancel; ``event_data = {"task_id": str, "reason": str}``."""
EV_TASK_CANCELLED = "ag2.task.cancelled"
"""The owner's terminal envelope for a cancelled task; same event_data shape."""

LIFECYCLE_EVENT_TYPES = frozenset(
    {
        EV_CHANNEL_INVITE,
        EV_CHANNEL_INVITE_ACK,
        EV_CHANNEL_INVITE_REJECT,
        EV_CHANNEL_OPENED,
        EV_CHANNEL_CLOSED,
        EV_CHANNEL_EXPIRED,
        EV_EXPECTATION_VIOLATED,
        EV_TURN_FAILED,
    }
)
"""Event types about the channel itself; they never advance turn state."""

SUBSTANTIVE_EVENT_TYPES = frozenset({EV_TEXT, EV_PACKET})
"""Event types that take a turn."""


@dataclass(slots=True)
class Envelope:
    """One message in a channel, plus the hub-stamped ``seq`` (see ``docs/hub.md``)."""

    channel_id: str
    sender_id: str
    """The sender's agent id (the hub stamps it from the authenticated identity)."""
    audience: list[str] | None
    """``None`` = broadcast to all participants; a list = only those agent ids."""
    event_type: str
    """Dotted event type, e.g. ``"ag2.msg.text"`` or a custom ``"myapp.review_request"``."""
    event_data: dict[str, Any]
    """Event-specific JSON-serialisable payload."""

    envelope_id: str = ""
    """Hub-stamped on admission."""
    task_id: str | None = None
    causation_id: str | None = None
    """The envelope_id this one is "in reply to"."""
    trace_id: str | None = None
    priority: Priority = "normal"
    depth: int = 0
    """Delegation hop count."""
    idempotency_key: str | None = None
    """A retried post with the same key returns the original envelope."""
    created_at: str = ""
    """Hub-stamped ISO-8601 UTC time ending in "Z"."""
    ttl_seconds: int | None = None
    """Per-envelope time to live; ``None`` defers to the channel's expiry."""
    seq: int = 0
    """Hub-stamped per-channel sequence number (1, 2, 3, … in admission order)."""

    @property
    def text(self) -> str:
        """The body text of an EV_TEXT (``event_data["text"]``) or EV_PACKET (``body``), else ``""``."""
        data = self.event_data
        value = data.get("text") if self.event_type == EV_TEXT else data.get("body")
        return value if isinstance(value, str) else ""


def visible_to(envelope: Envelope, agent_id: str) -> bool:
    """True when ``agent_id`` may see ``envelope`` (broadcast, or named in the audience)."""
    return envelope.audience is None or agent_id in envelope.audience


def readable_by(envelope: Envelope, agent_id: str) -> bool:
    """What a participant may read back from the WAL: what it may see, and what it sent."""
    return envelope.sender_id == agent_id or visible_to(envelope, agent_id)


def text_envelope(
    channel_id: str,
    sender_id: str,
    text: str,
    *,
    audience: list[str] | None = None,
    causation_id: str | None = None,
    priority: Priority = "normal",
    task_id: str | None = None,
    depth: int = 0,
    images: list[dict[str, Any]] | None = None,
) -> Envelope:
    """Build an EV_TEXT envelope (``event_data = {"text": text}``, plus ``"images"`` when given:
    items shaped as :mod:`netkernel.images` describes)."""
    data: dict[str, Any] = {"text": text}
    if images:
        data["images"] = images
    # Positional, in field order (on every send: nine keywords cost more than the rest of the call).
    return Envelope(channel_id, sender_id, audience, EV_TEXT, data, "", task_id, causation_id, None, priority, depth)
