"""The A2A call an agent is answering: its dispatch, custom headers and call token.

The default handler (and :func:`dispatch_scope` in custom handlers) makes the
dispatch current while the agent answers, so :func:`get_current_custom_headers`
works anywhere in that turn and nested ``invoke_agent`` calls are linked to it.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

from netkernel.envelope import EV_TEXT, Envelope, text_envelope

ReplyStatus = Literal["completed", "input-required", "failed"]
"""How an answer ends the call (see ``A2AReply`` in a2a.proto)."""


@dataclass
class Dispatch:
    """One A2A call as the callee sees it (``A2ADispatch`` in a2a.proto)."""

    execution_id: str
    root_session_id: str
    message: str
    skill: str = ""
    custom_headers: dict[str, str] = field(default_factory=dict)
    call_token: str = field(default="", repr=False)
    """Links nested calls to this execution. The dispatch never carries one (the channel's
    log is readable by its members): ``invoke_agent`` asks the hub for it on the first
    nested call (``RefreshCallToken`` by execution id) and again when it expires."""
    call_token_expires_at: str = ""
    """RFC 3339 time the token expires (hub clock); "" until one was obtained."""
    call_token_lock: asyncio.Lock = field(default_factory=asyncio.Lock, repr=False, compare=False)
    """Held while the token is asked for: nested calls made at once share one request (the hub
    caps the tokens one call holds, ``--a2a-max-tokens``)."""
    channel_id: str = ""
    """The consulting channel carrying the call."""
    envelope_id: str = ""
    """The question envelope."""
    input_question: str | None = None
    """Set by the ``request_input`` tool: the answer becomes "input-required" with this question."""

    @classmethod
    def from_envelope(cls, envelope: Envelope) -> Dispatch | None:
        """The dispatch an EV_TEXT question carries (``event_data["a2a"]``), or None.

        Only the hub writes dispatches: it refuses ``event_data.a2a`` with an
        ``execution_id`` in every envelope a client sends (posts and OpenChannel seeds),
        so one found in a delivered envelope is InvokeAgent's. Reserved ``a2a-`` headers
        are dropped all the same (the hub never forwards them)."""
        data = envelope.event_data.get("a2a") if envelope.event_type == EV_TEXT else None
        if not isinstance(data, dict) or not data.get("execution_id"):
            return None
        headers = data.get("custom_headers")
        return cls(
            execution_id=str(data["execution_id"]),
            root_session_id=str(data.get("root_session_id", "")),
            message=str(data.get("message", envelope.text)),
            skill=str(data.get("skill", "")),
            custom_headers=_custom_headers(headers),
            channel_id=envelope.channel_id,
            envelope_id=envelope.envelope_id,
        )

    def reply(self, sender_id: str, text: str, *, status: ReplyStatus = "completed", error: str = "") -> Envelope:
        """The EV_TEXT answer to this call (``status`` "input-required": ``text`` is the question)."""
        env = text_envelope(self.channel_id, sender_id, text, causation_id=self.envelope_id or None)
        if status != "completed":
            env.event_data["a2a"] = {"status": status, "error": error} if error else {"status": status}
        return env

    def failure(self, sender_id: str, exc: BaseException) -> Envelope:
        """The "failed" answer to this call, naming what the answering code raised."""
        return self.reply(sender_id, "", status="failed", error=f"{type(exc).__name__}: {exc}")


def _custom_headers(headers: object) -> dict[str, str]:
    """A dispatch's custom headers, without any key in the reserved ``a2a-`` namespace."""
    if not isinstance(headers, dict):
        return {}
    return {str(k): str(v) for k, v in headers.items() if not str(k).lower().startswith("a2a-")}


_current: contextvars.ContextVar[Dispatch | None] = contextvars.ContextVar("agentsdk_a2a_dispatch", default=None)


def current_dispatch() -> Dispatch | None:
    """The A2A call being answered in this context, if any."""
    return _current.get()


@contextlib.contextmanager
def dispatch_scope(dispatch: Dispatch | None) -> Iterator[Dispatch | None]:
    """Make ``dispatch`` current for the block (a no-op scope for None)."""
    token = _current.set(dispatch)
    try:
        yield dispatch
    finally:
        _current.reset(token)


def get_current_custom_headers() -> dict[str, str]:
    """The custom headers the caller forwarded with the call being answered (``{}`` outside one).

    Platform (``a2a-``) headers are never among them; the hub refuses such keys.
    """
    dispatch = _current.get()
    return dict(dispatch.custom_headers) if dispatch is not None else {}
