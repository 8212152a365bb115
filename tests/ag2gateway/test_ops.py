"""AG2's control-plane ops through the gateway, as AG2's HubClient calls them."""

from __future__ import annotations

import pytest

from tests.ag2gateway.conftest import Ag2Error, Net
from tests.ag2gateway.test_channels import TOKEN, _opened
from tests.eventually import assert_eventually


async def test_discovery_and_identity_ops(net: Net) -> None:
    ag2 = net.ag2
    bob = await ag2("agent", name="bob", token=TOKEN.format("bob"), summary="answers questions")
    alice = await ag2("human", name="alice", token=TOKEN.format("alice"))
    assert await ag2("rpc", name="find_agent_id", params={"name": "bob"}) == bob["agent_id"]
    assert await ag2("rpc", name="find_agent_id", params={"name": "nobody"}) is None
    passport = await ag2("call", name="get_agent", args=["bob"])
    assert (passport["agent_id"], passport["auth"], passport["kind"]) == (
        bob["agent_id"],
        {"scheme": "api_key", "issuer": None, "audience": None, "key_fingerprint": None, "claim": {}},
        "agent",
    )
    resume = await ag2("call", name="get_resume", args=[bob["agent_id"]])
    assert resume["summary"] == "answers questions"
    names = await ag2("rpc", name="names_for", params={"agent_ids": [bob["agent_id"], alice["agent_id"]]})
    assert names == {bob["agent_id"]: "bob", alice["agent_id"]: "alice"}
    listed = await ag2("call", name="list_agents")
    assert sorted(p["name"] for p in listed) == ["alice", "bob"]  # the gateway's own directory identity is not listed
    await ag2("rpc", name="set_skill", params={"agent_id": bob["agent_id"], "skill_md": "# bob\nI answer."})
    assert await ag2("call", name="get_skill", args=[bob["agent_id"]]) == "# bob\nI answer."
    rule = await ag2("call", name="get_rule", args=[bob["agent_id"]])
    assert rule["access"]["inbound_from"] == ["*"]
    rule["access"]["inbound_from"] = ["alice"]
    await ag2("rpc", name="set_rule", params={"agent_id": bob["agent_id"], "rule": rule})
    assert (await ag2("call", name="get_rule", args=[bob["agent_id"]]))["access"]["inbound_from"] == ["alice"]
    rule["limits"]["inbox"]["overflow"] = "drop_oldest"
    with pytest.raises(Ag2Error, match=r"ProtocolError: .*overflow 'drop_oldest' cannot be enforced"):
        await ag2("rpc", name="set_rule", params={"agent_id": bob["agent_id"], "rule": rule})
    with pytest.raises(Ag2Error, match="AccessDeniedError"):  # acting as an identity not bound here
        await ag2("rpc", name="set_skill", params={"agent_id": "f" * 32, "skill_md": "x"}, conn="other")


