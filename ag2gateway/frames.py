"""AG2 1.2.1's WebSocket frames, as the released client sends and expects them.

Every WebSocket message is one JSON object with a ``kind`` discriminator. Client → gateway:
``hello``, ``request``, ``receipt``, ``ping`` / ``pong``. Gateway → client: ``welcome``,
``response``, ``error``, ``notify``, ``pong``. The inbound models validate field types, so a frame
of the wrong shape gets a clear ``error`` frame (code ``protocol_error``) naming the field, as AG2's
own hub answers, and the connection stays open.
"""

from __future__ import annotations

import json
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

PROTOCOL_ERROR = "protocol_error"
"""AG2's code for a malformed frame or an unknown op."""
NOT_FOUND = "not_found"
ACCESS_DENIED = "access_denied"
AUTH_FAILED = "auth_failed"
GENERIC_ERROR = "error"
"""AG2's code for any failure that is none of the four above."""


class _Inbound(BaseModel):
    """A frame a client sends; unknown keys are ignored (AG2's decoder would refuse them, we are lenient)."""

    model_config = ConfigDict(extra="ignore", strict=True)


class Hello(_Inbound):
    """Bind the connection to an existing identity (re-attach) and replay what it missed."""

    kind: Literal["hello"]
    name: str
    auth_scheme: str = "none"
    auth_claim: dict[str, Any] = Field(default_factory=dict)
    since_envelope_id: str | None = None
    """None: no replay; "": replay everything the hub's cursors have not passed; an id: replay above it."""


class Request(_Inbound):
    """One control-plane operation; ``request_id`` is echoed on the response."""

    kind: Literal["request"]
    request_id: str
    op: str
    params: dict[str, Any] = Field(default_factory=dict)


class Receipt(_Inbound):
    """Ack (the hub's cursor moves) or nack (it does not) of one ``notify``."""

    kind: Literal["receipt"]
    envelope_id: str
    status: str
    recipient_id: str = ""
    channel_id: str = ""
    reason: str = ""


class Ping(_Inbound):
    """Application-level heartbeat (AG2's WsLink uses WebSocket pings instead)."""

    kind: Literal["ping"]


class Pong(_Inbound):
    """Heartbeat reply (ignored)."""

    kind: Literal["pong"]


Inbound = Hello | Request | Receipt | Ping | Pong
_MODELS: dict[str, type[_Inbound]] = {
    "hello": Hello,
    "request": Request,
    "receipt": Receipt,
    "ping": Ping,
    "pong": Pong,
}


_NO_NUMBERS = frozenset({"receipt", "ping", "pong"})
"""Frame kinds without a number field (see :func:`decode`)."""


class FrameError(ValueError):
    """A message that is not a valid inbound frame; ``message`` is what the ``error`` frame says."""

    def __init__(self, message: str, request_id: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.request_id = request_id
        """The request id, when the frame was a request with a readable one (the answer is then a response)."""


def _holds_float(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is float:
            return True
        if kind is dict:
            stack.extend(item.values())
        elif kind is list:
            stack.extend(item)
    return False


def decode(raw: str | bytes) -> Inbound:
    """One inbound frame from a WebSocket message, or :class:`FrameError` saying what is wrong."""
    try:
        data = orjson.loads(raw)
        plain = type(data) is dict and type(kind := data.get("kind")) is str and kind in _NO_NUMBERS
        if not plain and _holds_float(data):
            # exact where a number may matter (a request's params, a hello's claim): orjson makes an integer
            # beyond 64 bits a float, so a frame holding a float is parsed again by the exact stdlib parser. A
            # receipt, ping or pong has no number field (a number where a string belongs is refused either
            # way), so it is not walked for one.
            data = json.loads(raw)
    except RecursionError:  # deep enough for orjson, too deep for the stdlib parser
        raise FrameError("frame is nested too deeply; send one JSON object per WebSocket message") from None
    except ValueError as err:
        raise FrameError(f"frame is not JSON: {err}; send one JSON object per WebSocket message") from None
    if not isinstance(data, dict):
        raise FrameError("frame must be a JSON object with a 'kind' field")
    kind = data.get("kind")
    model = _MODELS.get(kind) if isinstance(kind, str) else None
    if model is None:
        raise FrameError(f"unknown frame kind: {kind!r}; expected one of {sorted(_MODELS)}")
    try:
        return model.model_validate(data)  # type: ignore[return-value]
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "frame"
        request_id = data.get("request_id") if kind == "request" else None
        raise FrameError(
            f"malformed {kind} frame: {where}: {first['msg']}",
            request_id if isinstance(request_id, str) else None,
        ) from None


def encode(frame: dict[str, Any]) -> bytes:
    """The JSON text of an outbound frame (a dict with ``kind``)."""
    return orjson.dumps(frame)


def welcome(endpoint_id: str, hub_time: str) -> dict[str, Any]:
    """Handshake accepted."""
    return {"kind": "welcome", "endpoint_id": endpoint_id, "hub_time": hub_time}


def error(code: str, message: str, envelope_id: str | None = None) -> dict[str, Any]:
    """A refusal outside the request/response path (a failed hello, a malformed frame)."""
    return {"kind": "error", "code": code, "message": message, "envelope_id": envelope_id}


def response_ok(request_id: str, result: Any) -> dict[str, Any]:
    """A request's result."""
    return {
        "kind": "response",
        "request_id": request_id,
        "ok": True,
        "result": result,
        "error_code": "",
        "error_message": "",
    }


def response_error(request_id: str, code: str, message: str) -> dict[str, Any]:
    """A request's refusal (AG2's client re-raises the class ``code`` names)."""
    return {
        "kind": "response",
        "request_id": request_id,
        "ok": False,
        "result": None,
        "error_code": code,
        "error_message": message,
    }


def notify(envelope: dict[str, Any], recipient_id: str) -> dict[str, Any]:
    """One delivery to one identity of the connection."""
    return {"kind": "notify", "envelope": envelope, "recipient_id": recipient_id}


def pong() -> dict[str, Any]:
    """Heartbeat reply."""
    return {"kind": "pong"}
