"""The harness fails fast and loudly: a hang is a clear failure, a broken stream reader is not swallowed."""

from __future__ import annotations

import pytest
from agentnet.v1 import connect_pb2, hub_pb2, task_pb2

from agentsdk import errors
from tests.hubsvc.harness import Participant, RunningHub, assert_eventually, open_channel


async def _running_task(alice: Participant, bob: Participant) -> str:
    cid = await open_channel(alice, "conversation", [bob])
    request = hub_pb2.ReportTaskRequest(kind=task_pb2.TASK_EVENT_KIND_STARTED, channel_id=cid)
    return str((await alice.rpc("ReportTask", request)).task.task_id)


async def test_an_unanswered_rpc_fails_at_the_harness_deadline(
    trio: tuple[Participant, Participant, Participant],
) -> None:
    alice, bob, _ = trio
    tid = await _running_task(alice, bob)
    waiting = hub_pb2.WaitTaskRequest(task_id=tid, timeout_seconds=60)  # the hub answers in a minute
    bob.deadline = 0.3
    with pytest.raises(AssertionError, match=r"WaitTask got no answer within the harness.s 0\.3 s deadline"):
        await bob.rpc("WaitTask", waiting)
    with pytest.raises(errors.Timeout):  # an explicit timeout is the caller's own deadline: the domain error
        await bob.rpc("WaitTask", waiting, timeout=0.3)
    # The hub's own "timed out" answer is not mistaken for a hang.
    bob.deadline = 10
    waited = await bob.rpc("WaitTask", hub_pb2.WaitTaskRequest(task_id=tid, timeout_seconds=0.1))
    assert waited.timed_out


class BrokenReader(Participant):
    """A participant whose delivery handling raises (a bug in a test's reader)."""

    async def _on_delivery(self, delivery: connect_pb2.Delivery) -> None:
        raise RuntimeError(f"reader broke on seq {delivery.envelope.seq}")


async def test_disconnect_reports_what_broke_the_reader(
    hub: RunningHub, trio: tuple[Participant, Participant, Participant]
) -> None:
    alice, bob, _ = trio
    broken = BrokenReader(hub.target, bob.record, bob.credential)
    await bob.disconnect()
    await broken.connect()
    await alice.rpc("OpenChannel", hub_pb2.OpenChannelRequest(type="conversation", targets=[bob.agent_id]))
    reader = broken._reader
    assert reader is not None
    await assert_eventually(reader.done)  # the invite reached the broken handler
    with pytest.raises(RuntimeError, match="reader broke on seq 1"):
        await broken.close()
