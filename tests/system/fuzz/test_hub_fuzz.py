"""Property-based fuzz of every unary hub RPC and of Connect frame sequences, against a real hub.

For any request: the hub answers (within a deadline), a refusal is a documented
(reason, code) pair from docs/errors.md and never INTERNAL/UNKNOWN, the durable state
(every table of the SQLite file but the audit log, which records refusals by design) is
unchanged after a refusal, and the hub still answers its health check.
"""

from __future__ import annotations

import json
import math
import os
import secrets
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from agentnet.v1 import channel_pb2, connect_pb2, envelope_pb2, hub_pb2, hub_pb2_grpc, identity_pb2, task_pb2
from hypothesis import given
from hypothesis import strategies as st

from tests.procs import ROOT, ServiceProcess, start_service
from tests.system.fuzz.checks import assert_documented_refusal, assert_serving, fuzz_settings, sqlite_fingerprint
from tests.system.fuzz.strategies import edge_strings, messages, mutations

pytestmark = pytest.mark.fuzz


def _refusal(err: grpc.RpcError, what: str) -> None:
    assert_documented_refusal(err, what)


HUB = "agentnet.v1.HubService"
SERVICE = hub_pb2.DESCRIPTOR.services_by_name["HubService"]
UNARY = [m for m in SERVICE.methods if not m.client_streaming and not m.server_streaming]
CALL_DEADLINE = 10.0
WAITING = {"WaitTask", "Delegate", "InvokeAgent", "OpenChannel", "Say"}
"""RPCs that may legitimately wait as long as the request asks (their deadline is the caller's business)."""
SETTINGS = fuzz_settings(max_examples=50)


OUTCOMES: Counter[tuple[str, str]] = Counter()
"""(rpc, status) of every fuzzed call; printed with FUZZ_STATS=1 to see how deep the inputs get."""


@pytest.fixture(scope="module", autouse=True)
def _report_outcomes() -> Iterator[None]:
    yield
    if os.environ.get("FUZZ_STATS"):
        for (rpc, status), n in sorted(OUTCOMES.items()):
            print(f"{rpc:20} {status:20} {n}")


@dataclass
class World:
    """A running hub, its database, a channel to it, and real values for the strategies."""

    process: ServiceProcess
    db: Path
    channel: grpc.Channel
    stub: hub_pb2_grpc.HubServiceStub
    tokens: dict[str, str]
    pool: dict[str, list[str]]


