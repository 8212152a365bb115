"""Task checkpoints (CheckpointTask / ReadTaskCheckpoint): the owner saves its task's resume state
on the hub and reads it back after a restart — of itself, of the hub, or on another replica.

Runs on both stores (tests/hubsvc/conftest.py); on Redis the two hubs of a test are replicas of
one deployment (the same keys), on SQLite the same file reopened.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from agentnet.v1 import hub_pb2, task_pb2

from agentsdk.errors import FailedPrecondition, InvalidArgument, NotFound, PayloadTooLarge, PermissionDenied
from hubsvc.core.options import HubOptions
from tests.hubsvc.harness import Participant, register, running_hub


async def start(owner: Participant, title: str = "long job") -> str:
    started = await owner.rpc(
        "ReportTask", hub_pb2.ReportTaskRequest(kind=task_pb2.TASK_EVENT_KIND_STARTED, title=title)
    )
    return str(started.task.task_id)


async def save(owner: Participant, task_id: str, state: object) -> hub_pb2.CheckpointTaskResponse:
    request = hub_pb2.CheckpointTaskRequest(task_id=task_id, state_json=json.dumps(state))
    response: hub_pb2.CheckpointTaskResponse = await owner.rpc("CheckpointTask", request)
    return response


async def read(who: Participant, task_id: str) -> hub_pb2.ReadTaskCheckpointResponse:
    response: hub_pb2.ReadTaskCheckpointResponse = await who.rpc(
        "ReadTaskCheckpoint", hub_pb2.ReadTaskCheckpointRequest(task_id=task_id)
    )
    return response


async def test_the_last_checkpoint_survives_a_hub_restart_and_reads_on_another_replica(tmp_path: Path) -> None:
    db = tmp_path / "hub.db"
    async with running_hub(db) as hub:
        owner = await register(hub.target, "owner")
        task_id = await start(owner)
        assert not (await read(owner, task_id)).found
        await save(owner, task_id, {"step": 1})
        saved = await save(owner, task_id, {"step": 2, "done": ["a", "b"]})
        assert saved.size_bytes == len(json.dumps({"step": 2, "done": ["a", "b"]}))
        async with running_hub(db) as other:  # a second replica on the same store
            there = await read(Participant(other.target, owner.record, owner.credential), task_id)
            assert there.found and json.loads(there.state_json) == {"step": 2, "done": ["a", "b"]}
    async with running_hub(db) as restarted:  # the hub restarted: the checkpoint is durable
        again = Participant(restarted.target, owner.record, owner.credential)
        back = await read(again, task_id)
        assert back.found and json.loads(back.state_json) == {"step": 2, "done": ["a", "b"]}
        assert back.saved_at.ToDatetime() == saved.saved_at.ToDatetime()
        await again.rpc("ReportTask", hub_pb2.ReportTaskRequest(task_id=task_id, kind=task_pb2.TASK_EVENT_KIND_FAILED))
        assert json.loads((await read(again, task_id)).state_json)["step"] == 2  # still readable once it ended


async def test_only_the_owner_saves_and_reads_and_only_while_the_task_runs(tmp_path: Path) -> None:
    async with running_hub(tmp_path / "hub.db") as hub:
        owner = await register(hub.target, "owner")
        other = await register(hub.target, "other")
        task_id = await start(owner)
        await save(owner, task_id, {"secret": "plan"})
        with pytest.raises(PermissionDenied, match="only its owner"):
            await save(other, task_id, {"mine": True})
        with pytest.raises(PermissionDenied, match="only its owner reads"):
            await read(other, task_id)
        assert not (await read(owner, "no-such-task")).found  # an unknown task has nothing to resume from, as in AG2
        with pytest.raises(NotFound):
            await save(owner, "no-such-task", {})
        await owner.rpc(
            "ReportTask", hub_pb2.ReportTaskRequest(task_id=task_id, kind=task_pb2.TASK_EVENT_KIND_COMPLETED)
        )
        with pytest.raises(FailedPrecondition, match="already ended"):
            await save(owner, task_id, {"late": True})
        assert json.loads((await read(owner, task_id)).state_json) == {"secret": "plan"}


async def test_a_checkpoint_is_a_bounded_json_object(tmp_path: Path) -> None:
    options = HubOptions(max_checkpoint_bytes=64)
    async with running_hub(tmp_path / "hub.db", options) as hub:
        owner = await register(hub.target, "owner")
        task_id = await start(owner)
        await save(owner, task_id, {"ok": 1})
        for bad in ([1, 2], "text", 3):
            with pytest.raises(InvalidArgument, match="JSON object"):
                await save(owner, task_id, bad)
        with pytest.raises(InvalidArgument, match="not valid JSON"):
            await owner.rpc("CheckpointTask", hub_pb2.CheckpointTaskRequest(task_id=task_id, state_json="{"))
        with pytest.raises(PayloadTooLarge, match="64"):
            await save(owner, task_id, {"big": "x" * 100})
        assert json.loads((await read(owner, task_id)).state_json) == {"ok": 1}  # refusals changed nothing
