"""Python, Go and TypeScript participants on one embedded hub (issue 8).

The Go examples run as built binaries, the TypeScript ones as compiled node
scripts, each against ``hub.target``; Python participants use agentsdk. The Go
bridge's kill/restart resume test lives in ``bridges/go`` (``go test ./...``).
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path
from typing import Any

from agentsdk import Agent
from agentsdk.errors import AgentNetError, NotYourTurn, PermissionDenied
from agentsdk.network import EV_CHANNEL_CLOSED, EV_PACKET, EV_TEXT, Envelope, Hub, HumanClient, Passport
from tests.bridges.conftest import ROOT, last_user


def go_answer(question: str) -> str:
    """The consulting_agent example's reply."""
    return "go-agent: " + question[::-1].upper()


async def closed_event(user: HumanClient, channel_id: str, timeout: float = 30) -> Envelope:
    return await user.next_envelope(
        predicate=lambda e: e.channel_id == channel_id and e.event_type == EV_CHANNEL_CLOSED, timeout=timeout
    )


async def test_python_human_consults_the_go_agent(hub: Hub, go_bins: dict[str, Path], launch: Any) -> None:
    agent = await launch(
        "consulting_agent", go_bins["consulting_agent"], "--hub", hub.target, "--name", "go-consultant"
    )
    ready = await agent.wait_event(lambda e: e["event"] == "ready")
    user = await hub.register_human(Passport(name="user", kind="human"))
    ch = await user.open(type="consulting", target="go-consultant")
    question = await user.send(ch.channel_id, "What is the capital of France?")
    reply = await user.next_envelope(
        predicate=lambda e: e.channel_id == ch.channel_id and e.event_type == EV_TEXT, timeout=20
    )
    assert reply.sender_id == ready["agent_id"]
    assert reply.text == go_answer("What is the capital of France?")
    assert reply.causation_id == question.envelope_id
    closed = await closed_event(user, ch.channel_id)
    assert closed.event_data["reason"] == "consulting_complete"
    await agent.wait_event(lambda e: e["event"] == "done" and e["id"] == question.envelope_id)


async def test_discussion_python_go_and_typescript_three_rounds(
    hub: Hub, go_bins: dict[str, Path], ts_examples: Path, launch: Any, scripted: Any
) -> None:
    config = scripted(lambda req: f"py-agent heard {last_user(req)[:40]!r}")
    await hub.register(Agent("py-panelist", config=config), Passport(name="py-panelist"))
    go = await launch(
        "go discussion_participant",
        go_bins["discussion_participant"],
        *("--hub", hub.target, "--name", "go-panelist", "--channels", "1"),
    )
    ts = await launch(
        "ts discussion_participant",
        "node",
        ts_examples / "discussion_participant.js",
        *("--hub", hub.target, "--name", "ts-panelist", "--channels", "1"),
    )
    await go.wait_event(lambda e: e["event"] == "ready")
    await ts.wait_line(lambda s: s.startswith("registered ts-panelist"))

    moderator = await hub.register_human(Passport(name="mod", kind="human"))
    order = ["mod", "py-panelist", "go-panelist", "ts-panelist"]
    ch = await moderator.open(
        type="discussion", target=order[1:], knobs={"max_turns": 12}, message="Topic: tabs or spaces?"
    )
    cid = ch.channel_id
    for rnd in (2, 3):
        # The TS participant speaks last in each round; then it is the moderator's turn again.
        await moderator.next_envelope(
            predicate=lambda e: (
                e.channel_id == cid and e.event_type == EV_TEXT and hub.name_for(e.sender_id) == order[-1]
            ),
            timeout=30,
        )
        await moderator.send(cid, f"Moderator: round {rnd}, go on.")
    closed = await closed_event(moderator, cid)
    assert closed.event_data["reason"] == "max_turns"

    wal = [e for e in await moderator.read_wal(cid) if e.event_type in (EV_TEXT, EV_PACKET)]
    assert [hub.name_for(e.sender_id) for e in wal] == order * 3
    # The bridges answer the text right before their turn. (The Python default handler
    # may answer an older text when the next one arrives before it ran: not checked.)
    for prev, env in itertools.pairwise(wal):
        if hub.name_for(env.sender_id) in ("go-panelist", "ts-panelist"):
            assert env.causation_id == prev.envelope_id, f"{env.text!r} does not answer {prev.text!r}"
    by = {name: [e.text for e in wal if hub.name_for(e.sender_id) == name] for name in order}
    assert all(t.startswith("py-agent heard '[") for t in by["py-panelist"])
    assert [t.split(":")[0] for t in by["go-panelist"]] == [f"go-agent round {r}" for r in (1, 2, 3)]
    assert [t.split(":")[0] for t in by["ts-panelist"]] == [f"ts-agent round {r}" for r in (1, 2, 3)]
    assert "go-panelist heard \"py-agent heard '[mod]: Topic: tabs or spaces?'\"" in by["go-panelist"][0]

    # Both bridge processes saw the close and exited by themselves (--channels 1).
    assert await go.wait_exit() == 0, go.describe()
    assert await ts.wait_exit() == 0, ts.describe()
    said = [e["text"] for e in go.events if e["event"] == "said"]
    assert said == by["go-panelist"]


