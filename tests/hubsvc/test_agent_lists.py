"""An agent's lists (HubService ListAgents, ListChannels, ListTasks) are paged, and what reads them
with an agent credential (``AgentView``: ``agentnet`` with ``--credential-file``) pages through
them all: more than 1,000 identities, channels and tasks come back whole, once each."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import grpc
import pytest
from agentnet.v1 import hub_pb2, task_pb2

from agentsdk.operator import AgentView
from netkernel.errors import InvalidArgument
from tests.hubsvc.harness import Participant, register, running_hub

N = 1005
"""More than the largest page (1,000)."""
AT_ONCE = 50
T = TypeVar("T")


async def _in_chunks(calls: Sequence[Callable[[], Awaitable[T]]]) -> list[T]:
    out: list[T] = []
    for i in range(0, len(calls), AT_ONCE):
        out += await asyncio.gather(*(c() for c in calls[i : i + AT_ONCE]))
    return out


async def _walk(alice: Participant, method: str, request: Any, field: str) -> list[Any]:
    """Every item of a HubService list, a page (the request's ``limit``) at a time."""
    out: list[Any] = []
    while True:
        page = await alice.rpc(method, request)
        out += getattr(page, field)
        if not page.next_page_token:
            return out
        request.page_token = page.next_page_token


async def test_an_agent_credential_lists_more_than_a_thousand_of_everything(tmp_path: Path) -> None:
    async with running_hub(tmp_path / "hub.db") as hub:
        alice = await register(hub.target, "alice")
        names = [f"peer-{i:04d}" for i in range(N)]
        async with grpc.aio.insecure_channel(hub.target) as channel:  # one connection for the thousand
            peers = await _in_chunks([lambda n=n: register(hub.target, n, via=channel) for n in names])
        for peer in peers:
            await peer.channel.close()  # only their ids are needed
        # A conversation with each peer (pending: nobody acks, so it stays live for as long as its invite
        # may go unanswered: an hour, not the default 30 s a loaded machine could outlast) and a task each.
        opened = await _in_chunks(
            [
                lambda p=p: alice.rpc(
                    "OpenChannel",
                    hub_pb2.OpenChannelRequest(
                        type="conversation", targets=[p.agent_id], invite_ack_timeout_seconds=3600
                    ),
                )
                for p in peers
            ]
        )
        started = await _in_chunks(
            [
                lambda i=i: alice.rpc(
                    "ReportTask", hub_pb2.ReportTaskRequest(kind=task_pb2.TASK_EVENT_KIND_STARTED, title=f"t{i}")
                )
                for i in range(N)
            ]
        )
        channel_ids = [r.channel.channel_id for r in opened]
        task_ids = [r.task.task_id for r in started]

        async with AgentView(hub.target, alice.credential) as view:
            agents = await view.agents()
            assert [a.name for a in agents] == sorted(["alice", *names])
            assert [a.name for a in await view.agents(limit=1002)] == sorted(["alice", *names])[:1002]
            channels = await view.channels()
            assert sorted(c.channel_id for c in channels) == sorted(channel_ids)
            tasks = await view.tasks()
            assert sorted(t.task_id for t in tasks) == sorted(task_ids)

        # Small pages walk the same lists, in every order ListAgents offers, each item once.
        for sort_by in ("name", "registered_at", "last_seen"):
            walked = await _walk(alice, "ListAgents", hub_pb2.ListAgentsRequest(sort_by=sort_by, limit=97), "agents")
            assert sorted(a.name for a in walked) == sorted(["alice", *names]), sort_by
        by_registration = await _walk(
            alice, "ListAgents", hub_pb2.ListAgentsRequest(sort_by="registered_at", limit=97), "agents"
        )
        assert by_registration[0].name == "alice"
        walked_channels = await _walk(alice, "ListChannels", hub_pb2.ListChannelsRequest(limit=97), "channels")
        assert [c.channel_id for c in walked_channels] == [c.channel_id for c in channels]
        walked_tasks = await _walk(
            alice, "ListTasks", hub_pb2.ListTasksRequest(scope=hub_pb2.TASK_SCOPE_ALL, limit=97), "tasks"
        )
        assert [t.task_id for t in walked_tasks] == [t.task_id for t in tasks]


@pytest.mark.parametrize("method", ["ListAgents", "ListChannels", "ListTasks"])
async def test_a_page_token_not_of_that_list_is_refused(tmp_path: Path, method: str) -> None:
    async with running_hub(tmp_path / "hub.db") as hub:
        alice = await register(hub.target, "alice")
        request = getattr(hub_pb2, f"{method}Request")(page_token="bm90LWEtdG9rZW4")
        with pytest.raises(InvalidArgument, match=r"page_token is not a \w+ page token of this hub"):
            await alice.rpc(method, request)
