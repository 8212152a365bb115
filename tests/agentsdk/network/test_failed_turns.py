"""Failed turns are first-class: an agent whose model call fails reports it, the channel hears of it,
the asker gets TurnFailed at once, and the hub audits and counts it (docs/hub.md "Failed turns").

The real ``openai`` client speaks HTTP to a local OpenAI-compatible server that answers errors
(a refused key, 500s), or to a base_url where nothing listens."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import AsyncIterator

import grpc
import pytest
from agentnet.v1 import hub_pb2

from agentsdk import Agent, OpenAIConfig
from agentsdk.errors import InvalidArgument, NotParticipant, ProtocolError, TurnFailed
from agentsdk.model_check import ModelCheckFailed
from agentsdk.network import EV_CHANNEL_CLOSED, Envelope, Hub, Passport
from agentsdk.testing import ScriptedOpenAIServer, ServerError
from hubsvc.storage.base import AuditRow
from netkernel.envelope import EV_TURN_FAILED
from tests.eventually import assert_eventually

HUB_PATHS = ("grpc", "in-process")
"""Each test runs with the embedded hub's client over its port and in process (conftest.py)."""


@pytest.fixture
async def server() -> AsyncIterator[ScriptedOpenAIServer]:
    async with ScriptedOpenAIServer(api_key="right-key", models=("gpt-test",)) as srv:
        yield srv


