"""How a refusal reaches an AG2 client: AG2's four error codes (and ``error`` for the rest)."""

from __future__ import annotations

from ag2gateway import frames
from netkernel.errors import (
    AgentNetError,
    AlreadyExists,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    NotParticipant,
    PermissionDenied,
    ProtocolError,
    Unauthenticated,
)


class Ag2Refusal(Exception):
    """A refusal with AG2's error code (``not_found``, ``access_denied``, ``protocol_error``, ``auth_failed``)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def code_of(err: Exception) -> tuple[str, str]:
    """AG2's (code, message) for any exception an op raised."""
    if isinstance(err, Ag2Refusal):
        return err.code, err.message
    if isinstance(err, AgentNetError):
        message = f"{err.reason}: {err.message}"
        if isinstance(err, NotFound):
            return frames.NOT_FOUND, message
        if isinstance(err, PermissionDenied | NotParticipant):
            return frames.ACCESS_DENIED, message
        if isinstance(err, Unauthenticated):
            return frames.AUTH_FAILED, message
        if isinstance(err, ProtocolError | InvalidArgument | FailedPrecondition | AlreadyExists):
            return frames.PROTOCOL_ERROR, message
        return frames.GENERIC_ERROR, message
    return frames.GENERIC_ERROR, f"{type(err).__name__}: {err}"
