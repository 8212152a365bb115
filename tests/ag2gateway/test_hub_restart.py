"""Nothing is lost across a hub restart: the gateway's hub streams come back and resume from the cursors."""

from __future__ import annotations

import socket
from pathlib import Path

from ag2gateway.config import Ag2GatewayOptions
from ag2gateway.server import start_gateway
from agentsdk.network import Hub, Passport
from tests.ag2gateway.conftest import start_driver
from tests.ag2gateway.test_channels import TOKEN
from tests.eventually import assert_eventually


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
