"""HubClient / Hub / HumanClient against a real hub."""

from __future__ import annotations

import asyncio
import logging
import signal
from pathlib import Path

import pytest

from agentsdk import errors
from agentsdk.network._cursors import JsonFileCursorStore
from agentsdk.network.clients import HumanClient
from agentsdk.network.hub_client import Hub, HubClient
from netkernel.envelope import EV_CHANNEL_CLOSED, EV_CHANNEL_INVITE, EV_CHANNEL_INVITE_ACK, EV_TEXT, Envelope
from netkernel.identity import Passport
from tests.eventually import assert_eventually
from tests.forwarder import TcpForwarder
from tests.procs import ROOT, start_service


def is_text(env: Envelope) -> bool:
    return env.event_type == EV_TEXT


async def test_consulting_between_two_humans_on_an_embedded_hub() -> None:
    async with Hub.open() as hub:
        user = await hub.register_human(Passport(name="user", kind="human"))
        analyst = await hub.register_human(Passport(name="analyst", kind="human"))
        ch = await user.open(type="consulting", target="analyst")
        assert ch.metadata.state == "opened" and ch.metadata.participant_ids == [user.agent_id, analyst.agent_id]
        question = await user.send(ch.channel_id, "What's our Q3 exposure?")
        got = await analyst.next_envelope(predicate=is_text, timeout=10)
        assert got.envelope_id == question.envelope_id and got.text == "What's our Q3 exposure?"
        await ch.client.hub.set_skill(user.agent_id, "# user\n")
        await analyst.send(ch.channel_id, "About 4%.", causation_id=got.envelope_id)
        answer = await user.next_envelope(predicate=is_text, timeout=10)
        assert answer.text == "About 4%." and answer.causation_id == question.envelope_id
        closed = await user.next_envelope(predicate=lambda e: e.event_type == EV_CHANNEL_CLOSED, timeout=10)
        assert closed.event_data["reason"] == "consulting_complete"
        with pytest.raises(errors.ProtocolError) as info:
            await analyst.send(ch.channel_id, "one more thing")
        assert f"channel '{ch.channel_id}' is closed" in str(info.value)
        humans = await hub.list_agents(kind="human")
        assert {a.name for a in humans} == {"user", "analyst"}
        wal = await hub.read_wal(ch.channel_id)
        assert [e.seq for e in wal] == sorted(e.seq for e in wal) and wal[-1].event_type == EV_CHANNEL_CLOSED
        assert hub.name_for(analyst.agent_id) == "analyst"


async def test_read_wal_uses_whichever_identity_of_the_client_participates() -> None:
    async with Hub.open() as hub:
        await hub.register_human(Passport(name="bystander", kind="human"))  # registered first, in no channel
        user = await hub.register_human(Passport(name="user", kind="human"))
        await hub.register_human(Passport(name="analyst", kind="human"))
        ch = await user.open(type="consulting", target="analyst")
        question = await user.send(ch.channel_id, "Who reads this?")
        wal = await hub.read_wal(ch.channel_id)
        assert question.envelope_id in [e.envelope_id for e in wal]


async def test_push_callbacks_compose_and_exceptions_do_not_propagate(caplog: pytest.LogCaptureFixture) -> None:
    async with Hub.open() as hub:
        a = await hub.register_human(Passport(name="a", kind="human"))
        seen: list[str] = []

        async def first(env: Envelope) -> None:
            seen.append(f"first:{env.event_type}")
            raise RuntimeError("boom")

        async def second(env: Envelope) -> None:
            seen.append(f"second:{env.event_type}")

        b = await hub.register_human(Passport(name="b", kind="human"), pull=True)  # push and pull
        b.on_envelope(first)
        b.on_envelope(second)
        ch = await a.open(type="conversation", target="b")
        await a.send(ch.channel_id, "hello")
        await b.next_envelope(predicate=is_text, timeout=10)
        assert seen[:2] == [f"first:{EV_CHANNEL_INVITE}", f"second:{EV_CHANNEL_INVITE}"]
        assert "first:ag2.msg.text" in seen and "second:ag2.msg.text" in seen
        assert any("boom" in r.getMessage() or r.exc_info for r in caplog.records if r.levelno >= logging.ERROR)
        b.remove_envelope_callback(first)
        seen.clear()
        await a.send(ch.channel_id, "again")
        await b.next_envelope(predicate=is_text, timeout=10)
        assert seen == ["second:ag2.msg.text"]


