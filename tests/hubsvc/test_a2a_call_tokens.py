"""A2A call tokens: never in the channel's log, issued only to the callee of a running call.

The question envelope of an InvokeAgent call (and its dispatch) is stored in the channel's
WAL and in the channel's seed row, readable by every member and by the operator, so the
hub never writes a token there: the callee asks for one with
``RefreshCallToken{execution_id}`` when it makes a nested call.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import grpc
import pytest
from agentnet.v1 import a2a_pb2, hub_pb2, hub_pb2_grpc

from agentsdk.errors import FailedPrecondition, InvalidArgument, PermissionDenied, TokenExpired, Unauthenticated
from hubsvc.core.options import HubOptions
from tests.clock import FakeClock
from tests.hubsvc.harness import EV_TEXT, RunningHub, call, collect, data_of, running_hub
from tests.hubsvc.test_a2a import a2a_agent, answering, invoke

COMPLETED = a2a_pb2.INVOCATION_STATUS_COMPLETED


def database_text(db: Path) -> str:
    """Every value of every table of the hub's SQLite database, as one string (blobs as latin-1)."""
    with sqlite3.connect(db) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        parts: list[str] = []
        for table in tables:
            for row in conn.execute(f"SELECT * FROM {table}"):
                parts.extend(v.decode("latin-1") if isinstance(v, bytes) else str(v) for v in row)
    return "\n".join(parts)


def by_execution(execution_id: str) -> hub_pb2.RefreshCallTokenRequest:
    return hub_pb2.RefreshCallTokenRequest(execution_id=execution_id)


async def read_wal(hub: RunningHub, channel_id: str, metadata: tuple[tuple[str, str], ...]) -> list[Any]:
    async with grpc.aio.insecure_channel(hub.target) as ch:
        stub = hub_pb2_grpc.HubServiceStub(ch)
        stream = stub.ReadWal(hub_pb2.ReadWalRequest(channel_id=channel_id), metadata=metadata, timeout=10)
        return [r.envelope for r in await call(collect(stream))]


@pytest.mark.sqlite_only("dumps every table of the SQLite file")
async def test_no_call_token_is_written_to_the_channel_log_or_readable_by_anyone(hub: RunningHub) -> None:
    a = await a2a_agent(hub.target, "a")
    b = await a2a_agent(hub.target, "b")
    c = await a2a_agent(hub.target, "c")
    issued: list[str] = []

    async def b_loop() -> None:
        question = await b.next(lambda e: e.event_type == EV_TEXT)
        dispatch = data_of(question)["a2a"]
        issued.append((await b.rpc("RefreshCallToken", by_execution(dispatch["execution_id"]))).call_token)
        answer = await b.rpc("InvokeAgent", invoke(c, "and you?", call_token=issued[0]))
        await b.say(question.channel_id, f"C said: {answer.result}")

    b_task = asyncio.create_task(b_loop())
    async with answering(c, lambda _d: ("leaf", None)) as seen_by_c:
        top = await a.rpc("InvokeAgent", invoke(b, "ask C"))
    await b_task
    assert top.status == COMPLETED and top.result == "C said: leaf"
    # The nested call is still linked to the call B was answering.
    tree = (
        await a.rpc("ListExecutions", hub_pb2.ListExecutionsRequest(root_session_id=top.root_session_id))
    ).executions
    assert [e.parent_execution_id for e in tree] == ["", top.execution_id]

    [first] = [e for e in tree if e.parent_execution_id == ""]
    channels = [e.channel_id for e in tree]
    # ReadWal is an agent RPC (the operator has no envelope read; it sees the database, checked below).
    readers = [(a, first.channel_id), (b, first.channel_id), (b, tree[1].channel_id), (c, tree[1].channel_id)]
    for reader, channel_id in readers:
        envelopes = await read_wal(hub, channel_id, reader.metadata)
        [question] = [e for e in envelopes if "a2a" in data_of(e) and "execution_id" in data_of(e)["a2a"]]
        dispatch = data_of(question)["a2a"]
        assert "call_token" not in dispatch and "call_token_expires_at" not in dispatch
        for env in envelopes:
            assert issued[0] not in env.event_data_json
    assert "call_token" not in seen_by_c[0]
    # Nothing in the database holds a token: not the WAL, not the channels' seed rows.
    stored = database_text(hub.db)
    assert channels[0] in stored  # the dump does see the channels
    for execution in tree:
        assert f"{execution.execution_id}." not in stored  # tokens are "<execution_id>.<secret>"
    assert "call_token" not in stored


