"""Request field limits (issue #13 items 4, 6, 7): every string and repeated field of a request is
bounded at the seam, a refusal names the field and changes nothing, and what a refusal echoes or
records stays small even when a limit is raised."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import grpc
import pytest
from agentnet.v1 import connect_pb2, hub_pb2, hub_pb2_grpc

from hubsvc.core.options import HubOptions
from netkernel.errors import InvalidArgument, NotFound, OutOfRange, PayloadTooLarge
from tests.hubsvc.harness import (
    Participant,
    RunningHub,
    assert_eventually,
    collect,
    conversation,
    list_audit,
    make_envelope,
    register,
    running_hub,
)

EV_TEXT = "ag2.msg.text"


async def last_seq(p: Participant, channel_id: str) -> int:
    response = await p.rpc("DescribeChannel", hub_pb2.DescribeChannelRequest(channel_id=channel_id))
    return int(response.channel.last_seq)


@pytest.mark.parametrize("field", ["trace_id", "idempotency_key", "causation_id", "task_id"])
async def test_an_oversized_envelope_id_is_refused_on_the_stream_and_by_rpc(
    conv: tuple[Participant, Participant, str], field: str
) -> None:
    alice, _, channel_id = conv
    before = await last_seq(alice, channel_id)
    huge = "x" * 300_000
    with pytest.raises(InvalidArgument, match=rf"envelope\.{field} is 300000 bytes long, over the limit of 256") as err:
        await alice.say(channel_id, "hi", **{field: huge})
    assert err.value.metadata == {"field": f"envelope.{field}", "size": "300000", "limit": "256"}
    env = make_envelope(channel_id, EV_TEXT, {"text": "hi"}, **{field: huge})
    with pytest.raises(InvalidArgument, match=rf"envelope\.{field} is 300000 bytes"):
        await alice.rpc("PostEnvelope", hub_pb2.PostEnvelopeRequest(envelope=env))
    assert await last_seq(alice, channel_id) == before  # nothing admitted
    await alice.say(channel_id, "still fine", **{field: "y" * 256})  # at the limit: accepted


async def test_an_audience_repeating_one_id_is_refused(conv: tuple[Participant, Participant, str]) -> None:
    alice, bob, channel_id = conv
    before = await last_seq(alice, channel_id)
    with pytest.raises(
        InvalidArgument, match=r"envelope\.audience\.agent_ids has 300000 items, over the limit of 1024"
    ):
        await alice.say(channel_id, "hi", audience=[bob.agent_id] * 300_000)
    with pytest.raises(InvalidArgument, match=f"lists '{bob.agent_id}' more than once"):
        await alice.say(channel_id, "hi", audience=[bob.agent_id, bob.agent_id])
    with pytest.raises(InvalidArgument, match="audience lists"):
        await alice.rpc(
            "Say", hub_pb2.SayRequest(channel_id=channel_id, content="hi", audience=[bob.agent_id, bob.agent_id])
        )
    assert await last_seq(alice, channel_id) == before


async def test_an_oversized_seed_envelope_opens_no_channel(hub: RunningHub) -> None:
    alice = await register(hub.target, "alice")
    bob = await register(hub.target, "bob")
    seed = make_envelope("", EV_TEXT, {"text": "x" * (2 * 1024 * 1024)})
    request = hub_pb2.OpenChannelRequest(type="conversation", targets=[bob.agent_id], seed_envelope=seed)
    with pytest.raises(PayloadTooLarge, match=r"seed_envelope\.event_data_json is .* over the limit of 1048576"):
        await alice.rpc("OpenChannel", request)
    request = hub_pb2.OpenChannelRequest(type="conversation", targets=[bob.agent_id], message="x" * (2 * 1024 * 1024))
    with pytest.raises(PayloadTooLarge, match="message is"):
        await alice.rpc("OpenChannel", request)
    assert list((await alice.rpc("ListChannels", hub_pb2.ListChannelsRequest())).channels) == []
    await alice.close()
    await bob.close()


async def test_every_text_field_of_a_unary_request_is_bounded(hub: RunningHub) -> None:
    alice = await register(hub.target, "alice")
    cases: list[tuple[str, Any, str]] = [
        ("SearchContext", hub_pb2.SearchContextRequest(query="q" * 70_000), "query"),
        ("CloseChannel", hub_pb2.CloseChannelRequest(channel_id="c", reason="r" * 70_000), "reason"),
        ("SetResume", hub_pb2.SetResumeRequest(resume={"claimed_capabilities": ["c"] * 2000}), "resume"),
        ("SetSkill", hub_pb2.SetSkillRequest(skill_md="s" * 300_000), "skill_md"),
    ]
    for method, request, field in cases:
        with pytest.raises((InvalidArgument, PayloadTooLarge), match=field):
            await alice.rpc(method, request)
    await alice.close()


async def test_integers_beyond_sqlite_are_out_of_range_not_internal(
    hub: RunningHub, conv: tuple[Participant, Participant, str]
) -> None:
    alice, _, channel_id = conv
    for request in (
        hub_pb2.ReadWalRequest(channel_id=channel_id, from_seq=2**64 - 1),
        hub_pb2.ReadWalRequest(channel_id=channel_id, until_seq=2**63),
    ):
        with pytest.raises(OutOfRange, match="_seq is"):
            await collect(alice.stub.ReadWal(request, metadata=alice.metadata))
    with pytest.raises(OutOfRange, match="after_id"):
        await list_audit(hub, after_id=2**63)
    carol = await register(hub.target, "carol")
    with pytest.raises(OutOfRange, match=r"cursors\['c'\]"):
        await carol.connect(cursors={"c": 2**63})
    await carol.close()


async def test_an_ack_frame_over_the_limit_ends_the_stream(tmp_path: Path) -> None:
    async with running_hub(tmp_path / "hub.db", HubOptions(max_stream_entries=10)) as hub:
        alice = await register(hub.target, "alice")
        await alice.connect()
        entries = [connect_pb2.AckEntry(channel_id="c", seq=1)] * 11
        alice._outbox.put_nowait(connect_pb2.ConnectRequest(ack=connect_pb2.Ack(entries=entries)))
        assert alice._reader is not None
        await alice._reader
        assert alice.stream_error is not None
        assert alice.stream_error.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "ack.entries has 11 items" in (alice.stream_error.details() or "")
        await alice.close()


async def test_the_limits_are_options(tmp_path: Path) -> None:
    async with running_hub(tmp_path / "hub.db", HubOptions(max_id_bytes=2048)) as hub:
        alice, _, channel_id = await conversation(hub.target)
        await alice.say(channel_id, "hi", trace_id="t" * 2000)
        await alice.close()


async def test_a_refusal_echoes_and_records_little_of_a_huge_input(tmp_path: Path) -> None:
    # Limits raised far above the defaults: the caps on what refusals repeat must hold anyway.
    options = HubOptions(max_id_bytes=2 * 1024 * 1024, max_repeated_items=300_000)
    async with running_hub(tmp_path / "hub.db", options) as hub:
        alice, _, channel_id = await conversation(hub.target)
        strangers = [f"stranger-{i:08d}" for i in range(200_000)]
        env = make_envelope(channel_id, EV_TEXT, {"text": "hi"}, audience=strangers)
        with pytest.raises(InvalidArgument, match="non-participants") as refused:
            await alice.rpc("PostEnvelope", hub_pb2.PostEnvelopeRequest(envelope=env))
        assert len(refused.value.message.encode()) <= 1024
        with pytest.raises(InvalidArgument, match="non-participants"):
            await alice.post(channel_id, EV_TEXT, {"text": "hi"}, audience=strangers)  # in-stream: clipped too
        huge_channel = "c" * (1024 * 1024)
        with pytest.raises(NotFound) as missing:
            await alice.rpc(
                "PostEnvelope", hub_pb2.PostEnvelopeRequest(envelope=make_envelope(huge_channel, EV_TEXT, {}))
            )
        assert all(len(v) <= 256 for v in missing.value.metadata.values())

        async def three_refusals() -> list[hub_pb2.AuditRecord]:  # audit rows commit with the next group
            records = await list_audit(hub, kind="post_refused")
            return records if len(records) == 3 else []

        records = await assert_eventually(three_refusals)
        for record in records:
            assert len(record.detail_json) + len(record.subject_id) < 4096
            json.loads(record.detail_json)
        await alice.close()


async def test_a_refused_hello_over_the_limits_says_so(hub: RunningHub) -> None:
    alice = await register(hub.target, "alice")
    async with grpc.aio.insecure_channel(hub.target) as channel:
        stub = hub_pb2_grpc.HubServiceStub(channel)
        hello = connect_pb2.Hello(credential=alice.credential, client_name="n" * 1000)

        async def frames() -> Any:
            yield connect_pb2.ConnectRequest(hello=hello)

        with pytest.raises(InvalidArgument, match="client_name"):
            await collect(stub.Connect(frames()))
    await alice.close()


def test_every_field_the_hub_limits_name_exists() -> None:
    from google.protobuf import descriptor_pool

    from hubsvc.field_limits import hub_request_limits

    limits = hub_request_limits(HubOptions())
    pool = descriptor_pool.Default()
    for name in [*limits.overrides, *limits.unique]:
        message, _, field = name.rpartition(".")
        assert field in pool.FindMessageTypeByName(message).fields_by_name, name
