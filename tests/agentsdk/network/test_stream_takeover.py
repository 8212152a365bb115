"""One stream per identity in the SDK, and resuming pending turns after a reconnect (docs/network.md
"Two clients of one identity", "Pending turns")."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agentsdk import Agent
from agentsdk.errors import Superseded, Unavailable
from agentsdk.network import (
    EV_CHANNEL_CLOSED,
    EV_TEXT,
    AgentClient,
    Envelope,
    Hub,
    HubClient,
    Passport,
    default_handler,
)
from agentsdk.network._cursors import JsonFileCursorStore
from agentsdk.testing import ScriptedOpenAIServer
from tests.agentsdk.network.llm import llm
from tests.eventually import assert_eventually


def is_text(env: Envelope) -> bool:
    return env.event_type == EV_TEXT


async def test_the_older_client_stops_and_does_not_steal_the_stream_back(hub: Hub) -> None:
    alice = await hub.register_human(Passport(name="alice", kind="human"))
    bob = await hub.register_human(Passport(name="bob", kind="human"))
    ch = await alice.open(type="conversation", target="bob")
    async with HubClient.connect(hub.target) as other:
        newer = await other.resume_human(bob.credential)  # bob again, e.g. a second process

        def older_superseded() -> bool:
            assert isinstance(bob.stream_error, Superseded), (
                f"older: {bob.stream_error!r}, newer: {newer.stream_error!r}, "
                f"hub holder: {hub.core.sessions._sessions.get(bob.agent_id)!r}"
            )
            return True

        await assert_eventually(older_superseded)
        error = bob.stream_error
        assert error is not None and error.metadata["cause"] == "replaced"
        with pytest.raises(Superseded):  # the older client says why it gets nothing more
            await bob.next_envelope(predicate=is_text, timeout=5)
        assert newer.stream_error is None
        # The newer client keeps the stream: everything posted from here reaches it, and the hub's
        # holder of bob's stream stays the newer one (the older never reconnected to take it back).
        holder = hub.core.sessions._sessions[bob.agent_id].session_id
        for i in range(5):
            await alice.send(ch.channel_id, f"m{i}")
        got = [await newer.next_envelope(predicate=is_text, timeout=10) for _ in range(5)]
        assert [e.text for e in got] == [f"m{i}" for i in range(5)]
        assert hub.core.sessions._sessions[bob.agent_id].session_id == holder
        assert newer.stream_error is None
        await newer.disconnect()


async def test_a_returning_agent_answers_its_pending_turn_once(
    hub: Hub, servers: list[ScriptedOpenAIServer], tmp_path: Path
) -> None:
    server, config = llm(servers, "Four.")
    seen: list[Envelope] = []

    clients: list[AgentClient] = []

    async def crashed_before_answering(env: Envelope) -> None:
        if env.event_type != EV_TEXT:
            await default_handler(env, clients[0])  # answers the invite
            return
        seen.append(env)  # handled (and acked) without an answer: its model call failed, say

    user = await hub.register_human(Passport(name="user", kind="human"))
    first = await hub.register(
        Agent("analyst", prompt="Answer briefly.", config=config),
        Passport(name="analyst"),
        on_envelope=crashed_before_answering,
    )
    clients.append(first)
    ch = await user.open(type="consulting", target="analyst")
    question = await user.send(ch.channel_id, "What is 2 + 2?")
    await assert_eventually(lambda: any(e.envelope_id == question.envelope_id for e in seen))
    credential = first.credential

    async def acked() -> bool:  # the question was acked: it is not replayed, only listed as pending
        return (await hub.core.store.load_cursors(first.agent_id)).get(ch.channel_id, 0) >= question.seq

    await assert_eventually(acked)
    await first.disconnect()

    async with HubClient.connect(hub.target) as restarted:
        again = await restarted.resume_agent(Agent("analyst", prompt="Answer briefly.", config=config), credential)
        assert [(t.channel_id, t.triggering_envelope_id) for t in again.pending_turns] == [
            (ch.channel_id, question.envelope_id)
        ]
        reply = await user.next_envelope(predicate=is_text, timeout=20)
        assert reply.text == "Four." and reply.causation_id == question.envelope_id
        await user.next_envelope(predicate=lambda e: e.event_type == EV_CHANNEL_CLOSED, timeout=10)
        assert len(server.requests) == 1  # answered once
        await again.disconnect()


async def test_a_pending_turn_that_is_also_replayed_is_answered_once(
    hub: Hub, servers: list[ScriptedOpenAIServer], tmp_path: Path
) -> None:
    server, config = llm(servers, "Four.", "Four, again (a duplicate).")
    hanging = asyncio.Event()

    clients: list[AgentClient] = []

    async def never_finishes(env: Envelope) -> None:
        if env.event_type != EV_TEXT:
            await default_handler(env, clients[0])
            return
        hanging.set()
        await asyncio.Event().wait()  # the turn never ends: it is not acked

    user = await hub.register_human(Passport(name="user", kind="human"))
    first = await hub.register(
        Agent("analyst", prompt="Answer briefly.", config=config), Passport(name="analyst"), on_envelope=never_finishes
    )
    clients.append(first)
    ch = await user.open(type="consulting", target="analyst")
    question = await user.send(ch.channel_id, "What is 2 + 2?")
    await asyncio.wait_for(hanging.wait(), 10)
    credential = first.credential
    await first.disconnect()

    async with HubClient.connect(hub.target) as restarted:
        again = await restarted.resume_agent(Agent("analyst", prompt="Answer briefly.", config=config), credential)
        # Listed as pending and replayed (it was never acked): the handler runs it once.
        assert [t.triggering_envelope_id for t in again.pending_turns] == [question.envelope_id]
        reply = await user.next_envelope(predicate=is_text, timeout=20)
        assert reply.causation_id == question.envelope_id
        await user.next_envelope(predicate=lambda e: e.event_type == EV_CHANNEL_CLOSED, timeout=10)
        assert len(server.requests) == 1
        await again.disconnect()


async def test_the_same_client_reconnecting_does_not_run_a_turn_twice(
    hub: Hub, servers: list[ScriptedOpenAIServer], tmp_path: Path
) -> None:
    _, config = llm(servers)
    seen: list[str] = []

    clients: list[AgentClient] = []

    async def records(env: Envelope) -> None:
        if env.event_type != EV_TEXT:
            await default_handler(env, clients[0])
            return
        seen.append(env.envelope_id)

    user = await hub.register_human(Passport(name="user", kind="human"))
    store = JsonFileCursorStore(f"{tmp_path}/cursors.json")
    agent = await hub.register(
        Agent("analyst", prompt="-", config=config), Passport(name="analyst"), on_envelope=records, cursor_store=store
    )
    clients.append(agent)
    ch = await user.open(type="consulting", target="analyst")
    question = await user.send(ch.channel_id, "Are you there?")
    await assert_eventually(lambda: seen == [question.envelope_id])
    stream = agent._stream
    assert stream is not None
    # The stream breaks (a hub restart, the network): the client reconnects by itself.
    hub.core.sessions.close_all(Unavailable("the hub restarts"))
    await assert_eventually(lambda: not stream.connected.is_set() or stream.pending_turns == [])
    await assert_eventually(
        lambda: stream.connected.is_set() and [t.envelope_id for t in stream.pending_turns] == [question.envelope_id]
    )
    # Listed again as pending, but this process handled it already: nothing is read back or run again.
    assert not stream._fetches
    assert seen == [question.envelope_id]
    await agent.disconnect()


async def test_resume_pending_turns_runs_again_a_turn_whose_handler_failed(
    hub: Hub, servers: list[ScriptedOpenAIServer]
) -> None:
    server, config = llm(servers, "Four.")
    attempts: list[str] = []
    clients: list[AgentClient] = []

    async def fails_once(env: Envelope) -> None:
        if env.event_type == EV_TEXT:
            attempts.append(env.envelope_id)
            if len(attempts) == 1:
                raise RuntimeError("the model endpoint is down")
        await default_handler(env, clients[0])

    user = await hub.register_human(Passport(name="user", kind="human"))
    agent = await hub.register(
        Agent("analyst", prompt="Answer briefly.", config=config), Passport(name="analyst"), on_envelope=fails_once
    )
    clients.append(agent)
    # The failed turn is reported; "notify" keeps the consulting channel open for the retry (the
    # default, "close", would end it with turn_failed: docs/hub.md "Failed turns").
    ch = await user.open(type="consulting", target="analyst", knobs={"on_turn_failed": "notify"})
    question = await user.send(ch.channel_id, "What is 2 + 2?")
    await assert_eventually(lambda: attempts == [question.envelope_id])
    stream = agent._stream
    assert stream is not None
    await assert_eventually(lambda: stream.cursors.cursor(ch.channel_id) >= question.seq)  # handled, acked
    assert await agent.resume_pending_turns() == 1  # the hub still awaits the answer: run it again
    reply = await user.next_envelope(predicate=is_text, timeout=20)
    assert reply.text == "Four." and reply.causation_id == question.envelope_id
    assert attempts == [question.envelope_id] * 2 and len(server.requests) == 1
    await user.next_envelope(predicate=lambda e: e.event_type == EV_CHANNEL_CLOSED, timeout=10)
    assert await agent.resume_pending_turns() == 0  # answered: nothing is pending
    await agent.disconnect()


async def test_a_handler_finishing_while_a_pending_turns_listing_is_in_flight_is_not_run_again(
    hub: Hub, servers: list[ScriptedOpenAIServer]
) -> None:
    """A listing begun before a handler finished may still show its turn pending (the hub read it
    then): resuming from that listing must not run the handler again. Only a listing begun after
    the finish may (docs/network.md "Pending turns")."""
    _, config = llm(servers)
    started: list[str] = []
    finished: list[str] = []
    release = asyncio.Event()
    clients: list[AgentClient] = []

    async def slow(env: Envelope) -> None:
        if env.event_type != EV_TEXT:
            await default_handler(env, clients[0])
            return
        started.append(env.envelope_id)
        await release.wait()
        finished.append(env.envelope_id)  # and no answer: the hub keeps awaiting it

    user = await hub.register_human(Passport(name="user", kind="human"))
    agent = await hub.register(Agent("analyst", prompt="-", config=config), Passport(name="analyst"), on_envelope=slow)
    clients.append(agent)
    ch = await user.open(type="consulting", target="analyst", knobs={"on_turn_failed": "notify"})
    question = await user.send(ch.channel_id, "Are you there?")
    await assert_eventually(lambda: started == [question.envelope_id])
    stream = agent._stream
    assert stream is not None

    listing_task = asyncio.create_task(stream.list_pending_turns())
    await asyncio.sleep(0)  # the listing has begun (its request is on its way)
    release.set()  # the handler finishes while the listing is in flight
    await assert_eventually(lambda: finished == [question.envelope_id])
    await assert_eventually(lambda: stream.cursors.cursor(ch.channel_id) >= question.seq)
    turns, listing = await listing_task
    assert [t.envelope_id for t in turns] == [question.envelope_id]  # the hub still awaits it...
    assert stream.resume(turns, stream.cursors.snapshot(), rerun_before=listing) == 0  # ...but not again
    assert not stream._fetches and started == [question.envelope_id]  # nothing read back to run

    # A listing begun after the handler finished does run it again (it finished without answering).
    assert await agent.resume_pending_turns() == 1
    await assert_eventually(lambda: started == [question.envelope_id] * 2)
    await agent.disconnect()
