"""Bad requests are refused whole, with INVALID_ARGUMENT, before anything changes (issue #13, items 5, 7, 8).

* JSON a client sends is bounded in depth (HubOptions.max_json_depth): a seed nested 1,000
  levels deep used to pass the parser, create the channel in memory and then fail with INTERNAL.
* Durations are finite, positive and bounded (max_ttl_seconds, max_wait_seconds).
* Names are matched whole ("alice\\n" is not a valid name).
"""

from __future__ import annotations

import json
import math

import pytest
from agentnet.v1 import envelope_pb2, hub_pb2, identity_pb2, task_pb2

from agentsdk.errors import InvalidArgument
from tests.hubsvc.harness import EV_TEXT, Participant, RunningHub, call, make_envelope, register

DEEP = "[" * 1000 + "]" * 1000
DEEP_OBJECT = '{"a":' * 1000 + "1" + "}" * 1000


def nested(levels: int) -> str:
    return '{"x":' * levels + "0" + "}" * levels


async def test_a_deeply_nested_seed_is_refused_and_creates_nothing(
    hub: RunningHub, trio: tuple[Participant, Participant, Participant]
) -> None:
    alice, bob, _ = trio
    for data in (f'{{"text":"hi","deep":{DEEP}}}', DEEP_OBJECT):
        seed = envelope_pb2.Envelope(event_type=EV_TEXT, event_data_json=data)
        request = hub_pb2.OpenChannelRequest(type="consulting", targets=["bob"], seed_envelope=seed)
        with pytest.raises(InvalidArgument, match=r"deeper than 64 levels|not valid JSON"):
            await alice.rpc("OpenChannel", request)
    assert not list(hub.live_channels())
    assert not (await bob.rpc("ListChannels", hub_pb2.ListChannelsRequest(include_ended=True))).channels
    assert bob.drain() == []
    # 64 levels are fine.
    seed = envelope_pb2.Envelope(event_type=EV_TEXT, event_data_json=f'{{"text":"hi","d":{nested(63)}}}')
    opened = await alice.rpc(
        "OpenChannel", hub_pb2.OpenChannelRequest(type="consulting", targets=["bob"], seed_envelope=seed)
    )
    assert opened.channel.channel_id


async def test_deep_json_is_refused_everywhere_the_hub_parses_it(
    conv: tuple[Participant, Participant, str],
) -> None:
    alice, _, channel_id = conv
    deep = nested(65)
    with pytest.raises(InvalidArgument, match="deeper than 64"):  # on the Connect stream
        await alice.post(channel_id, EV_TEXT, {"text": "x", "deep": json.loads(deep)})
    env = envelope_pb2.Envelope(channel_id=channel_id, event_type=EV_TEXT, event_data_json=f'{{"d":{deep}}}')
    with pytest.raises(InvalidArgument, match="deeper than 64"):
        await alice.rpc("PostEnvelope", hub_pb2.PostEnvelopeRequest(envelope=env))
    with pytest.raises(InvalidArgument, match="deeper than 64"):
        await alice.rpc(
            "OpenChannel",
            hub_pb2.OpenChannelRequest(type="conversation", targets=["bob"], knobs_json=f'{{"k":{deep}}}'),
        )
    with pytest.raises(InvalidArgument, match="deeper than 64"):
        await alice.rpc("CallTool", hub_pb2.CallToolRequest(name="peers", arguments_json=f'{{"k":{deep}}}'))
    started = await alice.rpc("ReportTask", hub_pb2.ReportTaskRequest(kind=task_pb2.TASK_EVENT_KIND_STARTED))
    progress = hub_pb2.ReportTaskRequest(
        task_id=started.task.task_id, kind=task_pb2.TASK_EVENT_KIND_PROGRESS, payload_json=DEEP
    )
    with pytest.raises(InvalidArgument, match="deeper than 64"):
        await alice.rpc("ReportTask", progress)


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, 1e12, 0.0, -1.0])
async def test_durations_must_be_finite_positive_and_bounded(
    trio: tuple[Participant, Participant, Participant], value: float
) -> None:
    alice, bob, _ = trio
    with pytest.raises(InvalidArgument, match="ttl_seconds"):
        await alice.rpc(
            "OpenChannel", hub_pb2.OpenChannelRequest(type="conversation", targets=["bob"], ttl_seconds=value)
        )
    with pytest.raises(InvalidArgument, match="invite_ack_timeout_seconds"):
        await alice.rpc(
            "OpenChannel",
            hub_pb2.OpenChannelRequest(type="conversation", targets=["bob"], invite_ack_timeout_seconds=value),
        )
    with pytest.raises(InvalidArgument, match="ttl_seconds"):
        await alice.rpc(
            "ReportTask", hub_pb2.ReportTaskRequest(kind=task_pb2.TASK_EVENT_KIND_STARTED, ttl_seconds=value)
        )
    with pytest.raises(InvalidArgument, match="timeout_seconds"):
        await alice.rpc("InvokeAgent", hub_pb2.InvokeAgentRequest(agent_id="bob", message="hi", timeout_seconds=value))
    if value:  # 0 means "the default" for these
        with pytest.raises(InvalidArgument, match="timeout_seconds"):
            await alice.rpc("Delegate", hub_pb2.DelegateRequest(target="bob", prompt="hi", timeout_seconds=value))
        with pytest.raises(InvalidArgument, match="timeout_seconds"):
            await alice.rpc("WaitTask", hub_pb2.WaitTaskRequest(task_id="t", timeout_seconds=value))
        with pytest.raises(InvalidArgument, match="wait_timeout_seconds"):
            await alice.rpc(
                "OpenChannel",
                hub_pb2.OpenChannelRequest(
                    type="conversation", targets=["bob"], wait_until_opened=True, wait_timeout_seconds=value
                ),
            )
    assert not (await bob.rpc("ListChannels", hub_pb2.ListChannelsRequest(include_ended=True))).channels


async def test_an_envelope_ttl_beyond_the_maximum_is_refused(conv: tuple[Participant, Participant, str]) -> None:
    alice, _, channel_id = conv
    env = make_envelope(channel_id, EV_TEXT, {"text": "hi"}, ttl_seconds=2**31 - 1)
    with pytest.raises(InvalidArgument, match=r"envelope\.ttl_seconds"):
        await alice.rpc("PostEnvelope", hub_pb2.PostEnvelopeRequest(envelope=env))


async def test_a_name_with_a_trailing_newline_is_refused(hub: RunningHub) -> None:
    import grpc
    from agentnet.v1 import hub_pb2_grpc

    async with grpc.aio.insecure_channel(hub.target) as ch:
        stub = hub_pb2_grpc.HubServiceStub(ch)
        for name in ("alice\n", "alice\r\n", "\nalice"):
            with pytest.raises(InvalidArgument, match="passport name"):
                await call(stub.Register(hub_pb2.RegisterRequest(passport=identity_pb2.Passport(name=name))))
    assert not list(hub.core.registry.entries())
    await (await register(hub.target, "alice")).close()
