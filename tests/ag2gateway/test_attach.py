"""Re-attach by passport claim: across a gateway restart, replay from the hub's cursors, auth failures."""

from __future__ import annotations

import json

import pytest

from tests.ag2gateway.conftest import Ag2Error, Net
from tests.ag2gateway.test_channels import TOKEN, _opened
from tests.eventually import assert_eventually


async def test_a_human_reattaches_through_a_new_gateway_and_gets_what_it_missed(net: Net) -> None:
    ag2 = net.ag2
    bob = await ag2("human", name="bob", token=TOKEN.format("bob"))
    alice = await ag2("human", name="alice", token=TOKEN.format("alice"), conn="alice")
    opened = await ag2("open", who="alice", type="conversation", targets=["bob"])
    await _opened(net, opened["channel_id"])
    first = await ag2("send", who="alice", channel_id=opened["channel_id"], text="one")

    async def bob_has(n: int) -> bool:
        got = [e for e in await ag2("received", who="bob") if e["event_type"] == "ag2.msg.text"]
        assert len(got) == n, got
        return True

    await assert_eventually(lambda: bob_has(1), timeout=15)
    await ag2("drop", conn="main")  # bob's connection goes away, then the gateway restarts
    await net.restart_gateway()
    await ag2("attach_human", conn="alice2", name="alice", token=TOKEN.format("alice"))
    await ag2("drop", conn="alice")
    second = await ag2("send", who="alice", channel_id=opened["channel_id"], text="two")

    again = await ag2("attach_human", conn="bob2", name="bob", token=TOKEN.format("bob"))
    assert again["agent_id"] == bob["agent_id"]

    async def replayed() -> bool:
        got = [e for e in await ag2("received", who="bob") if e["event_type"] == "ag2.msg.text"]
        # "one" was acked before the drop: the hub's cursor is past it, so only "two" comes again.
        assert [e["envelope_id"] for e in got] == [first["envelope_id"], second["envelope_id"]]
        return True

    await assert_eventually(replayed, timeout=15)
    assert alice["agent_id"] != bob["agent_id"]


async def test_a_wrong_api_key_does_not_attach(net: Net) -> None:
    ag2 = net.ag2
    await ag2("human", name="bob", token=TOKEN.format("bob"))
    with pytest.raises(Ag2Error, match="AuthError"):
        await ag2("attach_human", conn="thief", name="bob", token=TOKEN.format("not-bob"))
    with pytest.raises(Ag2Error, match="AuthError"):
        await ag2("human", name="carol", token="short", conn="c2")  # a token too short to derive a credential from


async def test_the_none_scheme_is_refused_unless_the_operator_allows_it(net: Net) -> None:
    with pytest.raises(Ag2Error, match=r"AuthError: .*allow-none-auth"):
        await net.ag2("human", name="dave", token=None)


async def test_a_bad_frame_gets_a_protocol_error_and_the_connection_stays_open(net: Net) -> None:
    answers = await net.ag2(
        "raw",
        frames=[
            "not json",
            json.dumps({"kind": "hello", "name": ["not", "a", "string"]}),
            json.dumps({"kind": "request", "request_id": "r1", "op": "no_such_op", "params": {}}),
            json.dumps({"kind": "request", "request_id": "r2", "op": "find_agent_id", "params": {"name": "nobody"}}),
        ],
    )
    assert [a["kind"] for a in answers] == ["error", "error", "response", "response"]
    assert answers[0]["code"] == answers[1]["code"] == "protocol_error"
    assert "name" in answers[1]["message"]
    assert (answers[2]["ok"], answers[2]["error_code"]) == (False, "protocol_error")
    assert "no_such_op" in answers[2]["error_message"]
    assert (answers[3]["ok"], answers[3]["result"]) == (True, None)


async def test_since_envelope_id_replays_only_above_it_and_none_replays_nothing(net: Net) -> None:
    ag2 = net.ag2
    await ag2("human", name="bob", token=TOKEN.format("bob"), conn="bob")
    await ag2("human", name="alice", token=TOKEN.format("alice"))
    opened = await ag2("open", who="alice", type="conversation", targets=["bob"])
    await _opened(net, opened["channel_id"])
    await ag2("drop", conn="bob")
    sent = [(await ag2("send", who="alice", channel_id=opened["channel_id"], text=t))["envelope_id"] for t in "abc"]

    async def bob_texts(n: int) -> list[str]:
        got = [e["envelope_id"] for e in await ag2("received", who="bob") if e["event_type"] == "ag2.msg.text"]
        assert len(got) == n, got
        return got

    before = len([e for e in await ag2("received", who="bob") if e["event_type"] == "ag2.msg.text"])
    await ag2("attach_human", conn="bob2", name="bob", token=TOKEN.format("bob"), since=sent[0])
    assert (await assert_eventually(lambda: bob_texts(before + 2), timeout=15))[before:] == sent[1:]
    await ag2("drop", conn="bob2")
    await ag2("send", who="alice", channel_id=opened["channel_id"], text="d")
    await ag2("attach_human", conn="bob3", name="bob", token=TOKEN.format("bob"), since=None)
    await ag2("rpc", name="find_agent_id", params={"name": "bob"}, conn="bob3")  # a round trip after the welcome
    assert len(await bob_texts(before + 2)) == before + 2  # None: nothing replayed, "d" stays unacked
    await ag2("drop", conn="bob3")
    await ag2("attach_human", conn="bob4", name="bob", token=TOKEN.format("bob"))
    got = await assert_eventually(lambda: bob_texts(before + 3), timeout=15)
    assert got[-1] > sent[-1]  # "d" only: "a" was acked for bob by the since of the first attach