async def test_go_delegator_asks_a_python_llm_agent(
    hub: Hub, go_bins: dict[str, Path], launch: Any, scripted: Any
) -> None:
    config = scripted(lambda req: f"expert answer to: {last_user(req)}")
    await hub.register(Agent("py-expert", config=config), Passport(name="py-expert"))
    delegator = await launch(
        "delegator", go_bins["delegator"], "--hub", hub.target, "--target", "py-expert", "What is 6 times 7?"
    )
    assert await delegator.wait_exit(30) == 0, delegator.describe()
    answer = "\n".join(delegator.lines).strip()
    assert answer.startswith("expert answer to: ") and answer.endswith("What is 6 times 7?"), delegator.describe()


def _normalise(message: str, sender: str, sender_id: str) -> str:
    """The refusal message with the refused participant's own name and id replaced where it names the sender."""
    return message.replace(f"not {sender}'s ({sender_id})", "not <sender>'s")


def _python_refusal(err: AgentNetError) -> dict[str, Any]:
    return {"code": err.code.value[0], "reason": err.reason, "message": err.message, "metadata": err.metadata}


async def test_refusals_are_the_same_for_python_go_and_typescript(
    hub: Hub, go_bins: dict[str, Path], ts_examples: Path, launch: Any
) -> None:
    go = await launch(
        "go refusals", go_bins["discussion_participant"], "--hub", hub.target, "--name", "go-bridge", "--demo-refusals"
    )
    ts = await launch("ts refusals", "node", ts_examples / "refusals.js", "--hub", hub.target, "--name", "ts-bridge")
    go_id = (await go.wait_event(lambda e: e["event"] == "ready"))["agent_id"]
    ts_id = (await ts.wait_event(lambda e: e["event"] == "ready"))["agent_id"]

    mod = await hub.register_human(Passport(name="mod", kind="human"))
    peer = await hub.register_human(Passport(name="py-peer", kind="human"))
    # Nobody has spoken: the initiator (mod) is expected; everyone else is out of turn.
    ch = await mod.open(type="discussion", target=["py-peer", "go-bridge", "ts-bridge"])
    cid = ch.channel_id

    python: dict[str, dict[str, Any]] = {}
    try:
        await peer.send(cid, "speaking out of turn")
    except NotYourTurn as err:
        python["out_of_turn"] = _python_refusal(err)
    spoof = Envelope(
        channel_id=cid, sender_id=mod.agent_id, audience=None, event_type=EV_TEXT, event_data={"text": "x"}
    )
    try:
        await peer.post_envelope(spoof)
    except PermissionDenied as err:
        python["spoofed_sender"] = _python_refusal(err)
    assert set(python) == {"out_of_turn", "spoofed_sender"}
    assert python["out_of_turn"]["reason"] == "NOT_YOUR_TURN" and python["out_of_turn"]["code"] == 9
    assert python["spoofed_sender"]["reason"] == "PERMISSION_DENIED" and python["spoofed_sender"]["code"] == 7

    for bridge, name, agent_id in ((go, "go-bridge", go_id), (ts, "ts-bridge", ts_id)):
        for case in ("spoofed_sender", "out_of_turn"):
            got = await bridge.wait_event(lambda e, c=case: e["event"] == "refused" and e["case"] == c)
            want = python[case]
            assert (got["code"], got["reason"]) == (want["code"], want["reason"]), f"{name} {case}: {got}"
            assert _normalise(got["message"], name, agent_id) == _normalise(want["message"], "py-peer", peer.agent_id)
            assert set(got["metadata"]) == set(want["metadata"]), f"{name} {case}: {got['metadata']}"
            assert got["metadata"]["channel_id"] == cid
    # Nothing was admitted: the WAL holds only the lifecycle envelopes.
    assert not [e for e in await mod.read_wal(cid) if e.event_type in (EV_TEXT, EV_PACKET)]
    assert await ts.wait_exit() == 0, ts.describe()


async def test_betterproto_example_reads_the_wal(hub: Hub, launch: Any) -> None:
    alice = await hub.register_human(Passport(name="alice", kind="human"))
    await hub.register_human(Passport(name="bob", kind="human"))
    ch = await alice.open(type="conversation", target="bob")
    first = await alice.send(ch.channel_id, "hello from python")
    second = await alice.send(ch.channel_id, "second line, with ünïcode")
    reader = await launch(
        "betterproto_read_wal",
        sys.executable,
        ROOT / "examples" / "betterproto_read_wal.py",
        *(hub.target, alice.credential, ch.channel_id),
    )
    assert await reader.wait_exit(30) == 0, reader.describe()
    lines = reader.lines
    assert f"{first.seq} {EV_TEXT} hello from python" in lines, reader.describe()
    assert f"{second.seq} {EV_TEXT} second line, with ünïcode" in lines, reader.describe()
    seqs = [int(line.split(" ", 1)[0]) for line in lines]
    assert seqs == sorted(seqs)
