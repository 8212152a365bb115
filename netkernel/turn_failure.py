"""What a failed turn may say about itself: a short error class and a clipped, redacted message.

A turn fails in an agent's own process (its model call, a tool or its handler raised); the SDK
reports it to the hub (``ReportTurnFailure``), which posts it into the channel as an
``ag2.channel.turn_failed`` event and audits it. Both sides pass the text through :func:`redact`
and :func:`clip_message`: the event reaches every member of the channel, so it must never carry a
secret (an API key echoed in a provider's error, a bearer token) nor grow with the error. The
prompt is never part of it: only the exception's class and message are reported.
"""

from __future__ import annotations

import re

MAX_ERROR_CLASS_CHARS = 128
"""Longest error class a report may carry (a Python class name, ``openai.AuthenticationError``);
longer is INVALID_ARGUMENT."""
MAX_REPORTED_MESSAGE_BYTES = 4096
"""Longest message a report may carry, in UTF-8 bytes (INVALID_ARGUMENT beyond); the hub keeps
:data:`MAX_MESSAGE_CHARS` of it."""
MAX_MESSAGE_CHARS = 300
"""Characters of the message the event and the audit row keep (the rest is cut, marked "…")."""
MAX_ATTEMPTS = 100
"""Largest ``attempts`` a report may give (OUT_OF_RANGE beyond)."""

REDACTED = "[redacted]"

_SECRETS = (
    # OpenAI-style and similar provider keys: sk-..., sk-proj-..., rk-..., pk-...
    re.compile(r"\b(?:sk|rk|pk)-[A-Za-z0-9_\-*]{6,}"),
    # "Bearer <token>" / "Basic <token>" in an echoed header
    re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=\-]{6,}"),
    # key=value / "api_key": "value" pairs naming a secret
    re.compile(
        r"(?i)\b(api[_-]?key|access[_-]?token|token|secret|password|passwd|authorization|credential)"
        r"(\"?\s*[:=]\s*\"?)([^\s\"',;&]{4,})"
    ),
    # long opaque runs (hex or base64-ish credentials): 32+ characters with no spaces
    re.compile(r"\b[A-Za-z0-9_\-]{40,}\b"),
)


def redact(text: str) -> str:
    """``text`` with anything shaped like a credential replaced by ``[redacted]``.

    Provider keys (``sk-…``), bearer/basic tokens, ``api_key=…`` style pairs and long opaque runs
    of 40+ id characters are replaced; the words around them stay, so the message still says
    what went wrong ("Incorrect API key provided: [redacted]")."""
    text = _SECRETS[0].sub(REDACTED, text)
    text = _SECRETS[1].sub(lambda m: f"{m.group(1)} {REDACTED}", text)
    text = _SECRETS[2].sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
    return _SECRETS[3].sub(REDACTED, text)


def clip_message(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """The first line-joined ``limit`` characters of ``text`` ("…" marks a cut)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def safe_message(text: str) -> str:
    """What a report's message becomes in the event and the audit row: redacted, then clipped."""
    return clip_message(redact(text))


def error_class_of(exc: BaseException) -> str:
    """A short name for ``exc``'s class: ``module.Class`` for a library's error
    (``openai.AuthenticationError``), the bare name for a builtin (``ValueError``)."""
    cls = type(exc)
    module = cls.__module__.split(".")[0]
    name = cls.__qualname__ if module == "builtins" else f"{module}.{cls.__qualname__}"
    return name[:MAX_ERROR_CLASS_CHARS]


def describe(exc: BaseException) -> tuple[str, str]:
    """(error class, safe message) of an exception that ended a turn; the cause chain's first
    non-empty message is used when ``exc`` has none (a wrapped connection error)."""
    message = str(exc)
    cause = exc.__cause__ or exc.__context__
    if not message and cause is not None:
        message = f"{type(cause).__name__}: {cause}"
    return error_class_of(exc), safe_message(message or type(exc).__name__)
