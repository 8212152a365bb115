"""Observed capability statistics (AG2's Resume.observed): the hub counts how an identity's tasks
tagged with a capability end, durably, and shows them in DescribeAgent's resume with
``last_updated`` — on both stores, after a restart, and across replicas."""

from __future__ import annotations

from pathlib import Path

from agentnet.v1 import hub_pb2, identity_pb2, task_pb2

from hubsvc.core.options import HubOptions
from tests.hubsvc.harness import Participant, assert_eventually, register, running_hub

QUIET = HubOptions(sweep_interval=3600.0)


async def run_task(owner: Participant, capability: str, kind: int) -> str:
    started = await owner.rpc(
        "ReportTask",
        hub_pb2.ReportTaskRequest(kind=task_pb2.TASK_EVENT_KIND_STARTED, title="job", capability=capability),
    )
    assert started.task.capability == capability
    await owner.rpc("ReportTask", hub_pb2.ReportTaskRequest(task_id=started.task.task_id, kind=kind))
    return str(started.task.task_id)


async def observed(who: Participant, of: Participant) -> identity_pb2.Resume:
    found = await who.rpc("DescribeAgent", hub_pb2.DescribeAgentRequest(agent_id=of.agent_id))
    resume: identity_pb2.Resume = found.agent.resume
    return resume


async def test_ended_tasks_count_per_capability_and_survive_a_restart(tmp_path: Path) -> None:
    db = tmp_path / "hub.db"
    async with running_hub(db, QUIET) as hub:
        owner = await register(hub.target, "worker", capabilities=["research"])
        peer = await register(hub.target, "peer")
        assert not (await observed(peer, owner)).observed
        for kind in (task_pb2.TASK_EVENT_KIND_COMPLETED, task_pb2.TASK_EVENT_KIND_COMPLETED):
            await run_task(owner, "research", kind)
        await run_task(owner, "research", task_pb2.TASK_EVENT_KIND_FAILED)
        await run_task(owner, "summaries", task_pb2.TASK_EVENT_KIND_CANCELLED)
        await run_task(owner, "", task_pb2.TASK_EVENT_KIND_COMPLETED)  # untagged: not counted
        short = await owner.rpc(
            "ReportTask",
            hub_pb2.ReportTaskRequest(kind=task_pb2.TASK_EVENT_KIND_STARTED, capability="summaries", ttl_seconds=0.05),
        )
        expired = await assert_eventually(hub.core.tasks.expire)  # sweep until its ttl has passed
        assert [t.task_id for t in expired] == [short.task.task_id]
        resume = await observed(peer, owner)
        research, summaries = resume.observed["research"], resume.observed["summaries"]
        assert (research.n, research.completed, research.failed) == (3, 2, 1)
        assert abs(research.success_rate - 2 / 3) < 1e-9
        assert (summaries.n, summaries.cancelled, summaries.expired, summaries.success_rate) == (2, 1, 1, 0.0)
        assert summaries.last_latency_ms >= 50  # the expired one lived at least its ttl
        assert resume.last_updated.ToDatetime() >= research.last_updated.ToDatetime()
        assert resume.HasField("last_updated") and research.HasField("last_updated")
        # A client's resume cannot write the hub's observations.
        forged = identity_pb2.Resume(claimed_capabilities=["research"])
        forged.observed["research"].completed = 1000
        await owner.rpc("SetResume", hub_pb2.SetResumeRequest(resume=forged))
        assert (await observed(peer, owner)).observed["research"].completed == 2
    async with running_hub(db, QUIET) as restarted, running_hub(db, QUIET) as replica:
        for hub_now in (restarted, replica):
            again = Participant(hub_now.target, peer.record, peer.credential)
            assert (await observed(again, owner)).observed["research"].n == 3
        # A task ended on the other replica adds to the same counts.
        owner_there = Participant(replica.target, owner.record, owner.credential)
        await run_task(owner_there, "research", task_pb2.TASK_EVENT_KIND_COMPLETED)
        here = Participant(restarted.target, peer.record, peer.credential)
        assert (await observed(here, owner)).observed["research"].completed == 3