def _metadata(token: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {token}"),)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    data = tmp_path_factory.mktemp("hubfuzz")
    operator_file = data / "operator.token"
    operator_file.write_text(secrets.token_hex(16))
    operator_file.chmod(0o600)
    db = data / "hub.db"
    args = ["--db", str(db), "--data-dir", str(data), "--operator-token-file", str(operator_file)]
    args += ["--log-level", "WARNING", "--invite-ack-timeout", "3600"]
    process = start_service("hubsvc", args, cwd=ROOT)
    channel = grpc.insecure_channel(process.target)
    stub = hub_pb2_grpc.HubServiceStub(channel)
    try:
        tokens = {"operator": operator_file.read_text().strip(), "none": "", "garbage": "x" * 40}
        ids: dict[str, str] = {}
        for name in ("alice", "bob", "carol"):
            resp = stub.Register(hub_pb2.RegisterRequest(passport=identity_pb2.Passport(name=name)), timeout=10)
            tokens[name], ids[name] = resp.credential, resp.agent.agent_id
        human = stub.RegisterHuman(
            hub_pb2.RegisterHumanRequest(passport=identity_pb2.Passport(name="hugo", kind=2)), timeout=10
        )
        tokens["hugo"], ids["hugo"] = human.credential, human.agent.agent_id
        opened = stub.OpenChannel(
            hub_pb2.OpenChannelRequest(type="conversation", targets=["bob"]), metadata=_metadata(tokens["alice"])
        )
        cid = opened.channel.channel_id
        ack = envelope_pb2.Envelope(channel_id=cid, event_type="ag2.channel.invite_ack", event_data_json="{}")
        stub.PostEnvelope(hub_pb2.PostEnvelopeRequest(envelope=ack), metadata=_metadata(tokens["bob"]), timeout=10)
        said = envelope_pb2.Envelope(channel_id=cid, event_type="ag2.msg.text", event_data_json='{"text": "hi"}')
        posted = stub.PostEnvelope(
            hub_pb2.PostEnvelopeRequest(envelope=said), metadata=_metadata(tokens["alice"]), timeout=10
        )
        task = stub.ReportTask(
            hub_pb2.ReportTaskRequest(kind=task_pb2.TASK_EVENT_KIND_STARTED, title="t", channel_id=cid),
            metadata=_metadata(tokens["alice"]),
            timeout=10,
        )
        agents = [*ids.values(), *ids]
        envelope_id = posted.envelope.envelope_id
        pool: dict[str, list[str]] = {
            "": [cid, envelope_id, task.task.task_id, *agents],
            "channel_id": [cid],
            "task_id": [task.task.task_id],
            "envelope_id": [envelope_id],
            "causation_id": [envelope_id],
            "agent_id": list(ids.values()),
            "sender_id": list(ids.values()),
            "target": agents,
            "speaker": agents,
            "agent": agents,
            "agent_ids": list(ids.values()),
            "name": ["alice", "peers", "channels", "tasks", "context", "delegate", "say", "newname"],
            "type": ["conversation", "discussion", "consulting", "workflow"],
            "event_type": ["ag2.msg.text", "ag2.channel.invite_ack", "ag2.channel.reject", "myapp.custom"],
            "action": ["open", "close", "list", "describe", "search", "quote", "start", "progress", "complete"],
            "text": ["hi"],
        }
        yield World(process, db, channel, stub, tokens, pool)
    finally:
        channel.close()
        assert process.terminate() == 0, "".join(process.output[-50:])


def _durable(world: World) -> dict[str, object]:
    return sqlite_fingerprint(
        world.db, skip=frozenset({"audit", "sqlite_sequence"}), append_only=frozenset({"wal"})
    )  # refusals are audited by design


def _keep_the_channel_open(world: World) -> None:
    """Reopen the shared channel when an example closed it (CloseChannel / the channels tool may)."""
    cid = world.pool["channel_id"][0]
    meta = world.stub.DescribeChannel(
        hub_pb2.DescribeChannelRequest(channel_id=cid), metadata=_metadata(world.tokens["alice"]), timeout=10
    )
    if meta.channel.state == channel_pb2.CHANNEL_STATE_OPENED:
        return
    opened = world.stub.OpenChannel(
        hub_pb2.OpenChannelRequest(type="conversation", targets=["bob"]), metadata=_metadata(world.tokens["alice"])
    )
    new = opened.channel.channel_id
    ack = envelope_pb2.Envelope(channel_id=new, event_type="ag2.channel.invite_ack", event_data_json="{}")
    world.stub.PostEnvelope(hub_pb2.PostEnvelopeRequest(envelope=ack), metadata=_metadata(world.tokens["bob"]))
    for values in world.pool.values():
        values[:] = [new if v == cid else v for v in values]


def _valid_request(world: World, method: str) -> Any:
    """A request the hub accepts from alice (the base the mutations start from), for the RPCs that change things."""
    cid, tid = world.pool["channel_id"][0], world.pool["task_id"][0]
    text = envelope_pb2.Envelope(channel_id=cid, event_type="ag2.msg.text", event_data_json='{"text": "hi"}')
    open_args = {"action": "open", "type": "conversation", "targets": ["bob"]}
    bases: dict[str, Any] = {
        "OpenChannel": hub_pb2.OpenChannelRequest(
            type="conversation", targets=["bob"], knobs_json="{}", ttl_seconds=60, invite_ack_timeout_seconds=60
        ),
        "PostEnvelope": hub_pb2.PostEnvelopeRequest(envelope=text),
        "Say": hub_pb2.SayRequest(channel_id=cid, content="hi"),
        "CallTool": hub_pb2.CallToolRequest(name="channels", arguments_json=json.dumps(open_args)),
        "ReportTask": hub_pb2.ReportTaskRequest(kind=task_pb2.TASK_EVENT_KIND_PROGRESS, task_id=tid, payload_json="{}"),
        "WaitTask": hub_pb2.WaitTaskRequest(task_id=tid, timeout_seconds=0.01),
        "SearchContext": hub_pb2.SearchContextRequest(query="hi", channel_id=cid, limit=5),
        "QuoteContext": hub_pb2.QuoteContextRequest(speaker="alice", recent_n=2, channel_id=cid),
        "SetSkill": hub_pb2.SetSkillRequest(skill_md="---\nname: alice\n---\nhello"),
        "ListChannels": hub_pb2.ListChannelsRequest(),
        "CanSend": hub_pb2.CanSendRequest(channel_id=cid, event_type="ag2.msg.text"),
        "DescribeChannel": hub_pb2.DescribeChannelRequest(channel_id=cid),
        "ListTools": hub_pb2.ListToolsRequest(channel_id=cid),
    }
    return bases.get(method)


def _fresh_agent(world: World) -> str:
    """Register a throw-away agent; returns its key in ``world.tokens``."""
    name = f"tmp{len(world.tokens)}"
    resp = world.stub.Register(hub_pb2.RegisterRequest(passport=identity_pb2.Passport(name=name)), timeout=10)
    world.tokens[name] = resp.credential
    return name


def _caller(data: st.DataObject) -> str:
    return data.draw(st.sampled_from(["alice", "alice", "alice", "bob", "hugo", "operator", "none", "garbage"]))


def _asks_to_wait(request: Any) -> bool:
    for name in ("timeout_seconds", "wait_timeout_seconds"):
        field = request.DESCRIPTOR.fields_by_name.get(name)
        if field is not None:
            value = getattr(request, name)
            if not math.isfinite(value) or value > 0.5 or value == 0:
                return True
    return False


@pytest.mark.parametrize("method", UNARY, ids=[m.name for m in UNARY])
@SETTINGS
@given(data=st.data())
def test_every_unary_rpc_refuses_cleanly_and_changes_nothing(world: World, method: Any, data: st.DataObject) -> None:
    _keep_the_channel_open(world)
    base = _valid_request(world, method.name)
    random_requests = messages(method.input_type, world.pool)
    mutated = mutations(base, world.pool) if base is not None else None
    strategy = random_requests if mutated is None else st.one_of(random_requests, mutated, mutated, mutated)
    request = data.draw(strategy, label="request")
    caller = _caller(data)
    if method.name == "Unregister" and caller in ("alice", "bob", "hugo"):
        caller = _fresh_agent(world)  # the shared identities must outlive the example
    before = _durable(world)
    call = world.channel.unary_unary(
        f"/{HUB}/{method.name}",
        request_serializer=lambda m: m.SerializeToString(),
        response_deserializer=lambda b: b,
    )
    what = f"{method.name} as {caller}"
    waits = method.name in WAITING and _asks_to_wait(request)
    try:
        call(request, metadata=_metadata(world.tokens[caller]), timeout=1.0 if waits else CALL_DEADLINE)
        OUTCOMES[method.name, "OK"] += 1
    except grpc.RpcError as err:
        OUTCOMES[method.name, err.code().name] += 1
        if err.code() == grpc.StatusCode.DEADLINE_EXCEEDED and waits:
            pass  # it waits as long as it was asked to; not a refusal
        else:
            _refusal(err, what)
            assert _durable(world) == before, f"{what}: the store changed although the call was refused"
    assert_serving(world.channel, HUB)


# -- Connect ------------------------------------------------------------------------------


def _frames(world: World) -> st.SearchStrategy[list[connect_pb2.ConnectRequest]]:
    hello = messages(connect_pb2.Hello.DESCRIPTOR, world.pool)
    good_hello = st.builds(
        lambda who, mif, cursors: connect_pb2.ConnectRequest(
            hello=connect_pb2.Hello(credential=world.tokens[who], max_in_flight=mif, cursors=cursors)
        ),
        st.sampled_from(["alice", "bob", "hugo"]),
        st.sampled_from([0, 1, 2**32 - 1]),
        st.dictionaries(
            st.sampled_from(world.pool["channel_id"]) | edge_strings(),
            st.sampled_from([0, 1, 2**63, 2**64 - 1]),
            max_size=3,
        ),
    )
    any_frame = messages(connect_pb2.ConnectRequest.DESCRIPTOR, world.pool)
    ack = st.builds(
        lambda cid, seq: connect_pb2.ConnectRequest(
            ack=connect_pb2.Ack(entries=[connect_pb2.AckEntry(channel_id=cid, seq=seq)])
        ),
        st.sampled_from(world.pool["channel_id"]) | edge_strings(),
        st.sampled_from([0, 1, 2, 10**6, 2**63 - 1, 2**63, 2**64 - 1]),
    )
    post = st.builds(
        lambda rid, env: connect_pb2.ConnectRequest(post=connect_pb2.Post(request_id=rid, envelope=env)),
        edge_strings(["1", "2"]),  # request ids, repeated too
        messages(envelope_pb2.Envelope.DESCRIPTOR, world.pool),
    )
    ping = st.builds(lambda n: connect_pb2.ConnectRequest(ping=connect_pb2.Ping(nonce=n)), st.integers(0, 2**64 - 1))
    later = st.lists(st.one_of(ack, post, ping, any_frame, st.just(connect_pb2.ConnectRequest())), max_size=6)
    first = st.one_of(good_hello, good_hello, st.builds(connect_pb2.ConnectRequest, hello=hello), any_frame)
    return st.builds(lambda f, rest: [f, *rest], first, later)


SENTINEL = 2**64 - 2


@SETTINGS
@given(data=st.data())
def test_connect_frame_sequences_are_answered_or_refused_cleanly(world: World, data: st.DataObject) -> None:
    frames = data.draw(_frames(world), label="frames")
    posts = sum(1 for f in frames if f.WhichOneof("frame") == "post")
    before = _durable(world)
    stream = world.stub.Connect(
        iter([*frames, connect_pb2.ConnectRequest(ping=connect_pb2.Ping(nonce=SENTINEL))]), timeout=CALL_DEADLINE
    )
    results: list[connect_pb2.PostResult] = []
    pong = False
    try:
        for frame in stream:
            kind = frame.WhichOneof("frame")
            if kind == "post_result":
                results.append(frame.post_result)
            elif kind == "pong" and frame.pong.nonce == SENTINEL:
                pong = True
            if pong and len(results) >= posts:
                stream.cancel()
                break
    except grpc.RpcError as err:
        if err.code() != grpc.StatusCode.CANCELLED or not pong:
            assert err.code() != grpc.StatusCode.DEADLINE_EXCEEDED, "Connect went silent: no answer, no end"
            _refusal(err, "Connect")
    for result in results:
        if result.WhichOneof("result") == "error":
            e = result.error
            assert e.reason and e.message, f"Connect post refused without reason/message: {e}"
            assert e.code not in (2, 13), f"Connect post refused with code {e.code}: {e.reason} {e.message[:200]}"
    if not any(r.WhichOneof("result") == "envelope" for r in results):
        after = _durable(world)
        before.pop("cursors", None)
        after.pop("cursors", None)  # acks move cursors: that is what they are for
        assert after == before, "the store changed although no post was admitted"
    assert_serving(world.channel, HUB)


def test_the_fuzz_covers_every_unary_rpc() -> None:
    names = {m.name for m in SERVICE.methods}
    assert {m.name for m in UNARY} == names - {"Connect", "ReadWal"}