async def test_manual_invite_ack_and_streaming_iteration() -> None:
    async with Hub.open() as hub:
        a = await hub.register_human(Passport(name="a", kind="human"))
        b = await hub.register_human(Passport(name="b", kind="human"), auto_ack_invites=False)
        opening = asyncio.create_task(a.open(type="conversation", target="b"))
        invite = await b.next_envelope(predicate=lambda e: e.event_type == EV_CHANNEL_INVITE, timeout=10)
        assert not opening.done()
        await b.post_envelope(
            Envelope(
                channel_id=invite.channel_id,
                sender_id="",
                audience=None,
                event_type=EV_CHANNEL_INVITE_ACK,
                event_data={},
            )
        )
        ch = await asyncio.wait_for(opening, 10)
        for i in range(3):
            await a.send(ch.channel_id, f"m{i}")
        got: list[str] = []

        async def consume() -> None:
            async for env in b.envelopes():
                if env.event_type == EV_TEXT:
                    got.append(env.text)
                    if len(got) == 3:
                        await b.disconnect()

        await asyncio.wait_for(consume(), 10)
        assert got == ["m0", "m1", "m2"]
        with pytest.raises(errors.Timeout):
            await a.next_envelope(predicate=lambda e: e.event_type == "never", timeout=0.2)


async def test_stream_survives_a_hub_restart_and_resumes_without_repeats(tmp_path: Path) -> None:
    args = ["--db", str(tmp_path / "hub.db"), "--data-dir", str(tmp_path)]
    hub = start_service("hubsvc", args, cwd=ROOT)
    try:
        async with TcpForwarder() as address, HubClient.connect(address.target) as hc:
            address.point_to(hub.target)
            a = await hc.register_human(Passport(name="a", kind="human"))
            store = JsonFileCursorStore(tmp_path / "b.cursors.json")
            b = await hc.register_human(Passport(name="b", kind="human"), cursor_store=store)
            ch = await a.open(type="conversation", target="b")
            await a.send(ch.channel_id, "before")
            assert (await b.next_envelope(predicate=is_text, timeout=10)).text == "before"
            hub.terminate(signal.SIGKILL)
            address.point_to(None)  # refused while down, whoever takes the old port
            # The new hub binds a port of its own (0); the clients keep dialling the address the test holds.
            hub = start_service("hubsvc", args, cwd=ROOT)
            address.point_to(hub.target)

            async def sent_after_restart() -> Envelope:
                while True:
                    try:
                        return await a.send(ch.channel_id, "after restart")
                    except errors.Unavailable:
                        await asyncio.sleep(0.1)  # a retry poll while the clients reconnect

            await asyncio.wait_for(sent_after_restart(), 20)
            assert (await b.next_envelope(predicate=is_text, timeout=20)).text == "after restart"
            a_credential, b_credential = a.credential, b.credential
            await b.disconnect()
            await a.send(ch.channel_id, "while b is gone")
        async with HubClient.connect(hub.target) as hc2:
            b2 = await hc2.resume_human(b_credential, cursor_store=store)
            texts = [(await b2.next_envelope(predicate=is_text, timeout=10)).text]
            a2 = await hc2.resume_human(a_credential)
            await a2.send(ch.channel_id, "marker")  # delivered after any repeat would be
            while texts[-1] != "marker":
                texts.append((await b2.next_envelope(predicate=is_text, timeout=10)).text)
            assert texts == ["while b is gone", "marker"]
    finally:
        hub.terminate()


async def texts_left(client: HumanClient) -> list[str]:
    """Pull every text still queued (the queue is left empty)."""
    out = []
    while client.queued:
        env = await client.next_envelope(timeout=1)
        if env.event_type == EV_TEXT:
            out.append(env.text)
    return out


async def test_the_pull_queue_keeps_the_newest_envelopes_and_counts_what_it_dropped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with Hub.open() as hub:
        a = await hub.register_human(Passport(name="a", kind="human"))
        b = await hub.register_human(Passport(name="b", kind="human"), max_queued_envelopes=3)
        ch = await a.open(type="conversation", target="b")
        for i in range(6):
            await a.send(ch.channel_id, f"m{i}")
        # The queue holds [m3, m4, m5] once m5 arrived: everything before was dropped, oldest first.
        assert (await b.next_envelope(predicate=lambda e: is_text(e) and e.text == "m5", timeout=10)).text == "m5"
        assert await texts_left(b) == ["m3", "m4"]
        assert b.dropped >= 4  # the invite, m0, m1, m2 (and any lifecycle envelope)
        assert b.queued == 0 and b.queued_bytes == 0
        assert any("pull queue" in r.getMessage() and r.levelno == logging.WARNING for r in caplog.records)


