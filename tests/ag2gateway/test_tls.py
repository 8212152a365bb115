"""wss:// for AG2 clients with the same --tls-cert / --tls-key flags as the hub's."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from ag2gateway.server import start_gateway
from servicekit.tls import ServerTls
from tests.ag2gateway.conftest import Net
from tests.ag2gateway.test_channels import TOKEN
from tests.system.security.certs import write_bundle


async def test_ag2_clients_register_over_wss(net: Net, tmp_path: Path) -> None:
    bundle = write_bundle(tmp_path / "tls")
    secure = await start_gateway(
        replace(net.options, tls=ServerTls(bundle.server_cert, bundle.server_key)), net.hub_channel
    )
    try:
        assert secure.url.startswith("wss://127.0.0.1:")
        await net.ag2("url", url=secure.url, ca=str(bundle.ca_cert))
        bob = await net.ag2("human", name="bob", token=TOKEN.format("bob"))
        assert await net.ag2("rpc", name="find_agent_id", params={"name": "bob"}) == bob["agent_id"]
    finally:
        await secure.stop()
