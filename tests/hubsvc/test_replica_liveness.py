"""Replicas come and go without failing each other's A2A calls.

Every running execution records its owner replica, and every replica keeps a liveness key in
Redis. A replica that starts leaves the calls of live replicas alone; the calls of a replica
that died (SIGKILLed here, so nothing of its clean stop runs) are failed once its key lapses,
once, by whichever surviving replica notices first.
"""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import Iterator
from contextlib import AsyncExitStack
from pathlib import Path

import pytest
from agentnet.v1 import a2a_pb2, hub_pb2

from agentsdk.errors import Unauthenticated, Unavailable
from hubsvc.core.executions import REPLICA_LOST
from hubsvc.core.options import HubOptions
from hubsvc.core.util import hash_secret
from hubsvc.server import start_hub
from hubsvc.storage.redis_store import RedisHubStore
from tests.eventually import assert_eventually
from tests.hubsvc import harness
from tests.hubsvc.harness import EV_TEXT, Participant, RunningHub, data_of, list_audit
from tests.hubsvc.test_a2a import COMPLETED, a2a_agent, invoke
from tests.procs import ROOT, start_service
from tests.redis_server import RedisServer

REDIS_DB = 3
"""The DB number of these tests (flushed after each)."""
FAST = HubOptions(replica_ttl=1.0, replica_refresh=0.05)
"""Survivors that sweep often (a test waits for the dead replica's key to lapse, not for a sweep)."""


@pytest.fixture
def on_redis(redis_server: RedisServer) -> Iterator[str]:
    """The URL of DB :data:`REDIS_DB` of the session's redis-server (flushed afterwards)."""
    yield redis_server.url(REDIS_DB)
    redis_server.flush(REDIS_DB)


async def replica(stack: AsyncExitStack, url: str, options: HubOptions | None = None) -> RunningHub:
    """A hub replica in this process on ``url`` with the default key prefix, as ``python -m hubsvc
    --store`` uses (stopped when ``stack`` closes)."""
    server = await start_hub(RedisHubStore(url), operator_token=harness.OPERATOR_TOKEN, options=options)
    stack.push_async_callback(server.stop, 0.5)
    return RunningHub(server, Path("unused"))


def on(hub: RunningHub | str, p: Participant) -> Participant:
    """``p``'s identity reaching another replica."""
    return Participant(hub if isinstance(hub, str) else hub.target, p.record, p.credential)


async def test_starting_a_replica_does_not_fail_the_calls_another_runs(on_redis: str, tmp_path: Path) -> None:
    async with AsyncExitStack() as stack:
        await starting_a_replica_does_not_fail_the_calls_another_runs(on_redis, stack, tmp_path)


async def starting_a_replica_does_not_fail_the_calls_another_runs(
    on_redis: str, stack: AsyncExitStack, tmp_path: Path
) -> None:
    hub_a = await replica(stack, on_redis)
    a = await a2a_agent(hub_a.target, "a")
    b = await a2a_agent(hub_a.target, "b")
    call = asyncio.create_task(a.rpc("InvokeAgent", invoke(b, "hold on", root_session_id="s1")))
    question = await b.next(lambda e: e.event_type == EV_TEXT)
    execution_id = data_of(question)["a2a"]["execution_id"]
    token = await b.rpc("RefreshCallToken", hub_pb2.RefreshCallTokenRequest(execution_id=execution_id))

    hub_b = await replica(stack, on_redis, FAST)  # loads, and sweeps at start and every 50 ms
    assert await hub_b.core.executions.fail_orphans() == []  # A is alive: its call is not an orphan
    row = await hub_b.core.store.get_execution(execution_id)
    assert row is not None and row.running
    # The token still verifies, on B (from the store) and on A (its memory).
    fresh = await on(hub_b, b).rpc("RefreshCallToken", hub_pb2.RefreshCallTokenRequest(call_token=token.call_token))
    await b.rpc("RefreshCallToken", hub_pb2.RefreshCallTokenRequest(call_token=fresh.call_token))

    await b.say(question.channel_id, "done")
    answer = await call
    assert (answer.status, answer.result, answer.error) == (COMPLETED, "done", "")
    listed = await on(hub_b, a).rpc("ListExecutions", hub_pb2.ListExecutionsRequest(root_session_id="s1"))
    assert [(e.status, e.error) for e in listed.executions] == [(COMPLETED, "")]
    await a.close()
    await b.close()


