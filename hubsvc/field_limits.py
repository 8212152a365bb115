"""The hub's request field limits: :class:`servicekit.limits.RequestLimits` set from
:class:`~hubsvc.core.options.HubOptions`, with the hub's per-field overrides (payloads, skill
markdown, stream cursors and acks, ping nonces, operator page tokens) and the repeated fields that are sets of ids."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from google.protobuf.message import Message

from hubsvc.core.options import HubOptions
from netkernel.errors import AgentNetError, InvalidArgument, PayloadTooLarge
from netkernel.turn_failure import MAX_REPORTED_MESSAGE_BYTES
from servicekit.limits import Bound, FieldLimits, RequestLimits

Audit = Callable[[str, str, str, dict[str, Any]], None]
"""``HubCore.audit``: (kind, actor, subject, detail)."""

_PAYLOAD_HINT = "store big content in the knowledge service and send a reference"

#: Text that becomes an envelope's event data: bounded like event_data_json.
PAYLOAD_FIELDS = (
    "agentnet.v1.Envelope.event_data_json",
    "agentnet.v1.SayRequest.content",
    "agentnet.v1.DelegateRequest.prompt",
    "agentnet.v1.InvokeAgentRequest.message",
    "agentnet.v1.OpenChannelRequest.message",
    "agentnet.v1.CallToolRequest.arguments_json",
    "agentnet.v1.ReportTaskRequest.payload_json",
)
CHECKPOINT_FIELD = "agentnet.v1.CheckpointTaskRequest.state_json"
_CHECKPOINT_HINT = "checkpoint less state (e.g. a reference to content stored in the knowledge service)"
TURN_FAILURE_MESSAGE = "agentnet.v1.ReportTurnFailureRequest.message"
_TURN_FAILURE_HINT = "send the exception's message only (the hub keeps 300 characters of it)"
SKILL_FIELDS = ("agentnet.v1.RegisterRequest.skill_md", "agentnet.v1.SetSkillRequest.skill_md")
#: Per-stream bookkeeping a client may send in bulk: one entry per channel it follows.
STREAM_ENTRY_FIELDS = ("agentnet.v1.Hello.cursors", "agentnet.v1.Ack.entries")
#: Page tokens (OperatorService's and HubService's lists): each carries an id or name (at most
#: --max-id-bytes) and a position, base64-encoded, so they are bounded by a multiple of the id limit
#: rather than by it.
PAGE_TOKEN_FIELDS = (
    *(
        f"agentnet.v1.{service}{rpc}Request.page_token"
        for service in ("OperatorService", "")
        for rpc in ("ListAgents", "ListChannels", "ListTasks")
    ),
    "agentnet.v1.ListPendingTurnsRequest.page_token",
)
PAGE_TOKEN_FACTOR = 4
#: Repeated fields that name each agent at most once (a repeat is refused).
UNIQUE_FIELDS = frozenset(
    {"agentnet.v1.Audience.agent_ids", "agentnet.v1.SayRequest.audience", "agentnet.v1.OpenChannelRequest.targets"}
)


def hub_request_limits(options: HubOptions) -> RequestLimits:
    """The limits every hub request and Connect frame is checked against."""
    payload = Bound(options.max_event_data_bytes, PayloadTooLarge, _PAYLOAD_HINT)
    skill = Bound(options.max_skill_bytes, PayloadTooLarge, "shorten the skill markdown")
    overrides = {name: payload for name in PAYLOAD_FIELDS}
    overrides.update({name: skill for name in SKILL_FIELDS})
    overrides[CHECKPOINT_FIELD] = Bound(options.max_checkpoint_bytes, PayloadTooLarge, _CHECKPOINT_HINT)
    overrides.update({name: Bound(options.max_stream_entries) for name in STREAM_ENTRY_FIELDS})
    overrides[TURN_FAILURE_MESSAGE] = Bound(MAX_REPORTED_MESSAGE_BYTES, InvalidArgument, _TURN_FAILURE_HINT)
    overrides["agentnet.v1.Ping.nonce"] = Bound(2**64 - 1)  # echoed in the Pong, never stored
    overrides.update({name: Bound(PAGE_TOKEN_FACTOR * options.max_id_bytes) for name in PAGE_TOKEN_FIELDS})
    return RequestLimits(
        FieldLimits(options.max_id_bytes, options.max_text_bytes, options.max_repeated_items),
        overrides,
        UNIQUE_FIELDS,
    )


def post_batch_refusal(
    count: int,
    max_batch: int,
    *,
    field: str = "post_batch.posts",
    limit: str = "Welcome.max_post_batch",
    per: str = "PostBatch frame",
) -> AgentNetError | None:
    """Why a batch of ``count`` posts is refused (empty, or over the hub's --max-batch), or None: a
    Connect ``post_batch`` frame (which ends the stream), or another replica's ``ForwardPosts`` call
    (``field``, ``limit`` and ``per`` name them). The posts' own fields are each post's business (its
    PostResult)."""
    if 0 < count <= max_batch:
        return None
    what = "is empty" if count == 0 else f"has {count} posts, over the limit of {max_batch} ({limit})"
    return InvalidArgument(
        f"{field} {what}; send between 1 and {max_batch} posts per {per}.",
        metadata={"field": field, "items": str(count), "limit": str(max_batch)},
    )


class RefusalAudit:
    """Audits a request refused by a field limit, like every other refusal (docs/governance.md "Audit").

    A post (a ``PostEnvelope`` request, a ``Connect`` post) is ``post_refused`` (subject: its
    channel), as if admission had refused it; any other request is ``request_refused``
    (subject: the RPC). The detail names the reason, the field, its size and the limit, never
    the field's content; the audit row clips every string it keeps (``netkernel.clip``).
    """

    def __init__(self, audit: Audit) -> None:
        self._audit = audit

    def __call__(self, actor: object, rpc: str, request: Message, err: AgentNetError) -> None:
        """Audit ``err``, the refusal of ``request`` (RPC ``rpc``) sent by ``actor`` (an agent id; else "")."""
        caller = actor if isinstance(actor, str) else ""
        detail: dict[str, Any] = {"reason": err.reason, "message": err.message}
        detail.update({k: v for k, v in err.metadata.items() if k in ("field", "size", "items", "limit")})
        envelope = getattr(request, "envelope", None)
        if envelope is not None and envelope.DESCRIPTOR.full_name == "agentnet.v1.Envelope":
            detail["event_type"] = envelope.event_type
            self._audit("post_refused", caller, envelope.channel_id, detail)
        else:
            self._audit("request_refused", caller, rpc, detail)