def free_port() -> int:
    """A port nothing listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


async def rows_of(hub: Hub, count: int) -> list[AuditRow]:
    """The ``turn_failed`` audit rows once there are ``count`` of them (an audit row commits with the
    hub's next group of writes)."""
    rows = await hub.core.store.list_audit(kind="turn_failed", subject_id="", after_id=0, limit=100)
    assert len(rows) == count, rows
    return rows


async def test_a_refused_key_ends_the_askers_wait_with_turn_failed(hub: Hub, server: ScriptedOpenAIServer) -> None:
    secret = "sk-proj-ABCDEF1234567890abcdef"
    config = OpenAIConfig(model="gpt-test", base_url=server.base_url, api_key=secret, max_retries=0, timeout=10)
    await hub.register(Agent("analyst", config=config), Passport(name="analyst"))
    user = await hub.register_human(Passport(name="user", kind="human"))
    started = time.monotonic()
    with pytest.raises(TurnFailed) as caught:
        await user.ask("analyst", "What is our Q3 exposure?", timeout=30)
    assert time.monotonic() - started < 15  # told at once, not at the asker's timeout
    err = caught.value
    assert err.metadata["error_class"] == "openai.AuthenticationError"
    assert "analyst" in err.message and "401" in err.message
    channel_id = err.metadata["channel_id"]
    wal = await hub.read_wal(channel_id)
    failed = next(e for e in wal if e.event_type == EV_TURN_FAILED)
    assert failed.sender_id == "hub" and failed.audience is None
    data = failed.event_data
    assert data["agent_name"] == "analyst" and data["action"] == "close" and data["attempts"] == 1
    assert data["envelope_id"] == err.metadata["envelope_id"]
    assert secret not in json.dumps(data) and "What is our Q3" not in json.dumps(data)
    closed = wal[-1]
    assert closed.event_type == EV_CHANNEL_CLOSED and closed.event_data["reason"] == "turn_failed"
    rows = await assert_eventually(lambda: rows_of(hub, 1))
    detail = json.loads(rows[0].detail_json)
    assert rows[0].subject_id == channel_id and detail["error_class"] == "openai.AuthenticationError"
    assert secret not in rows[0].detail_json


async def test_server_errors_are_retried_then_reported_with_the_attempts(
    hub: Hub, server: ScriptedOpenAIServer
) -> None:
    server.add(*(ServerError(500, "overloaded") for _ in range(3)))
    config = OpenAIConfig(model="gpt-test", base_url=server.base_url, api_key="right-key", max_retries=2, timeout=10)
    await hub.register(Agent("analyst", config=config), Passport(name="analyst"))
    user = await hub.register_human(Passport(name="user", kind="human"))
    with pytest.raises(TurnFailed) as caught:
        await user.ask("analyst", "hello?", timeout=60)
    assert len(server.requests) == 3  # the openai client's two retries, with backoff, before the report
    wal = await hub.read_wal(caught.value.metadata["channel_id"])
    failed = next(e for e in wal if e.event_type == EV_TURN_FAILED)
    assert failed.event_data["attempts"] == 3 and failed.event_data["error_class"] == "openai.InternalServerError"


async def test_an_unreachable_base_url_is_reported(hub: Hub) -> None:
    config = OpenAIConfig(
        model="gpt-test", base_url=f"http://127.0.0.1:{free_port()}/v1", api_key="k", max_retries=0, timeout=5
    )
    await hub.register(Agent("analyst", config=config), Passport(name="analyst"))
    user = await hub.register_human(Passport(name="user", kind="human"))
    with pytest.raises(TurnFailed) as caught:
        await user.ask("analyst", "anyone there?", timeout=30)
    assert caught.value.metadata["error_class"] == "openai.APIConnectionError"


async def test_a_conversation_stays_open_and_only_hears_of_it(hub: Hub, server: ScriptedOpenAIServer) -> None:
    config = OpenAIConfig(model="gpt-test", base_url=server.base_url, api_key="wrong", max_retries=0, timeout=10)
    await hub.register(Agent("analyst", config=config), Passport(name="analyst"))
    user = await hub.register_human(Passport(name="user", kind="human"))
    ch = await user.open(type="conversation", target="analyst")
    question = await user.send(ch.channel_id, "hi")
    event = await user.next_envelope(predicate=lambda e: e.event_type == EV_TURN_FAILED, timeout=20)
    assert event.event_data["action"] == "notify" and event.event_data["envelope_id"] == question.envelope_id
    metadata, _state, _next = await user.channel_info(ch.channel_id)
    assert metadata.state == "opened"
    await user.send(ch.channel_id, "still here")  # the channel takes posts


async def test_the_knob_overrides_the_types_policy(hub: Hub, server: ScriptedOpenAIServer) -> None:
    config = OpenAIConfig(model="gpt-test", base_url=server.base_url, api_key="wrong", max_retries=0, timeout=10)
    await hub.register(Agent("analyst", config=config), Passport(name="analyst"))
    user = await hub.register_human(Passport(name="user", kind="human"))
    ch = await user.open(type="conversation", target="analyst", knobs={"on_turn_failed": "close"})
    question = await user.send(ch.channel_id, "hi")
    with pytest.raises(TurnFailed):
        await user.wait_reply(question, timeout=20)
    closed = await user.next_envelope(predicate=lambda e: e.event_type == EV_CHANNEL_CLOSED, timeout=10)
    assert closed.event_data["reason"] == "turn_failed"
    with pytest.raises(InvalidArgument, match="on_turn_failed"):
        await user.open(type="conversation", target="analyst", knobs={"on_turn_failed": "retry"})


async def test_a_delegate_waiting_on_a_failing_agent_gets_turn_failed(hub: Hub, server: ScriptedOpenAIServer) -> None:
    config = OpenAIConfig(model="gpt-test", base_url=server.base_url, api_key="wrong", max_retries=0, timeout=10)
    await hub.register(Agent("analyst", config=config), Passport(name="analyst"))
    user = await hub.register_human(Passport(name="user", kind="human"))
    with pytest.raises(TurnFailed, match="analyst could not answer"):
        await user.rpc.delegate(hub_pb2.DelegateRequest(target="analyst", prompt="hi", timeout_seconds=30))


async def test_reports_are_checked(hub: Hub) -> None:
    a = await hub.register_human(Passport(name="a", kind="human"))
    b = await hub.register_human(Passport(name="b", kind="human"))
    c = await hub.register_human(Passport(name="c", kind="human"))
    ch = await a.open(type="conversation", target="b")
    env = await a.send(ch.channel_id, "hi")

    def report(**fields: object) -> hub_pb2.ReportTurnFailureRequest:
        base: dict[str, object] = {"channel_id": ch.channel_id, "envelope_id": env.envelope_id, "error_class": "E"}
        return hub_pb2.ReportTurnFailureRequest(**{**base, **fields})  # type: ignore[arg-type]

    with pytest.raises(InvalidArgument, match="error_class is empty"):
        await b.rpc.report_turn_failure(report(error_class=""))
    with pytest.raises(InvalidArgument, match="error_class has 129 characters"):
        await b.rpc.report_turn_failure(report(error_class="E" * 129))
    with pytest.raises(InvalidArgument, match="not an envelope of channel"):
        await b.rpc.report_turn_failure(report(envelope_id="nope"))
    with pytest.raises(InvalidArgument, match="message"):
        await b.rpc.report_turn_failure(report(message="x" * 5000))
    with pytest.raises(NotParticipant):
        await c.rpc.report_turn_failure(report())
    with pytest.raises(grpc.aio.AioRpcError) as refused:  # attempts out of range: OUT_OF_RANGE
        await b.rpc.connection.stub.ReportTurnFailure(report(attempts=101), metadata=b.rpc._metadata)
    assert refused.value.code() == grpc.StatusCode.OUT_OF_RANGE
    assert (await b.rpc.report_turn_failure(report(message="Bearer abcdefghijklmnop"))).posted
    wal = await hub.read_wal(ch.channel_id)
    assert "abcdefghijklmnop" not in wal[-1].event_data["message"]
    forged = Envelope(
        channel_id=ch.channel_id, sender_id=a.agent_id, audience=None, event_type=EV_TURN_FAILED, event_data={}
    )
    with pytest.raises(ProtocolError, match="only the hub"):
        await a.post_envelope(forged)
    await a.close_channel(ch.channel_id)
    ended = await b.rpc.report_turn_failure(report())
    assert not ended.posted and ended.action == ""
    rows = await assert_eventually(lambda: rows_of(hub, 2))
    assert json.loads(rows[-1].detail_json)["action"] == "none"


async def test_check_model_names_what_is_wrong(hub: Hub, server: ScriptedOpenAIServer) -> None:
    def cfg(**kw: object) -> OpenAIConfig:
        base: dict[str, object] = {"model": "gpt-test", "base_url": server.base_url, "api_key": "right-key"}
        return OpenAIConfig(**{**base, **kw, "max_retries": 0, "timeout": 5})  # type: ignore[arg-type]

    await hub.register(Agent("ok", config=cfg()), check_model=True)
    cases = [
        (cfg(api_key="sk-wrong-0123456789"), "refused the API key", "bad_api_key"),
        (cfg(model="gpt-nope"), "is not served by", "unknown_model"),
        (cfg(base_url=f"http://127.0.0.1:{free_port()}/v1"), "cannot reach", "unreachable"),
    ]
    for n, (config, text, problem) in enumerate(cases):
        with pytest.raises(ModelCheckFailed, match=text) as caught:
            await hub.register(Agent(f"bad{n}", config=config), check_model=True)
        assert caught.value.metadata["problem"] == problem
        assert "sk-wrong" not in caught.value.message
    names = {a.name for a in await hub.list_agents()}
    assert not names & {"bad0", "bad1", "bad2"}  # nothing registered