async def test_channel_and_wal_ops(net: Net) -> None:
    ag2 = net.ag2
    bob = await ag2("human", name="bob", token=TOKEN.format("bob"))
    alice = await ag2("human", name="alice", token=TOKEN.format("alice"))
    opened = await ag2("open", who="alice", type="consulting", targets=["bob"])
    channel_id = opened["channel_id"]
    await _opened(net, channel_id)
    assert await ag2("call", name="can_send", args=[channel_id, alice["agent_id"]]) is True
    assert await ag2("call", name="can_send", args=[channel_id, bob["agent_id"]]) is False  # the initiator asks first
    question = await ag2("send", who="alice", channel_id=channel_id, text="q?")
    pending = await ag2("call", name="pending_turns_for", args=[bob["agent_id"]])
    assert [(t["channel_id"], t["triggering_envelope_id"]) for t in pending] == [(channel_id, question["envelope_id"])]
    answer = await ag2(
        "rpc",
        name="post_envelope",
        params={
            "envelope": {
                "channel_id": channel_id,
                "sender_id": bob["agent_id"],
                "audience": None,
                "event_type": "ag2.msg.text",
                "event_data": {"text": "a."},
                "causation_id": question["envelope_id"],
            }
        },
    )
    wal = await ag2("call", name="read_wal", args=[channel_id])
    assert "ag2.channel.invite.ack" in [e["event_type"] for e in wal]  # AG2's spelling of the hub's invite_ack
    assert [e["envelope_id"] for e in wal] == sorted(e["envelope_id"] for e in wal)
    texts = [e for e in wal if e["event_type"] == "ag2.msg.text"]
    assert [e["envelope_id"] for e in texts] == [question["envelope_id"], answer]
    assert texts[-1]["causation_id"] == question["envelope_id"]
    found = await ag2(
        "call",
        name="find_envelope_by_causation",
        args=[channel_id],
        kwargs={"sender_id": bob["agent_id"], "causation_id": question["envelope_id"]},
    )
    assert found["envelope_id"] == answer

    async def closed_by_adapter() -> bool:
        meta = await ag2("call", name="get_channel", args=[channel_id])
        assert meta["state"] == "closed"
        return True

    await assert_eventually(closed_by_adapter, timeout=15)  # a consulting channel ends with its answer
    channels = await ag2("call", name="list_channels", kwargs={"agent_id": alice["agent_id"], "include_terminal": True})
    assert [c["channel_id"] for c in channels] == [channel_id]


async def test_task_ops_and_checkpoints(net: Net) -> None:
    ag2 = net.ag2
    bob = await ag2("agent", name="bob", token=TOKEN.format("bob"))
    metadata = {
        "task_id": "task-1",
        "owner_id": bob["agent_id"],
        "spec": {"title": "crunch", "description": "", "payload": {}, "capability": "math"},
        "state": "running",
        "channel_id": None,
    }
    await ag2("rpc", name="observe_task", params={"metadata": metadata})
    await ag2("rpc", name="checkpoint_task", params={"task_id": "task-1", "state": {"step": 3}})
    assert await ag2("rpc", name="read_task_checkpoint", params={"task_id": "task-1"}) == {"step": 3}
    await ag2("rpc", name="update_task", params={"task_id": "task-1", "state": "completed", "result": {"answer": 42}})
    task = await ag2("rpc", name="get_task", params={"task_id": "task-1"})
    assert (task["state"], task["result"], task["spec"]["capability"]) == ("completed", {"answer": 42}, "math")
    listed = await ag2("rpc", name="list_tasks", params={"agent_id": bob["agent_id"]})
    assert [t["task_id"] for t in listed] == ["task-1"]


async def test_gateway_task_without_checkpoint_reads_none_and_cancelled_ends_it_cancelled(net: Net) -> None:
    """read_task_checkpoint of a task that has none is None (not {} or an error), and
    update_task(state="cancelled") ends the task CANCELLED, not FAILED (AG2's HubClient semantics)."""
    ag2 = net.ag2
    bob = await ag2("agent", name="bob", token=TOKEN.format("bob"))
    for task_id in ("never-saved", "to-cancel"):
        metadata = {
            "task_id": task_id,
            "owner_id": bob["agent_id"],
            "spec": {"title": task_id, "description": "", "payload": {}, "capability": ""},
            "state": "running",
            "channel_id": None,
        }
        await ag2("rpc", name="observe_task", params={"metadata": metadata})
    assert await ag2("rpc", name="read_task_checkpoint", params={"task_id": "never-saved"}) is None
    await ag2("rpc", name="update_task", params={"task_id": "to-cancel", "state": "cancelled"})
    task = await ag2("rpc", name="get_task", params={"task_id": "to-cancel"})
    assert task["state"] == "cancelled"
    assert (await ag2("rpc", name="get_task", params={"task_id": "never-saved"}))["state"] == "running"