async def test_the_calls_of_a_killed_replica_are_failed_once_by_a_survivor(on_redis: str, tmp_path: Path) -> None:
    async with AsyncExitStack() as stack:
        await the_calls_of_a_killed_replica_are_failed_once_by_a_survivor(on_redis, stack, tmp_path)


async def the_calls_of_a_killed_replica_are_failed_once_by_a_survivor(
    on_redis: str, stack: AsyncExitStack, tmp_path: Path
) -> None:
    # Replica A is a real process; B and C run here and sweep for dead replicas' calls.
    args = ["--store", on_redis, "--data-dir", str(tmp_path / "a"), "--replica-ttl", "1", "--replica-refresh", "0.1"]
    proc_a = start_service("hubsvc", args, cwd=ROOT)
    try:
        a = await a2a_agent(proc_a.target, "a")
        b = await a2a_agent(proc_a.target, "b")
        hub_b = await replica(stack, on_redis, FAST)
        hub_c = await replica(stack, on_redis, FAST)
        call = asyncio.create_task(a.rpc("InvokeAgent", invoke(b, "hold on", root_session_id="s1")))
        question = await b.next(lambda e: e.event_type == EV_TEXT)
        execution_id = data_of(question)["a2a"]["execution_id"]
        token = await b.rpc("RefreshCallToken", hub_pb2.RefreshCallTokenRequest(execution_id=execution_id))
        digest = hash_secret(token.call_token.partition(".")[2])
        assert await hub_b.core.store.get_call_token(digest) is not None
        # While A lives, the survivors leave its call alone.
        assert await hub_b.core.executions.fail_orphans() == []
        assert await hub_c.core.executions.fail_orphans() == []

        proc_a.terminate(signal.SIGKILL)  # no clean stop: its liveness key stays until it lapses
        with pytest.raises(Unavailable):  # the caller's replica is gone: its RPC fails
            await call
        await a.close()
        await b.close()

        async def failed() -> a2a_pb2.Execution:
            listed = await on(hub_b, a).rpc("ListExecutions", hub_pb2.ListExecutionsRequest(root_session_id="s1"))
            (execution,) = listed.executions
            assert execution.status == a2a_pb2.INVOCATION_STATUS_FAILED
            return execution

        execution = await assert_eventually(failed, timeout=10)
        assert (execution.execution_id, execution.error) == (execution_id, REPLICA_LOST)
        assert execution.HasField("ended_at")
        assert await hub_b.core.store.get_call_token(digest) is None  # its tokens left with its end
        with pytest.raises(Unauthenticated, match="unknown call token"):
            await on(hub_c, b).rpc("RefreshCallToken", hub_pb2.RefreshCallTokenRequest(call_token=token.call_token))
        # Both survivors kept sweeping; the execution was failed once: one end record, and no
        # later sweep changes it.
        assert await hub_b.core.executions.fail_orphans() == []
        assert await hub_c.core.executions.fail_orphans() == []
        ends = [
            json.loads(r.detail_json)
            for r in await list_audit(hub_c, kind="a2a_invoked")
            if json.loads(r.detail_json).get("execution_id") == execution_id
        ]
        assert len(ends) == 1 and ends[0]["status"] == "INVOCATION_STATUS_FAILED" and ends[0]["replica_lost"]
        assert (await failed()).ended_at == execution.ended_at
    finally:
        proc_a.terminate(signal.SIGKILL)
