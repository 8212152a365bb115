"""Bounded echoes: what a refusal may repeat of a client's input.

Error messages, error metadata and audit details often quote what the client sent. A
quote is clipped to a byte budget here, so a refusal never grows with the input it
refuses (a status too large for the client's metadata limit would reach it as
RESOURCE_EXHAUSTED instead of the real error) and an audit row stays small.
"""

from __future__ import annotations

from collections.abc import Mapping

#: Largest error message sent to a client, in UTF-8 bytes.
MAX_MESSAGE_BYTES = 1024
#: Largest error metadata value sent to a client, in UTF-8 bytes.
MAX_METADATA_VALUE_BYTES = 256
#: Most error metadata entries sent to a client.
MAX_METADATA_ENTRIES = 16
#: Largest string value (and subject) of an audit record's detail, in UTF-8 bytes.
MAX_AUDIT_VALUE_BYTES = 512


def clip_text(text: str, max_bytes: int) -> str:
    """``text`` if its UTF-8 form fits ``max_bytes``, else its head with "… (N more bytes)" appended.

    The result (marker included) never exceeds ``max_bytes`` bytes (for ``max_bytes`` ≥ 64) and never
    splits a character.
    """
    if len(text) * 4 <= max_bytes:
        return text
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= max_bytes:
        return text
    keep = max(max_bytes - 32, 0)
    head = data[:keep].decode("utf-8", "ignore")
    return f"{head}… ({len(data) - len(head.encode('utf-8', 'surrogatepass'))} more bytes)"


def clip_metadata(metadata: Mapping[str, str]) -> dict[str, str]:
    """Error metadata with at most :data:`MAX_METADATA_ENTRIES` entries, keys and values clipped."""
    items = list(metadata.items())[:MAX_METADATA_ENTRIES]
    return {clip_text(key, 64): clip_text(value, MAX_METADATA_VALUE_BYTES) for key, value in items}


def clip_detail(value: object) -> object:
    """A JSON-able audit detail with every string (at any depth) clipped to :data:`MAX_AUDIT_VALUE_BYTES`
    and every list to its first 16 items."""
    if isinstance(value, str):
        return clip_text(value, MAX_AUDIT_VALUE_BYTES)
    if isinstance(value, Mapping):
        return {clip_text(str(k), 64): clip_detail(v) for k, v in list(value.items())[:MAX_METADATA_ENTRIES]}
    if isinstance(value, list | tuple):
        items = [clip_detail(v) for v in value[:16]]
        if len(value) > 16:
            items.append(f"… ({len(value) - 16} more)")
        return items
    return value
