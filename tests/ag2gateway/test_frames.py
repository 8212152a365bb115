"""Inbound frames parse exactly where a number may matter, and a bad frame says what is wrong."""

from __future__ import annotations

import pytest

from ag2gateway import frames


def test_a_request_keeps_integers_beyond_64_bits_and_floats_exactly() -> None:
    raw = b'{"kind": "request", "request_id": "r1", "op": "x", "params": {"n": 1180591620717411303425, "f": 0.1}}'
    frame = frames.decode(raw)
    assert isinstance(frame, frames.Request)
    assert frame.params == {"n": 2**70 + 1, "f": 0.1} and type(frame.params["n"]) is int


def test_a_receipt_parses_and_a_number_where_a_string_belongs_is_refused() -> None:
    frame = frames.decode(b'{"kind": "receipt", "envelope_id": "e1", "status": "ack", "channel_id": "c"}')
    assert isinstance(frame, frames.Receipt) and (frame.envelope_id, frame.channel_id) == ("e1", "c")
    for number in (b"1180591620717411303425", b"1.5"):
        with pytest.raises(frames.FrameError, match="malformed receipt frame: envelope_id"):
            frames.decode(b'{"kind": "receipt", "status": "ack", "envelope_id": ' + number + b"}")


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        (b"nope", "frame is not JSON"),
        (b"[1.5]", "must be a JSON object"),
        (b'{"kind": ["receipt"]}', "unknown frame kind"),
        (b'{"kind": "nope", "x": 2.5}', "unknown frame kind"),
    ],
)
def test_a_frame_that_is_not_one_says_why(raw: bytes, says: str) -> None:
    with pytest.raises(frames.FrameError, match=says):
        frames.decode(raw)
