"""UTF-8 encoding and byte-offset rules shared by every backend."""

from __future__ import annotations

from netkernel.errors import FailedPrecondition, InvalidArgument, OutOfRange


def encode_text(text: str, *, what: str = "content") -> bytes:
    """UTF-8 encode ``text``; lone surrogates (not representable in UTF-8) raise InvalidArgument."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidArgument(f"{what} is not valid Unicode text: {exc.reason}") from None


def decode_text(data: bytes | bytearray, path: str) -> str:
    """Decode a stored file; bytes that are not UTF-8 (e.g. edited by hand) raise FailedPrecondition."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise FailedPrecondition(f"{path} does not hold UTF-8 text", metadata={"path": path}) from None


def is_continuation_byte(byte: int) -> bool:
    """True for the 2nd-4th byte of a multi-byte UTF-8 character (bit pattern 10xxxxxx)."""
    return byte & 0xC0 == 0x80


#: Largest offset a query may carry: SQLite and Redis take signed 64-bit integers.
MAX_QUERY_OFFSET = 2**63 - 1


def query_offset(offset: int) -> int:
    """``offset`` clamped to ``0..MAX_QUERY_OFFSET`` for a database query; a clamped offset lies past
    the end of any file, so :func:`check_offset` still refuses the original one (OUT_OF_RANGE)."""
    return min(max(offset, 0), MAX_QUERY_OFFSET)


def check_offset(path: str, offset: int, size: int, byte_at_offset: int | None) -> None:
    """Refuse an offset that is negative, past ``size`` or inside a multi-byte character.

    ``byte_at_offset`` is the stored byte at ``offset`` (None when ``offset == size``).
    """
    meta = {"path": path, "offset": str(offset), "size": str(size)}
    if offset < 0 or offset > size:
        raise OutOfRange(f"offset {offset} is outside {path} (0..{size} bytes)", metadata=meta)
    if byte_at_offset is not None and is_continuation_byte(byte_at_offset):
        raise OutOfRange(f"offset {offset} falls inside a multi-byte UTF-8 character of {path}", metadata=meta)


def slice_from(path: str, data: bytes | bytearray, offset: int) -> str:
    """The text of ``data`` from byte ``offset`` on, after :func:`check_offset`."""
    check_offset(path, offset, len(data), data[offset] if 0 <= offset < len(data) else None)
    return decode_text(data[offset:], path)