async def test_only_the_callee_obtains_a_token_and_only_while_its_call_runs(hub: RunningHub) -> None:
    a = await a2a_agent(hub.target, "a")
    b = await a2a_agent(hub.target, "b")
    c = await a2a_agent(hub.target, "c")
    results: dict[str, Any] = {}

    async def b_loop() -> None:
        question = await b.next(lambda e: e.event_type == EV_TEXT)
        execution_id = data_of(question)["a2a"]["execution_id"]
        results["execution_id"] = execution_id
        for key, who, request in (
            ("caller", a, by_execution(execution_id)),
            ("bystander", c, by_execution(execution_id)),
            ("unknown", b, by_execution("no-such-execution")),
            ("neither", b, hub_pb2.RefreshCallTokenRequest()),
            ("both", b, hub_pb2.RefreshCallTokenRequest(execution_id=execution_id, call_token="x.y")),
        ):
            try:
                await who.rpc("RefreshCallToken", request)
            except Exception as err:
                results[key] = err
        results["callee"] = await b.rpc("RefreshCallToken", by_execution(execution_id))
        await b.say(question.channel_id, "done")

    b_task = asyncio.create_task(b_loop())
    top = await a.rpc("InvokeAgent", invoke(b))
    await b_task
    assert top.status == COMPLETED
    assert isinstance(results["caller"], PermissionDenied) and "another agent" in results["caller"].message
    assert isinstance(results["bystander"], PermissionDenied)
    assert isinstance(results["unknown"], FailedPrecondition)
    assert results["unknown"].metadata["execution_id"] == "no-such-execution"
    assert isinstance(results["neither"], InvalidArgument) and isinstance(results["both"], InvalidArgument)
    token = results["callee"]
    assert token.call_token.startswith(results["execution_id"] + ".") and token.HasField("expires_at")
    # Once the call has ended, no token is issued for it and the issued one is worthless.
    with pytest.raises(FailedPrecondition, match="not running"):
        await b.rpc("RefreshCallToken", by_execution(results["execution_id"]))
    with pytest.raises(Unauthenticated, match="already ended"):
        await b.rpc("InvokeAgent", invoke(c, call_token=token.call_token))


async def test_call_tokens_expire_refresh_within_grace_and_belong_to_their_callee(tmp_path: Path) -> None:
    clock = FakeClock()
    options = HubOptions(a2a_token_ttl=300, a2a_token_grace=600)
    async with running_hub(tmp_path / "hub.db", options, clock=clock) as hub:
        a = await a2a_agent(hub.target, "a")
        b = await a2a_agent(hub.target, "b")
        c = await a2a_agent(hub.target, "c")
        results: dict[str, Any] = {}

        async def b_loop() -> None:
            question = await b.next(lambda e: e.event_type == EV_TEXT)
            execution_id = data_of(question)["a2a"]["execution_id"]
            token = (await b.rpc("RefreshCallToken", by_execution(execution_id))).call_token
            clock.offset += 301  # the token's five minutes pass while B works
            for key, who, request in (
                ("expired", b, invoke(c, call_token=token)),
                ("stolen", c, invoke(a, call_token=token)),
                ("forged", b, invoke(c, call_token=token + "x")),
            ):
                try:
                    await who.rpc("InvokeAgent", request)
                except Exception as err:
                    results[key] = err
            fresh = await b.rpc("RefreshCallToken", hub_pb2.RefreshCallTokenRequest(call_token=token))
            results["fresh"] = fresh
            results["nested"] = await b.rpc("InvokeAgent", invoke(c, call_token=fresh.call_token))
            clock.offset += 300 + 601  # past the fresh token's expiry plus the grace period
            try:
                await b.rpc("RefreshCallToken", hub_pb2.RefreshCallTokenRequest(call_token=fresh.call_token))
            except Exception as err:
                results["too_late"] = err
            # The callee can always get a new token by execution id while the call runs.
            results["reissued"] = await b.rpc("RefreshCallToken", by_execution(execution_id))
            results["nested_again"] = await b.rpc("InvokeAgent", invoke(c, call_token=results["reissued"].call_token))
            await b.say(question.channel_id, "done")

        b_task = asyncio.create_task(b_loop())
        async with answering(c, lambda _d: ("from c", None)):
            top = await a.rpc("InvokeAgent", invoke(b))
        await b_task

        assert isinstance(results["expired"], TokenExpired)
        assert results["expired"].reason == "TOKEN_EXPIRED"
        assert isinstance(results["stolen"], PermissionDenied)
        assert type(results["forged"]) is Unauthenticated
        assert results["fresh"].call_token != ""
        assert results["nested"].status == COMPLETED and results["nested"].result == "from c"
        assert isinstance(results["too_late"], TokenExpired)
        assert results["nested_again"].status == COMPLETED
        assert top.status == COMPLETED
        # Once the call has ended its token is worthless.
        with pytest.raises(Unauthenticated, match="already ended"):
            await b.rpc("InvokeAgent", invoke(c, call_token=results["fresh"].call_token))
