"""A long task resumed after its agent and the hub restarted: ``task.checkpoint(state)`` inside
``async with agent.task(...)``, then ``agent.task(..., resume_from=<that task>)`` in the next run
reads the last checkpoint back as ``task.resumed_state`` (AG2's Task.checkpoint / resume_from)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from agentnet.v1 import hub_pb2, identity_pb2, task_pb2
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agentsdk import Agent
from agentsdk.config import ScriptedConfig
from agentsdk.errors import PermissionDenied
from agentsdk.network import Hub, HubBackedCheckpointStore, Passport
from agentsdk.network.hub_client import HubClient


class Crash(Exception):
    """The first run dies in the middle of its task."""


async def first_run(target: str, credential_file: Path) -> str:
    async with HubClient.connect(target) as hc:
        agent = Agent("cruncher", config=ScriptedConfig([]))
        await hc.register(agent, Passport(name="cruncher"), credential_file=credential_file)
        with pytest.raises(Crash):
            async with agent.task("crunch 3 batches") as task:
                for batch in range(2):
                    await task.checkpoint({"next_batch": batch + 1, "sums": list(range(batch + 1))})
                raise Crash
        return task.task_id


async def test_a_restarted_agent_resumes_from_its_last_checkpoint_after_a_hub_restart(tmp_path: Path) -> None:
    db, cred = tmp_path / "hub.db", tmp_path / "cruncher.cred"
    async with Hub.open(path=db) as hub:
        first = await first_run(hub.target, cred)
    async with Hub.open(path=db) as hub, HubClient.connect(hub.target) as hc:  # both restarted
        agent = Agent("cruncher", config=ScriptedConfig([]))
        client = await hc.register(agent, Passport(name="cruncher"), credential_file=cred)  # the same identity
        async with agent.task("crunch 3 batches", resume_from=first) as task:
            assert task.resumed_state == {"next_batch": 2, "sums": [0, 1]}
            assert task.task_id != first
        assert await client.read_task_checkpoint(task.task_id) is None  # the new task saved none
        await task.checkpoint({"after": "end"})  # a no-op once the task ended, as in AG2
        assert await client.read_task_checkpoint(task.task_id) is None
        async with agent.task("fresh") as fresh:
            assert fresh.resumed_state is None
        store = HubBackedCheckpointStore(client)  # AG2's name for the same two calls
        assert await store.read(first) == {"next_batch": 2, "sums": [0, 1]}
        stranger = await hc.register(Agent("stranger", config=ScriptedConfig([])), Passport(name="stranger"))
        with pytest.raises(PermissionDenied):
            await stranger.read_task_checkpoint(first)


async def test_tasks_tagged_with_a_capability_build_the_agents_observed_track_record() -> None:
    async with Hub.open() as hub:
        agent = Agent("analyst", config=ScriptedConfig([]))
        await hub.register(agent, Passport(name="analyst"))
        async with agent.task("one", capability="analysis"):
            pass
        with pytest.raises(Crash):
            async with agent.task("two", capability="analysis"):
                raise Crash
        observer = await hub.register_human(Passport(name="observer", kind="human"))
        del observer
        resume = await hub.get_resume("analyst")
        stat = resume.observed["analysis"]
        assert (stat.n, stat.completed, stat.failed, stat.success_rate) == (2, 1, 1, 0.5)
        assert stat.last_updated is not None and resume.last_updated == stat.last_updated
        assert resume.claimed_capabilities == []  # never claimed it: found by what it was observed doing, as AG2
        assert [a.name for a in await hub.list_agents(capability="Analysis")] == ["analyst"]
        assert await hub.list_agents(capability="poetry") == []


async def test_cancel_after_complete_is_a_no_op_and_an_unknown_tasks_checkpoint_is_none() -> None:
    async with Hub.open() as hub:
        agent = Agent("finisher", config=ScriptedConfig([]))
        client = await hub.register(agent, Passport(name="finisher"))
        async with agent.task("quick") as task:
            await task.complete({"done": True})
            await task.cancel("too late")  # as in AG2: the task ended, nothing changes
        record = (await client.rpc.get_task(hub_pb2.GetTaskRequest(task_id=task.task_id))).task
        assert (record.state, json.loads(record.result_json)) == (task_pb2.TASK_STATE_COMPLETED, {"done": True})
        assert await client.read_task_checkpoint("no-such-task") is None  # as AG2: nothing to resume from
        async with agent.task("again", resume_from="no-such-task") as resumed:
            assert resumed.resumed_state is None


async def test_set_resume_stamps_last_updated_and_the_fallback_skill_shows_the_track_record() -> None:
    async with Hub.open() as hub:
        agent = Agent("analyst", config=ScriptedConfig([]))
        client = await hub.register(agent, Passport(name="analyst"))
        assert (await hub.get_resume("analyst")).last_updated is None  # never changed yet
        before = time.time()
        claims = identity_pb2.Resume(summary="analyses data", claimed_capabilities=["analysis"])
        await client.rpc.set_resume(hub_pb2.SetResumeRequest(resume=claims))
        stamped = (await hub.get_resume("analyst")).last_updated
        assert stamped is not None and before - 1 <= stamped <= time.time() + 1  # stamped on change, as AG2
        async with agent.task("one", capability="analysis"):
            pass
        resume = await hub.get_resume("analyst")
        assert resume.last_updated is not None and resume.last_updated >= stamped
        record = (await client.rpc.describe_agent(hub_pb2.DescribeAgentRequest(agent_id="analyst"))).agent
        assert record.skill_is_fallback
        track = "## Track record\n\n- analysis: 1 completed / 0 failed / 0 expired / 0 cancelled (n=1)\n"
        assert track in record.skill_md


async def test_checkpoint_writes_and_reads_are_events_on_the_current_span(
    spans: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    """As AG2's HubBackedCheckpointStore: a checkpoint travels outside any envelope, so its write and its
    read are pinned as span events on whatever span is current (a handler turn's, or the caller's)."""
    provider, exporter = spans
    async with Hub.open() as hub:
        agent = Agent("saver", config=ScriptedConfig([]))
        client = await hub.register(agent, Passport(name="saver"))
        with provider.get_tracer("test").start_as_current_span("turn"):
            async with agent.task("save") as task:
                await task.checkpoint({"step": 1})
                assert await HubBackedCheckpointStore(client).read(task.task_id) == {"step": 1}
            assert await client.read_task_checkpoint("no-such-task") is None
        [turn] = [s for s in exporter.get_finished_spans() if s.name == "turn"]
        events = [(e.name, dict(e.attributes or {})) for e in turn.events]
        assert events == [
            ("checkpoint.write", {"agentnet.task_id": task.task_id, "agentnet.checkpoint.bytes": len('{"step": 1}')}),
            ("checkpoint.read", {"agentnet.task_id": task.task_id, "agentnet.checkpoint.hit": True}),
            ("checkpoint.read", {"agentnet.task_id": "no-such-task", "agentnet.checkpoint.hit": False}),
        ]
