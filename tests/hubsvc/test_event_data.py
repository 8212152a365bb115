"""The envelopes the hub writes match what docs/hub.md ("Event types") and envelope.proto tell a
client author: who sends them, which event_data keys they carry, and their admission time as both
created_at (RFC 3339 text) and created_time (a Timestamp of the same instant)."""

from __future__ import annotations

from datetime import UTC, datetime

from agentnet.v1 import envelope_pb2, hub_pb2, task_pb2

from tests.event_table import event_table
from tests.hubsvc.harness import Participant, collect, data_of


def assert_documented(env: envelope_pb2.Envelope, sender: str) -> None:
    """``env`` comes from ``sender`` and carries only keys its docs/hub.md row names."""
    row = event_table()[env.event_type]
    assert env.sender_id == sender, env
    assert set(data_of(env)) <= row.keys, (env.event_type, set(data_of(env)) - row.keys)


def assert_same_instant(created_at: str, created_time: object) -> None:
    """created_time is set and names the instant created_at spells, to the microsecond."""
    assert created_at, "created_at is empty"
    assert isinstance(created_time, type(envelope_pb2.Envelope().created_time))
    assert created_time.ByteSize() > 0, "created_time is not set"
    at = datetime.fromisoformat(created_at.replace("Z", "+00:00"))
    assert created_time.ToDatetime(tzinfo=UTC) == at


async def test_channel_lifecycle_envelopes_come_from_the_hub_with_the_documented_keys(
    conv: tuple[Participant, Participant, str],
) -> None:
    alice, bob, cid = conv
    await alice.rpc("CloseChannel", hub_pb2.CloseChannelRequest(channel_id=cid))
    read = bob.stub.ReadWal(hub_pb2.ReadWalRequest(channel_id=cid), metadata=bob.metadata)  # the invite is bob's
    wal = [r.envelope for r in await collect(read)]
    by_type = {env.event_type: env for env in wal}
    invite = by_type["ag2.channel.invite"]
    assert_documented(invite, "hub")
    assert list(invite.audience.agent_ids) == [bob.agent_id]
    assert set(data_of(invite)) == {
        "channel_id",
        "type",
        "initiator",
        "initiator_name",
        "intent",
        "participants",
        "knobs",
    }
    assert_documented(by_type["ag2.channel.invite_ack"], bob.agent_id)
    assert_documented(by_type["ag2.channel.opened"], "hub")
    closed = by_type["ag2.channel.closed"]
    assert_documented(closed, "hub")
    assert data_of(closed) == {"reason": "closed_by_agent", "closed_by": alice.agent_id}


async def test_cancel_request_comes_from_the_canceller(conv: tuple[Participant, Participant, str]) -> None:
    alice, bob, cid = conv
    started = await bob.rpc(
        "ReportTask", hub_pb2.ReportTaskRequest(kind=task_pb2.TASK_EVENT_KIND_STARTED, title="t", channel_id=cid)
    )
    await alice.rpc("CancelTask", hub_pb2.CancelTaskRequest(task_id=started.task.task_id, reason="stop"))
    request = await bob.next_of("ag2.task.cancel_request")
    assert_documented(request, alice.agent_id)
    assert data_of(request) == {"task_id": started.task.task_id, "reason": "stop"}


async def test_admission_time_is_stamped_as_text_and_as_a_timestamp(conv: tuple[Participant, Participant, str]) -> None:
    alice, bob, cid = conv
    posted = await alice.say(cid, "the needle in the haystack")
    assert_same_instant(posted.created_at, posted.created_time)
    delivered = await bob.next(lambda e: e.envelope_id == posted.envelope_id)
    assert delivered.created_time == posted.created_time
    unary = await alice.rpc(
        "PostEnvelope",
        hub_pb2.PostEnvelopeRequest(
            envelope=envelope_pb2.Envelope(
                channel_id=cid, event_type="ag2.msg.text", event_data_json='{"text": "again"}'
            )
        ),
    )
    assert_same_instant(unary.envelope.created_at, unary.envelope.created_time)
    wal = await collect(alice.stub.ReadWal(hub_pb2.ReadWalRequest(channel_id=cid), metadata=alice.metadata))
    for record in wal:  # the hub's own envelopes (invite, opened) included
        assert_same_instant(record.envelope.created_at, record.envelope.created_time)
    found = await bob.rpc("SearchContext", hub_pb2.SearchContextRequest(query="needle", channel_id=cid))
    (excerpt,) = found.excerpts
    assert excerpt.created_at == posted.created_at
    assert excerpt.created_time == posted.created_time


async def test_a_time_on_post_is_ignored(conv: tuple[Participant, Participant, str]) -> None:
    alice, _, cid = conv
    posted = await alice.say(cid, "hello", created_at="2000-01-01T00:00:00.000000Z")
    assert posted.created_at != "2000-01-01T00:00:00.000000Z"
    assert_same_instant(posted.created_at, posted.created_time)
