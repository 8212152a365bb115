"""Store reads of single records and the conditional writes replicas rely on, on both stores.

``get_agent`` / ``get_execution`` / ``get_call_token`` are what a replica re-reads when
another one changed a record; a task row's ``expect`` and a call token's running execution
are checked in the same atomic step as the write, against the store and against the rows
written earlier in the same group.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from agentnet.v1 import a2a_pb2

from agentsdk.errors import Unavailable
from hubsvc.storage import (
    TASK_LIVE,
    TASK_NEW,
    AgentRow,
    AtLimit,
    CallTokenRow,
    ExecutionRow,
    HubStore,
    StoreConflict,
    TaskRow,
    Writes,
)
from tests.hubsvc.harness import make_store


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[HubStore]:
    s = make_store(tmp_path / "hub.db")
    await s.open()
    yield s
    await s.close()


def execution(execution_id: str, *, running: bool) -> ExecutionRow:
    record = a2a_pb2.Execution(execution_id=execution_id, root_session_id="r", caller_id="a", target_id="b")
    return ExecutionRow(execution_id, "r", "a", "b", running, 1.5, record.SerializeToString())


def task(task_id: str, *, terminal: bool, expect: str = "") -> TaskRow:
    return TaskRow(task_id, "owner", "", terminal, f"{task_id}:{terminal}".encode(), expect)


async def refused(store: HubStore, writes: Writes) -> None:
    """The bundle fails as a conflict and writes nothing."""
    with pytest.raises(Unavailable) as err:
        await store.commit(writes)
    assert isinstance(err.value.__cause__, StoreConflict)


async def test_get_agent_reads_one_identity_removed_or_not(store: HubStore) -> None:
    assert await store.get_agent("a1") is None
    await store.commit(Writes(agents=[AgentRow("a1", "ann", "h1", b"rec1")]))
    assert await store.get_agent("a1") == AgentRow("a1", "ann", "h1", b"rec1", False)
    await store.commit(Writes(agents=[AgentRow("a1", "ann", "h1", b"rec2", True)]))
    assert await store.get_agent("a1") == AgentRow("a1", "ann", "h1", b"rec2", True)


async def test_get_agent_named_reads_the_live_holder_of_a_name(store: HubStore) -> None:
    assert await store.get_agent_named("ann") is None
    await store.commit(Writes(agents=[AgentRow("a1", "ann", "h1", b"rec1")]))
    assert await store.get_agent_named("ann") == AgentRow("a1", "ann", "h1", b"rec1")
    await store.commit(Writes(agents=[AgentRow("a1", "ann", "h1", b"rec1", True)]))
    assert await store.get_agent_named("ann") is None
    await store.commit(Writes(agents=[AgentRow("a2", "ann", "h2", b"rec2")]))
    assert await store.get_agent_named("ann") == AgentRow("a2", "ann", "h2", b"rec2")


async def test_get_execution_reads_one_execution_running_or_ended(store: HubStore) -> None:
    assert await store.get_execution("e1") is None
    await store.commit(Writes(executions=[execution("e1", running=True)]))
    assert await store.get_execution("e1") == execution("e1", running=True)
    await store.commit(Writes(executions=[execution("e1", running=False)]))
    assert await store.get_execution("e1") == execution("e1", running=False)


async def test_call_tokens_are_stored_only_while_their_execution_runs_and_go_with_its_end(store: HubStore) -> None:
    token = CallTokenRow("hash1", "e1", "b", 100.0)
    await refused(store, Writes(call_tokens=[token]))  # no such execution
    await store.commit(Writes(executions=[execution("e1", running=True)]))
    await store.commit(Writes(call_tokens=[token, CallTokenRow("hash2", "e1", "b", 200.0)]))
    assert await store.get_call_token("hash1") == token
    await store.commit(Writes(executions=[execution("e1", running=False)]))
    assert await store.get_call_token("hash1") is None and await store.get_call_token("hash2") is None
    await refused(store, Writes(call_tokens=[token]))  # ended: no new token
    assert await store.get_call_token("hash1") is None


async def test_a_token_and_its_execution_queued_together_are_judged_in_order(store: HubStore) -> None:
    # Queued together (one group or several): a token after the start is stored, one after the end refused.
    started = store.submit(Writes(executions=[execution("e2", running=True)]))
    given = store.submit(Writes(call_tokens=[CallTokenRow("h", "e2", "b", 1.0)]))
    ended = store.submit(Writes(executions=[execution("e2", running=False)]))
    late = store.submit(Writes(call_tokens=[CallTokenRow("late", "e2", "b", 1.0)]))
    results = await asyncio.gather(started, given, ended, late, return_exceptions=True)
    assert results[:3] == [None, None, None]
    assert isinstance(results[3], Unavailable) and isinstance(results[3].__cause__, StoreConflict)
    assert await store.get_call_token("h") is None and await store.get_call_token("late") is None


def capped(token_hash: str, expires_at: float, issued_at: float) -> CallTokenRow:
    """A token of e3 issued at ``issued_at`` under a limit of 2 tokens, with 100 s of grace."""
    return CallTokenRow(token_hash, "e3", "b", expires_at, hold_limit=2, issued_at=issued_at, grace=100.0)


async def test_call_tokens_under_a_limit_make_room_from_expired_ones_or_are_refused(store: HubStore) -> None:
    await store.commit(Writes(executions=[execution("e3", running=True)]))
    # Queued together (one group or several), each counts the ones before it.
    rows = [capped(f"t{i}", 200.0, 100.0) for i in range(4)]
    results = await asyncio.gather(*(store.submit(Writes(call_tokens=[r])) for r in rows), return_exceptions=True)
    assert results[:2] == [None, None]
    assert all(isinstance(r, AtLimit) and r.held == 2 for r in results[2:]), results
    assert [await store.get_call_token(f"t{i}") is not None for i in range(4)] == [True, True, False, False]
    await store.commit(Writes(call_tokens=[capped("t4", 450.0, 250.0)]))  # both expired: the first gives way
    assert [await store.get_call_token(h) is not None for h in ("t0", "t1", "t4")] == [False, True, True]
    await store.commit(Writes(call_tokens=[capped("t5", 600.0, 400.0)]))  # t1 is past expiry + grace
    assert [await store.get_call_token(h) is not None for h in ("t1", "t4", "t5")] == [False, True, True]
    await refused(store, Writes(call_tokens=[capped("t6", 600.0, 400.0)]))  # t4 and t5 still valid
    assert await store.get_call_token("t6") is None


async def test_a_task_write_is_refused_when_the_stored_task_is_not_as_expected(store: HubStore) -> None:
    await store.commit(Writes(tasks=[task("t1", terminal=False, expect=TASK_NEW)]))
    await refused(store, Writes(tasks=[task("t1", terminal=False, expect=TASK_NEW)]))  # started twice
    await refused(store, Writes(tasks=[task("t9", terminal=True, expect=TASK_LIVE)]))  # never started
    await store.commit(Writes(tasks=[task("t1", terminal=True, expect=TASK_LIVE)]))
    await refused(store, Writes(tasks=[task("t1", terminal=True, expect=TASK_LIVE)]))  # ended once already
    row = await store.get_task("t1")
    assert row is not None and (row.terminal, row.record) == (True, b"t1:True")
    assert await store.get_task("t9") is None
    # An unconditional write (a channel's close ending its tasks) is not checked.
    await store.commit(Writes(tasks=[task("t1", terminal=True)]))


async def test_two_expiries_of_one_task_in_one_group_commit_the_first(store: HubStore) -> None:
    await store.commit(Writes(tasks=[task("t2", terminal=False, expect=TASK_NEW)]))
    first = store.submit(Writes(tasks=[task("t2", terminal=True, expect=TASK_LIVE)]))
    second = store.submit(Writes(tasks=[task("t2", terminal=True, expect=TASK_LIVE)]))
    results = await asyncio.gather(first, second, return_exceptions=True)
    assert results[0] is None
    assert isinstance(results[1], Unavailable) and isinstance(results[1].__cause__, StoreConflict)
