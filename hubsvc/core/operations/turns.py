"""Failed turns: ReportTurnFailure records a member's failed turn and applies its channel's policy.

A turn fails in the member's own process (its model call after its retries, a tool, its handler);
the SDK reports it so the rest of the channel learns of it instead of waiting for a reply that never
comes. The hub, under the channel's lock and in one commit:

* posts ``ag2.channel.turn_failed`` to every member (who failed, on which envelope, the error class
  and a redacted, clipped message: :mod:`netkernel.turn_failure`);
* writes one ``turn_failed`` audit row (actor: the member; subject: the channel);
* applies the channel's ``on_turn_failed`` policy (:func:`hubsvc.adapters.knobs.turn_failure_action`):
  ``close`` ends the channel with reason ``turn_failed`` (a consulting channel's default: its one
  answer is not coming), ``notify`` leaves it open.

It counts the report in ``agentnet_hub_turn_failures_total``. A report for a channel that has ended
is still audited (action ``none``) and answered with ``posted=False``.
"""

from __future__ import annotations

from typing import Any

from agentnet.v1 import envelope_pb2, hub_pb2

from hubsvc.adapters.knobs import TURN_FAILED_REASON, turn_failure_action
from hubsvc.core.admission import Batch
from hubsvc.core.channel import TERMINAL
from hubsvc.core.hub import HubCore
from hubsvc.core.util import audit_row
from netkernel.envelope import EV_TURN_FAILED
from netkernel.errors import InvalidArgument, OutOfRange
from netkernel.turn_failure import MAX_ATTEMPTS, MAX_ERROR_CLASS_CHARS, clip_message, redact, safe_message

AUDIT_KIND = "turn_failed"
"""The audit kind of a reported failed turn."""


def _check(request: hub_pb2.ReportTurnFailureRequest) -> None:
    """Refuse a malformed report (INVALID_ARGUMENT / OUT_OF_RANGE naming the field)."""
    for field in ("channel_id", "envelope_id", "error_class"):
        if not getattr(request, field):
            raise InvalidArgument(
                f"{field} is empty; a turn failure names the channel, the envelope whose turn failed and the "
                "error's class (e.g. 'openai.AuthenticationError').",
                metadata={"field": field},
            )
    if len(request.error_class) > MAX_ERROR_CLASS_CHARS:
        raise InvalidArgument(
            f"error_class has {len(request.error_class)} characters, over the limit of {MAX_ERROR_CLASS_CHARS}; "
            "send the exception's class name, and its text in message.",
            metadata={"field": "error_class", "size": str(len(request.error_class)), "limit": "128"},
        )
    if not 0 <= request.attempts <= MAX_ATTEMPTS:
        raise OutOfRange(
            f"attempts is {request.attempts}; give how many times the call was tried (1 to {MAX_ATTEMPTS}, "
            "0 = not said).",
            metadata={"field": "attempts", "limit": str(MAX_ATTEMPTS)},
        )


class TurnOps:
    """ReportTurnFailure."""

    def __init__(self, core: HubCore) -> None:
        self.core = core

    async def report_turn_failure(
        self, caller: str, request: hub_pb2.ReportTurnFailureRequest
    ) -> hub_pb2.ReportTurnFailureResponse:
        """Record the caller's failed turn on ``request.envelope_id``, tell the channel, apply its policy."""
        _check(request)
        core = self.core
        channel_id = request.channel_id
        meta = await core.require_member(caller, channel_id)  # NOT_FOUND / NOT_PARTICIPANT
        if meta.state not in TERMINAL:
            core.placement.require(channel_id)  # a live channel held elsewhere: its holder records it
        stored = await core.store.find_envelope(request.envelope_id)
        if stored is None or envelope_pb2.Envelope.FromString(stored).channel_id != channel_id:
            raise InvalidArgument(
                f"envelope '{clip_message(request.envelope_id, 64)}' is not an envelope of channel '{channel_id}'; "
                "name the envelope whose turn failed (the one being answered).",
                metadata={"field": "envelope_id", "channel_id": channel_id},
            )
        data: dict[str, Any] = {
            "agent_id": caller,
            "agent_name": core.name_for(caller),
            "envelope_id": request.envelope_id,
            "error_class": clip_message(redact(request.error_class), MAX_ERROR_CLASS_CHARS),
            "message": safe_message(request.message),
            "attempts": request.attempts,
        }
        async with core.channels.locked(channel_id) as ch:
            if ch is None or ch.is_terminal:
                core.audit(AUDIT_KIND, caller, channel_id, {**data, "channel_type": meta.type, "action": "none"})
                core.recorder.turn_failed(meta.type, "none")
                return hub_pb2.ReportTurnFailureResponse(posted=False)
            action = turn_failure_action(ch.spec.type, ch.spec.knobs)
            data["action"] = action
            batch = Batch()
            wire = core.admission.post_as_hub(ch, EV_TURN_FAILED, data, None, batch)
            detail = {**data, "channel_type": ch.spec.type}
            batch.writes.audit.append(audit_row(AUDIT_KIND, caller, channel_id, detail, core.clock()))
            if action == "close":
                end = {"agent_id": caller, "envelope_id": request.envelope_id, "error_class": data["error_class"]}
                core.admission.end(ch, TURN_FAILED_REASON, batch, detail=end)
            fut = core.channels.commit(ch, batch)
        await fut
        core.recorder.turn_failed(ch.spec.type, action)
        return hub_pb2.ReportTurnFailureResponse(posted=True, envelope=wire, action=action)
