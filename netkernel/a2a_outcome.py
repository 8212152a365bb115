"""How a callee's reply ends an A2A call: read once here for the hub and the A2A gateway."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from netkernel.wire import InvocationStatus

REPLY_STATUSES: tuple[InvocationStatus, ...] = ("completed", "input-required", "failed")
"""What a callee's reply may claim in ``event_data.a2a.status`` (anything else reads as completed)."""


def reply_outcome(event_data: Mapping[str, Any], callee: str) -> tuple[InvocationStatus, str, str]:
    """(status, result, error) of a reply's ``event_data``: its text, and the status its optional
    ``a2a`` object claims; a failed reply's error is its ``a2a.error``, else its text, else
    "<callee> failed"."""
    text = event_data.get("text", "")
    text = text if isinstance(text, str) else ""
    meta = event_data.get("a2a")
    outcome = meta if isinstance(meta, dict) else {}
    claimed = outcome.get("status")
    status: InvocationStatus = "completed"
    for known in REPLY_STATUSES:
        if claimed == known:
            status = known
    if status == "failed":
        return status, "", str(outcome.get("error") or text or f"{callee} failed")
    return status, text, ""
