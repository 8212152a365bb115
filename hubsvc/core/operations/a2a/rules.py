"""The rules of an A2A call: who may see and call whom, which custom headers a call may carry, and
the words a cancelled call ends with."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from fnmatch import fnmatchcase

from agentnet.v1 import identity_pb2

from netkernel.errors import InvalidArgument

RESERVED_HEADER_PREFIX = "a2a-"
HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
"""A custom header key: an HTTP field name, i.e. an RFC 9110 token (ASCII tchar only)."""
CANCEL_REASON = "a2a_canceled"
"""The close reason of a consulting channel whose caller cancelled the call (the call ends CANCELED)."""
CANCELED_TEXT = "the caller cancelled the call"
"""The error of an execution that ended CANCELED (or FAILED because its caller went away)."""


def may_call(caller: identity_pb2.AgentRecord, target: identity_pb2.AgentRecord) -> bool:
    """Whether ``caller`` may see and invoke ``target``: A2A enabled, same project, and the
    caller's name (or id) matches one of the target's ``allowed_callers`` globs (none = anyone)."""
    settings = target.a2a
    if not settings.enabled or caller.passport.project != target.passport.project:
        return False
    if not settings.allowed_callers:
        return True
    name = caller.passport.name
    return any(p == caller.agent_id or fnmatchcase(name, p) for p in settings.allowed_callers)


def matches_any(offered: Iterable[str], wanted: Iterable[str]) -> bool:
    """One discovery filter: no wanted values, or any wanted value offered (case-insensitive)."""
    wanted_set = {w.lower() for w in wanted}
    return not wanted_set or any(o.lower() in wanted_set for o in offered)


def check_custom_headers(headers: Mapping[str, str]) -> None:
    """Refuse empty keys, keys that are not HTTP header names (RFC 9110 tokens: ASCII letters, digits
    and ``!#$%&'*+-.^_`|~``; no spaces, no look-alike characters), and keys in the reserved ``a2a-``
    namespace (any letter case)."""
    for key in headers:
        if not key:
            raise InvalidArgument("custom header keys must not be empty.", metadata={"field": "custom_headers"})
        if not HEADER_NAME.fullmatch(key):
            bad = next(c for c in key if not HEADER_NAME.fullmatch(c))
            raise InvalidArgument(
                f"custom header {key!r} is not an HTTP header name: {bad!r} (U+{ord(bad):04X}) is not allowed. Use "
                "ASCII letters, digits and !#$%&'*+-.^_`|~ only (RFC 9110 tokens), e.g. 'x-tenant'.",
                metadata={"field": "custom_headers", "key": key},
            )
        if key.lower().startswith(RESERVED_HEADER_PREFIX):
            raise InvalidArgument(
                f"custom header {key!r} uses the reserved 'a2a-' prefix (platform headers such as a2a-token); "
                "rename it, e.g. to 'x-" + key[len(RESERVED_HEADER_PREFIX) :] + "'.",
                metadata={"field": "custom_headers", "key": key},
            )
