"""AG2's own cross-process scenarios, run with the released ag2 1.2.1 unmodified, each AG2 program in a
process of its own, against a real hub behind the gateway: register and discover across connections,
a discussion of 8 spread over processes, reconnect by name resuming a pending turn, and task
checkpoints written by one process and read by the next."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.ag2gateway.conftest import Ag2Error, Net
from tests.ag2gateway.test_channels import TOKEN, texts
from tests.ag2gateway.test_open import event_types
from tests.eventually import assert_eventually


async def test_identities_registered_in_one_process_are_found_from_another(net: Net) -> None:
    registrar = await net.another_process()
    ann = await registrar("agent", name="ann", token=TOKEN.format("ann"), summary="translates", capabilities=["fr"])
    ben = await registrar("agent", name="ben", token=TOKEN.format("ben"), summary="reviews", capabilities=["review"])
    host = await registrar("human", name="host", token=TOKEN.format("host"))

    finder = await net.another_process()  # a fresh connection, no identity of its own
    assert await finder("rpc", name="find_agent_id", params={"name": "ann"}) == ann["agent_id"]
    assert await finder("rpc", name="find_agent_id", params={"name": "nobody"}) is None
    passport = await finder("call", name="get_agent", args=["ben"])
    assert (passport["agent_id"], passport["name"], passport["kind"]) == (ben["agent_id"], "ben", "agent")
    resume = await finder("call", name="get_resume", args=[ann["agent_id"]])
    assert (resume["summary"], resume["claimed_capabilities"]) == ("translates", ["fr"])
    assert [p["name"] for p in await finder("call", name="list_agents", kwargs={"capability": "fr"})] == ["ann"]
    assert [p["name"] for p in await finder("call", name="list_agents", kwargs={"kind": "human"})] == ["host"]
    listed = await finder("call", name="list_agents", kwargs={"sort_by": "name"})
    assert [p["name"] for p in listed] == ["ann", "ben", "host"]
    names = await finder("rpc", name="names_for", params={"agent_ids": [host["agent_id"], "f" * 32]})
    assert names == {host["agent_id"]: "host", "f" * 32: "f" * 32}


async def test_a_discussion_of_8_across_three_processes_takes_its_turns_exactly(net: Net) -> None:
    first, second = await net.another_process(), await net.another_process()
    agents: list[dict[str, Any]] = []
    for n in range(7):  # 7 AG2 agents: 4 in one process, 3 in the other
        process = first if n % 2 == 0 else second
        agents.append(await process("agent", name=f"panelist{n}", token=TOKEN.format(f"p{n}"), replies=[f"view {n}"]))
    host = await net.ag2("human", name="host", token=TOKEN.format("host"))
    names = [f"panelist{n}" for n in range(7)]
    opened = await net.ag2("open", who="host", type="discussion", targets=names)
    assert opened["metadata"]["state"] == "active" and len(opened["metadata"]["participants"]) == 8
    channel_id = opened["channel_id"]

    for round_ in range(2):
        await net.ag2("send", who="host", channel_id=channel_id, text=f"topic {round_}")

        async def round_done(round_: int = round_) -> bool:
            got = [e for e in await net.ag2("received", who="host") if e["event_type"] == "ag2.msg.text"]
            expected = [(a["agent_id"], f"view {n}") for n, a in enumerate(agents)] * (round_ + 1)
            assert [(e["sender_id"], e["event_data"]["text"]) for e in got] == expected
            return True

        await assert_eventually(round_done, timeout=60)

    wal = await net.ag2("call", name="read_wal", args=[channel_id])
    said = [(e["sender_id"], e["event_data"].get("text")) for e in wal if e["event_type"] == "ag2.msg.text"]
    one_round = [(a["agent_id"], f"view {n}") for n, a in enumerate(agents)]
    assert said == [(host["agent_id"], "topic 0"), *one_round, (host["agent_id"], "topic 1"), *one_round]
    assert event_types(wal)[:8] == [*["ag2.channel.invite.ack"] * 7, "ag2.channel.opened"]


async def test_an_agent_reconnecting_by_name_in_a_new_process_resumes_its_pending_turn(net: Net) -> None:
    first_life = await net.another_process()
    bob = await first_life("human", name="bob", token=TOKEN.format("bob"))  # reads, never answers
    await net.ag2("human", name="alice", token=TOKEN.format("alice"))
    opened = await net.ag2("open", who="alice", type="consulting", targets=["bob"])
    channel_id = opened["channel_id"]
    question = await net.ag2("send", who="alice", channel_id=channel_id, text="what is six times seven?")

    async def delivered() -> bool:
        assert texts(await first_life("received", who="bob")) == ["what is six times seven?"]
        return True

    await assert_eventually(delivered, timeout=30)
    await first_life.stop()  # the process ends with its turn pending

    second_life = await net.another_process()
    again = await second_life(
        "attach_agent",
        conn="main",
        name="bob",
        token=TOKEN.format("bob"),
        replies=["forty-two"],
        since=None,
        resume=True,
    )
    assert (again["agent_id"], again["resumed"]) == (bob["agent_id"], 1)

    async def answered_once() -> bool:
        replies = [e for e in await net.ag2("received", who="alice") if e["event_type"] == "ag2.msg.text"]
        assert [(e["event_data"]["text"], e["causation_id"]) for e in replies] == [
            ("forty-two", question["envelope_id"])
        ]
        return True

    await assert_eventually(answered_once, timeout=30)
    assert await second_life("call", name="pending_turns_for", args=[bob["agent_id"]]) == []
    wal = await second_life("call", name="read_wal", args=[channel_id])
    opening = ["ag2.channel.invite", "ag2.channel.invite.ack", "ag2.channel.opened"]
    assert event_types(wal) == [*opening, "ag2.msg.text", "ag2.msg.text", "ag2.channel.closed"]  # answered: closed
    assert wal[-1]["event_data"]["reason"] == "consulting_complete"


async def test_a_checkpoint_written_in_one_process_is_read_in_the_next(net: Net) -> None:
    first_life = await net.another_process()
    bob = await first_life("agent", name="bob", token=TOKEN.format("bob"))
    task = {
        "task_id": "crunch-1",
        "owner_id": bob["agent_id"],
        "spec": {"title": "crunch", "description": "", "payload": {}, "capability": "math"},
        "state": "running",
        "channel_id": None,
    }
    await first_life("rpc", name="observe_task", params={"metadata": task})
    await first_life("call", name="checkpoint_task", args=["crunch-1", {"step": 2, "partial": [1, 2]}])
    await first_life.stop()

    second_life = await net.another_process()
    await second_life("attach_agent", conn="main", name="bob", token=TOKEN.format("bob"))
    assert await second_life("call", name="read_task_checkpoint", args=["crunch-1"]) == {"step": 2, "partial": [1, 2]}
    await second_life("call", name="checkpoint_task", args=["crunch-1", {"step": 3}])
    assert await second_life("call", name="read_task_checkpoint", args=["crunch-1"]) == {"step": 3}
    assert await second_life("call", name="read_task_checkpoint", args=["no-such-task"]) is None  # as AG2's hub

    await net.ag2("human", name="eve", token=TOKEN.format("eve"))
    with pytest.raises(Ag2Error, match="AccessDeniedError"):  # only the owner reads its checkpoint
        await net.ag2("call", name="read_task_checkpoint", args=["crunch-1"])


async def test_an_ag2_agent_and_an_agentsdk_agent_in_their_own_processes_take_turns_in_one_discussion(
    net: Net,
) -> None:
    ag2_process = await net.another_process()
    bob = await ag2_process("agent", name="bob", token=TOKEN.format("bob"), replies=["bob (ag2) agrees"])
    sdk = await asyncio.create_subprocess_exec(
        sys.executable,
        str(Path(__file__).with_name("sdk_panelist.py")),
        net.hub.target,
        "sdkbot",
        "sdkbot (agentsdk) agrees",
        "sdkbot (agentsdk) agrees again",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert sdk.stdout is not None and sdk.stdin is not None
        sdk_id = (await asyncio.wait_for(sdk.stdout.readline(), 60)).decode().strip()
        await net.ag2("human", name="alice", token=TOKEN.format("alice"))
        opened = await net.ag2("open", who="alice", type="discussion", targets=["bob", "sdkbot"])
        channel_id = opened["channel_id"]
        turns: list[tuple[str, str]] = []
        for round_, sdk_says in enumerate(["sdkbot (agentsdk) agrees", "sdkbot (agentsdk) agrees again"]):
            await net.ag2("send", who="alice", channel_id=channel_id, text=f"proposal {round_}")
            turns += [(bob["agent_id"], "bob (ag2) agrees"), (sdk_id, sdk_says)]

            expected = list(turns)

            async def answered(expected: list[tuple[str, str]] = expected) -> bool:
                got = [e for e in await net.ag2("received", who="alice") if e["event_type"] == "ag2.msg.text"]
                assert [(e["sender_id"], e["event_data"]["text"]) for e in got] == expected
                return True

            await assert_eventually(answered, timeout=60)
        wal = await ag2_process("call", name="read_wal", args=[channel_id])
        said = [e["event_data"]["text"] for e in wal if e["event_type"] == "ag2.msg.text"]
        assert said == [
            *["proposal 0", "bob (ag2) agrees", "sdkbot (agentsdk) agrees"],
            *["proposal 1", "bob (ag2) agrees", "sdkbot (agentsdk) agrees again"],
        ]
    finally:
        if sdk.stdin is not None:
            sdk.stdin.close()
        try:
            await asyncio.wait_for(sdk.wait(), 30)
        except TimeoutError:
            sdk.kill()
            await sdk.wait()
