"""``agentnet mcp --http``: the same identity over streamable HTTP, on loopback, driven by the ``mcp``
package's ``streamable_http_client`` (handshake protocol) and its ``Client`` (2026-07-28 protocol,
``subscriptions/listen``)."""

from __future__ import annotations

import asyncio
import ssl
import subprocess
from pathlib import Path

import httpx2
import pytest
from mcp import Client, ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.server.subscriptions import ResourceUpdated
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from agentsdk.network import Hub, Passport
from tests.agentsdk.mcp_server.conftest import AGENTNET, ANSWER, keeper, spawn_http
from tests.system.security.certs import write_bundle

MCP_TIMEOUT = httpx2.Timeout(30.0, read=300.0)
"""The timeouts the ``mcp`` client gives its own HTTP client (a tool call's answer streams back on the
POST's response, and may take longer than httpx's default 5 s of silence)."""


@pytest.mark.filterwarnings("ignore:resources/subscribe is removed")
async def test_a_host_asks_over_streamable_http_and_gets_updates(hub: Hub, tmp_path: Path) -> None:
    alice = await hub.register_human(Passport(name="alice", kind="human"))
    credential = str(tmp_path / "host.json")
    async with spawn_http(hub.target, "--credential-file", credential, "--register", "host") as url:
        assert url.startswith("http://127.0.0.1:") and url.endswith("/mcp")
        updates: asyncio.Queue[str] = asyncio.Queue()
        async with (
            streamable_http_client(url) as (read, write),
            ClientSession(read, write, message_handler=keeper(updates)) as session,
        ):
            await session.initialize()
            assert "ask" in {t.name for t in (await session.list_tools()).tools}
            answer = await session.call_tool("ask", {"agent": "oracle", "question": "What is the answer?"})
            assert not answer.is_error and answer.content[0].text == ANSWER

            await session.subscribe_resource("agentnet://channels")
            await alice.open(type="conversation", target="host")
            assert await asyncio.wait_for(updates.get(), 30) == "agentnet://channels"


async def test_a_2026_host_listens_for_updates(hub: Hub, tmp_path: Path) -> None:
    alice = await hub.register_human(Passport(name="alice", kind="human"))
    credential = str(tmp_path / "host.json")
    async with (
        spawn_http(hub.target, "--credential-file", credential, "--register", "host") as url,
        Client(url) as client,
    ):
        assert client.protocol_version in MODERN_PROTOCOL_VERSIONS  # the client's own choice, not a handshake
        channel = await alice.open(type="conversation", target="host")
        uri = f"agentnet://channels/{channel.channel_id}/transcript"
        async with client.listen(resource_subscriptions=[uri]) as updates:
            await alice.send(channel.channel_id, "Hello over HTTP.")
            event = await asyncio.wait_for(anext(aiter(updates)), 30)
            assert event == ResourceUpdated(uri)
        read = await client.read_resource(uri)
        assert "Hello over HTTP." in read.contents[0].text  # type: ignore[union-attr]


async def test_the_http_endpoint_wants_its_bearer_token(hub: Hub, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    args = ["--credential-file", str(tmp_path / "host.json"), "--register", "host", "--http-token-file", str(token)]
    async with spawn_http(hub.target, *args) as url:
        async with httpx2.AsyncClient() as http:
            refused = await http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
        assert refused.status_code == 401
        headers = {"Authorization": "Bearer s3cret"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=MCP_TIMEOUT) as http,
            streamable_http_client(url, http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            peers = await session.call_tool("peers", {"action": "find"})
            assert "oracle" in peers.content[0].text


def test_a_non_loopback_address_needs_https_and_a_token(tmp_path: Path) -> None:
    run = subprocess.run(
        [AGENTNET, "mcp", "--credential-file", str(tmp_path / "c.json"), "--register", "x", "--http", "0",
         "--http-host", "0.0.0.0"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert run.returncode == 2
    assert "'0.0.0.0' is not a loopback address" in run.stderr
    assert not (tmp_path / "c.json").exists()  # refused before anything was registered


async def test_with_https_and_a_token_it_may_listen_beyond_loopback(hub: Hub, tmp_path: Path) -> None:
    certs = write_bundle(tmp_path / "certs")
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    args = [
        "--credential-file", str(tmp_path / "host.json"), "--register", "host", "--http-host", "0.0.0.0",
        "--http-cert", str(certs.server_cert), "--http-key", str(certs.server_key), "--http-token-file", str(token),
    ]  # fmt: skip
    async with spawn_http(hub.target, *args) as url:
        assert url.startswith("https://0.0.0.0:")
        local = url.replace("0.0.0.0", "127.0.0.1")
        trust = ssl.create_default_context(cafile=str(certs.ca_cert))
        async with (
            httpx2.AsyncClient(headers={"Authorization": "Bearer s3cret"}, verify=trust, timeout=MCP_TIMEOUT) as http,
            streamable_http_client(local, http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            answer = await session.call_tool("ask", {"agent": "oracle", "question": "Over TLS?"})
            assert answer.content[0].text == ANSWER
