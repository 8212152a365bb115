"""AG2 ids carry the hub envelope's parts: a receipt's seq is read back without a lookup."""

from __future__ import annotations

from agentnet.v1 import envelope_pb2

from ag2gateway import ids


def test_the_seq_and_the_hub_id_are_read_back_from_an_ag2_id() -> None:
    env = envelope_pb2.Envelope(envelope_id="e" * 32, seq=70000)
    env.created_time.seconds, env.created_time.nanos = 1_764_700_000, 123_456_000
    ag2 = ids.ag2_id(env)
    assert ids.seq_of(ag2) == 70000
    ref = ids.parse(ag2)
    assert ref is not None and (ref.seq, ref.envelope_id) == (70000, "e" * 32)
    assert ids.hub_envelope_id(ag2) == "e" * 32


def test_an_id_the_gateway_did_not_write_has_no_seq() -> None:
    for other in ("", "short", "z" * 40, "f" * 26):
        assert ids.seq_of(other) is None
        assert ids.parse(other) is None