async def test_the_pull_queue_is_bounded_in_bytes() -> None:
    async with Hub.open() as hub:
        a = await hub.register_human(Passport(name="a", kind="human"))
        b = await hub.register_human(Passport(name="b", kind="human"), max_queued_bytes=15_000)
        ch = await a.open(type="conversation", target="b")
        await a.send(ch.channel_id, "x" * 10_000)
        await a.send(ch.channel_id, "y" * 10_000)
        last = await b.next_envelope(predicate=lambda e: is_text(e) and e.text.startswith("y"), timeout=10)
        assert len(last.text) == 10_000
        assert await texts_left(b) == [] and b.dropped >= 1


async def test_a_client_with_a_push_callback_also_pulls_without_flags() -> None:
    # As in the seeds (and AG2): on_envelope and next_envelope on one client, no pull=True needed.
    async with Hub.open() as hub:
        a = await hub.register_human(Passport(name="a", kind="human"))
        b = await hub.register_human(Passport(name="b", kind="human"))
        pushed: list[str] = []

        async def record(env: Envelope) -> None:
            pushed.append(env.event_type)

        b.on_envelope(record)
        ch = await a.open(type="conversation", target="b")
        await a.send(ch.channel_id, "both ways")
        assert (await b.next_envelope(predicate=is_text, timeout=10)).text == "both ways"
        await assert_eventually(lambda: pushed.count(EV_TEXT) == 1)
        await a.send(ch.channel_id, "and streaming")
        async for env in b.envelopes():  # streaming works beside the callback too
            if is_text(env):
                assert env.text == "and streaming"
                break


async def test_a_push_only_client_that_never_pulls_stays_bounded_and_quiet(caplog: pytest.LogCaptureFixture) -> None:
    async with Hub.open() as hub:
        a = await hub.register_human(Passport(name="a", kind="human"))
        b = await hub.register_human(Passport(name="b", kind="human"), max_queued_envelopes=5)
        off = await hub.register_human(Passport(name="off", kind="human"), pull=False)
        pushed: list[str] = []
        pushed_off: list[str] = []
        b.on_envelope(lambda env: pushed.append(env.event_type))  # a plain function is a callback too
        off.on_envelope(lambda env: pushed_off.append(env.event_type))
        ch = await a.open(type="conversation", target="b")
        ch_off = await a.open(type="conversation", target="off")
        for i in range(20):
            await a.send(ch.channel_id, f"m{i}")
            await a.send(ch_off.channel_id, f"m{i}")
        await assert_eventually(lambda: pushed.count(EV_TEXT) == 20 and pushed_off.count(EV_TEXT) == 20)
        # It keeps only the newest envelopes, within its bounds, and drops older ones without a warning.
        assert b.queued == 5 and b.dropped > 0
        assert not any("pull queue" in r.getMessage() for r in caplog.records)
        assert (await b.next_envelope(predicate=is_text, timeout=1)).text == "m15"
        # pull=False keeps nothing at all; pulling from it is refused with what to do.
        assert off.queued == 0 and off.dropped == 0
        with pytest.raises(errors.FailedPrecondition, match="pull=False"):
            await off.next_envelope(timeout=1)


async def test_pull_queue_bounds_must_be_positive() -> None:
    async with Hub.open() as hub:
        with pytest.raises(errors.InvalidArgument, match="max_queued_envelopes"):
            await hub.register_human(Passport(name="a", kind="human"), max_queued_envelopes=0)
        with pytest.raises(errors.InvalidArgument, match="max_queued_bytes"):
            await hub.register_human(Passport(name="a", kind="human"), max_queued_bytes=0)
        assert hub._clients == {}  # nothing was registered


async def test_a_second_unregister_is_a_no_op(caplog: pytest.LogCaptureFixture) -> None:
    async with Hub.open() as hub:
        a = await hub.register_human(Passport(name="a", kind="human"))
        await hub.register_human(Passport(name="b", kind="human"))
        ch = await a.open(type="conversation", target="b")
        with caplog.at_level(logging.WARNING, logger="agentnet.sdk"):
            assert await a.unregister() == [ch.channel_id]
            assert await a.unregister() == []  # the identity is gone already: no error, as in AG2
        assert [agent.name for agent in await hub.list_agents()] == ["b"]
        # The stream's end the unregister brings (UNAUTHENTICATED, cause unregistered) is expected: no
        # reconnect, nothing in the log.
        assert [r.getMessage() for r in caplog.records if r.name.startswith("agentnet.sdk")] == []


def test_a_passport_kind_typo_fails_at_construction() -> None:
    with pytest.raises(ValueError, match=r"'agent', 'human', 'remote_agent'.*got 'humna'"):
        Passport(name="x", kind="humna")  # type: ignore[arg-type]
    assert Passport(name="x", kind="human").kind == "human" and Passport(name="y").kind is None
