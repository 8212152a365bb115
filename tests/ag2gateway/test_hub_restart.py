"""Nothing is lost across a hub restart: the gateway's hub streams come back and resume from the cursors."""

from __future__ import annotations

import signal
import socket
from contextlib import AsyncExitStack
from pathlib import Path

from ag2gateway.config import Ag2GatewayOptions
from ag2gateway.server import start_gateway
from agentsdk.network import EV_TEXT, Hub, HubClient, Passport
from hubsvc.storage import SqliteHubStore
from localprocs.procs import start_service
from tests.ag2gateway.conftest import start_driver
from tests.ag2gateway.test_channels import TOKEN
from tests.eventually import assert_eventually
from tests.procs import ROOT


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_an_ag2_human_keeps_receiving_after_the_hub_restarts(tmp_path: Path) -> None:
    port, db = free_port(), tmp_path / "hub.db"
    async with Hub.open(path=db, port=port) as hub:
        gateway = await start_gateway(Ag2GatewayOptions(port=0, hub=hub.target, secret_file=tmp_path / "s"))
        ag2 = await start_driver()
        try:
            await ag2("url", url=gateway.url)
            bob = await ag2("human", name="bob", token=TOKEN.format("bob"))
            alice = await hub.register_human(Passport(name="alice", kind="human"))
            channel = await alice.open(type="conversation", target="bob")
            credential = alice.credential

            async def opened() -> bool:
                meta, _state, _tools = await alice.channel_info(channel.channel_id)
                assert meta.state == "opened"
                return True

            await assert_eventually(opened, timeout=15)
            await alice.send(channel.channel_id, "before")

            async def bob_has(texts: list[str]) -> bool:
                got = [
                    e["event_data"]["text"]
                    for e in await ag2("received", who="bob")
                    if e["event_type"] == "ag2.msg.text"
                ]
                assert got == texts
                return True

            await assert_eventually(lambda: bob_has(["before"]), timeout=15)
        except BaseException:
            await ag2.stop()
            await gateway.stop()
            raise
    async with Hub.open(path=db, port=port) as hub:  # the same store and address: a restarted hub
        try:
            alice = await hub.resume_human(credential)
            await alice.send(channel.channel_id, "after")
            await assert_eventually(lambda: bob_has(["before", "after"]), timeout=30)
            assert bob["agent_id"] in (await alice.channel_info(channel.channel_id))[0].participant_ids
        finally:
            await ag2.stop()
            await gateway.stop()


async def test_an_envelope_replayed_after_a_hub_crash_reaches_the_ag2_client_once(tmp_path: Path) -> None:
    """A hub killed before it stored the gateway's ack replays the envelope on the new stream (its cursor
    is behind): the gateway does not send the client what it sent on this attach already, and acks it
    again, so the restarted hub's cursor passes it."""
    port = free_port()
    args = ["--db", str(tmp_path / "hub.db"), "--data-dir", str(tmp_path), "--cursor-flush-interval", "60"]
    hub = start_service("hubsvc", args, cwd=ROOT, port=port)
    stack = AsyncExitStack()
    stack.callback(lambda: hub.terminate())  # the hub of the moment, also when what follows fails to start
    gateway = await start_gateway(Ag2GatewayOptions(port=0, hub=hub.target, secret_file=tmp_path / "s"))
    stack.push_async_callback(gateway.stop)
    ag2 = await start_driver()
    stack.push_async_callback(ag2.stop)
    async with stack:
        await ag2("url", url=gateway.url)
        bob = await ag2("human", name="bob", token=TOKEN.format("bob"))

        async def bob_has(texts: list[str]) -> bool:
            got = [e["event_data"]["text"] for e in await ag2("received", who="bob") if e["event_type"] == EV_TEXT]
            assert got == texts
            return True

        async with HubClient.connect(hub.target) as client:
            alice = await client.register_human(Passport(name="alice", kind="human"))
            channel = await alice.open(type="conversation", target="bob")
            await assert_eventually(lambda: bob_has([]), timeout=15)
            await alice.send(channel.channel_id, "before")
            await assert_eventually(lambda: bob_has(["before"]), timeout=15)
            credential = alice.credential
        hub.terminate(signal.SIGKILL)  # no cursor of bob's stored yet (the next flush was a minute away)
        hub = start_service("hubsvc", args, cwd=ROOT, port=port)
        async with HubClient.connect(hub.target) as client:
            alice = await client.resume_human(credential)
            after = await alice.send(channel.channel_id, "after")
            await assert_eventually(lambda: bob_has(["before", "after"]), timeout=30)

            def acks_handed_to_the_hub() -> bool:
                """Bob's client receipted "after" and the gateway holds no ack back for a post to carry."""
                bound = next(c.bound[bob["agent_id"]] for c in gateway.connections if bob["agent_id"] in c.bound)
                assert bound.receipted.get(channel.channel_id, 0) >= after.seq
                assert bound.stream.acks_pending == 0
                return True

            await assert_eventually(acks_handed_to_the_hub)
            # Handed to the stream is not yet read by the hub: bob's answer goes over the same stream behind
            # the ack, so once the hub has answered it, it has read the ack too.
            await ag2("send", who="bob", channel_id=channel.channel_id, text="thanks")
        hub.terminate()  # a clean stop stores the cursors: bob's passed both texts (the replay was acked again)
        store = SqliteHubStore(tmp_path / "hub.db")
        await store.open()
        try:
            assert (await store.load_cursors(bob["agent_id"]))[channel.channel_id] >= after.seq
        finally:
            await store.close()
