"""The call tokens one A2A execution holds in the store are capped (``a2a_max_tokens``).

Every RefreshCallToken of a running call stores a token; without a cap a callee refreshing
in a loop would make the hub store rows without bound. A refresh that would leave the
execution holding more unexpired tokens than the cap is refused (RESOURCE_EXHAUSTED /
LIMIT_EXCEEDED) and stores nothing; every token handed out keeps working until its expiry.
Expired tokens make room: those expired more than the grace period ago are removed by the
next issue, and the oldest expired ones give way when the cap would otherwise be exceeded.
Stored tokens are counted through a second store client (the same store, opened again).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import pytest
from agentnet.v1 import hub_pb2

from agentsdk.errors import LimitExceeded
from hubsvc.core.options import HubOptions
from hubsvc.core.util import hash_secret
from tests.clock import FakeClock
from tests.hubsvc.harness import EV_TEXT, Participant, RunningHub, data_of, make_store, running_hub
from tests.hubsvc.test_a2a import COMPLETED, a2a_agent, answering, invoke

CAP = 4
OPTIONS = HubOptions(a2a_token_ttl=300, a2a_token_grace=600, a2a_max_tokens=CAP, sweep_interval=3600.0)


def by_execution(execution_id: str) -> hub_pb2.RefreshCallTokenRequest:
    return hub_pb2.RefreshCallTokenRequest(execution_id=execution_id)


def exchange(token: str) -> hub_pb2.RefreshCallTokenRequest:
    return hub_pb2.RefreshCallTokenRequest(call_token=token)


async def stored(db: Path, tokens: list[str]) -> list[str]:
    """Which of ``tokens`` the store holds, read through a second client of the same store."""
    store = make_store(db)
    await store.open()
    try:
        return [t for t in tokens if await store.get_call_token(hash_secret(t.partition(".")[2])) is not None]
    finally:
        await store.close()


@asynccontextmanager
async def in_call(a: Participant, b: Participant) -> AsyncIterator[str]:
    """``a`` calls ``b``; yields the execution id while the call runs, then ``b`` answers it."""
    top = asyncio.create_task(a.rpc("InvokeAgent", invoke(b)))
    question = await b.next(lambda e: e.event_type == EV_TEXT)
    yield data_of(question)["a2a"]["execution_id"]
    await b.say(question.channel_id, "done")
    assert (await top).status == COMPLETED


async def agents(hub: RunningHub) -> tuple[Participant, Participant, Participant]:
    return await a2a_agent(hub.target, "a"), await a2a_agent(hub.target, "b"), await a2a_agent(hub.target, "c")


async def test_a_refresh_past_the_cap_is_refused_and_every_token_handed_out_works_until_its_expiry(
    tmp_path: Path,
) -> None:
    clock = FakeClock(frozen=True)
    async with running_hub(tmp_path / "hub.db", OPTIONS, clock=clock) as hub:
        a, b, c = await agents(hub)
        async with in_call(a, b) as execution_id, answering(c, lambda _d: ("from c", None)):
            tokens = [(await b.rpc("RefreshCallToken", by_execution(execution_id))).call_token]
            tokens.append((await b.rpc("RefreshCallToken", exchange(tokens[0]))).call_token)
            for _ in range(CAP - 2):
                tokens.append((await b.rpc("RefreshCallToken", by_execution(execution_id))).call_token)
            assert await stored(hub.db, tokens) == tokens
            for request in (by_execution(execution_id), exchange(tokens[-1])):
                with pytest.raises(LimitExceeded) as refused:
                    await b.rpc("RefreshCallToken", request)
                assert refused.value.code.name == "RESOURCE_EXHAUSTED"
                assert "use a token you already hold" in str(refused.value).lower()
                assert refused.value.metadata["limit"] == str(CAP)
            clock.offset += 299  # one second before they expire, every token handed out still works
            for token in tokens:
                nested = await b.rpc("InvokeAgent", invoke(c, call_token=token))
                assert nested.status == COMPLETED and nested.result == "from c"
            assert await stored(hub.db, tokens) == tokens  # the refusals stored nothing
            clock.offset += 1  # now they have expired: a new token takes the place of one of them
            fresh = (await b.rpc("RefreshCallToken", by_execution(execution_id))).call_token
            now_stored = await stored(hub.db, [*tokens, fresh])
            assert len(now_stored) == CAP and now_stored[-1] == fresh
            assert (await b.rpc("InvokeAgent", invoke(c, call_token=fresh))).status == COMPLETED


async def test_expired_tokens_leave_the_store_as_new_ones_are_issued(tmp_path: Path) -> None:
    clock = FakeClock(frozen=True)
    async with running_hub(tmp_path / "hub.db", OPTIONS, clock=clock) as hub:
        a, b, _c = await agents(hub)
        async with in_call(a, b) as execution_id:
            first = [(await b.rpc("RefreshCallToken", by_execution(execution_id))).call_token]
            clock.offset += 1  # first[0] expires a second before first[1]
            first.append((await b.rpc("RefreshCallToken", by_execution(execution_id))).call_token)
            clock.offset += 300  # both expired, but within the grace period: kept while there is room
            second = [(await b.rpc("RefreshCallToken", by_execution(execution_id))).call_token for _ in range(2)]
            assert await stored(hub.db, first + second) == first + second
            # An expired token is still exchanged within the grace period; the oldest expired one
            # gives way for its successor, so the execution never holds more than the cap.
            swapped = (await b.rpc("RefreshCallToken", exchange(first[1]))).call_token
            assert await stored(hub.db, [*first, *second, swapped]) == [first[1], *second, swapped]
            clock.offset += 1000  # every token so far is past expiry + grace: it can never be accepted again
            last = (await b.rpc("RefreshCallToken", by_execution(execution_id))).call_token
            assert await stored(hub.db, [*first, *second, swapped, last]) == [last]


async def test_concurrent_refreshes_through_two_replicas_never_store_more_than_the_cap(
    tmp_path: Path, hub_store: str
) -> None:
    db = tmp_path / "hub.db"
    async with running_hub(db, OPTIONS) as hub_a, AsyncExitStack() as stack:
        a, b, _c = await agents(hub_a)
        # Replicas share Redis; a SQLite file serves one hub process, so there both go through it.
        hub_b = await stack.enter_async_context(running_hub(db, OPTIONS)) if hub_store != "sqlite" else hub_a
        b_via_b = Participant(hub_b.target, b.record, b.credential)  # B loaded A's identities at start
        async with in_call(a, b) as execution_id:
            await b_via_b.rpc("RefreshCallToken", by_execution(execution_id))  # B has read the execution
            results = await asyncio.gather(
                *(who.rpc("RefreshCallToken", by_execution(execution_id)) for who in [b, b_via_b] * 8),
                return_exceptions=True,
            )
            issued = [r.call_token for r in results if isinstance(r, hub_pb2.RefreshCallTokenResponse)]
            refused = [r for r in results if not isinstance(r, hub_pb2.RefreshCallTokenResponse)]
            assert all(isinstance(r, LimitExceeded) for r in refused), refused
            assert len(issued) == CAP - 1 and len(refused) == 16 - (CAP - 1)
            assert await stored(db, issued) == issued
