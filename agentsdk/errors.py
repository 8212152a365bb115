"""The network's exception hierarchy (re-exported from :mod:`netkernel.errors`, where it is defined).

Servers raise these classes; the SDK re-raises the class the server raised. ``docs/errors.md`` has the table.
"""

from netkernel.errors import (
    ERROR_CLASSES,
    ERROR_DOMAIN,
    AgentNetError,
    AlreadyExists,
    ChannelClosed,
    DepthExceeded,
    FailedPrecondition,
    InboxFull,
    InternalError,
    InvalidArgument,
    LimitExceeded,
    NotFound,
    NotParticipant,
    NotYourTurn,
    OutOfRange,
    PayloadTooLarge,
    PermissionDenied,
    ProtocolError,
    RateLimited,
    RuleDenied,
    Superseded,
    Timeout,
    TokenExpired,
    TurnFailed,
    Unauthenticated,
    Unavailable,
    Unimplemented,
    error_from_reason,
    error_from_rpc,
    error_status,
)

# AG2 1.2.1's names for the same classes (ag2.network.errors), so code moving from ag2.network keeps
# its except clauses (docs/from-ag2.md).
NetworkError = AgentNetError
"""AG2's name for :class:`AgentNetError`, the base of every network error."""
NotFoundError = NotFound
"""AG2's name for :class:`NotFound`."""
AccessDeniedError = PermissionDenied
"""AG2's name for :class:`PermissionDenied` (a rule or the arbiter refused)."""
AuthError = Unauthenticated
"""AG2's name for :class:`Unauthenticated` (no, a wrong or a revoked credential)."""

__all__ = [
    "ERROR_CLASSES",
    "ERROR_DOMAIN",
    "AccessDeniedError",
    "AgentNetError",
    "AlreadyExists",
    "AuthError",
    "ChannelClosed",
    "DepthExceeded",
    "FailedPrecondition",
    "InboxFull",
    "InternalError",
    "InvalidArgument",
    "LimitExceeded",
    "NetworkError",
    "NotFound",
    "NotFoundError",
    "NotParticipant",
    "NotYourTurn",
    "OutOfRange",
    "PayloadTooLarge",
    "PermissionDenied",
    "ProtocolError",
    "RateLimited",
    "RuleDenied",
    "Superseded",
    "Timeout",
    "TokenExpired",
    "TurnFailed",
    "Unauthenticated",
    "Unavailable",
    "Unimplemented",
    "error_from_reason",
    "error_from_rpc",
    "error_status",
]
