"""Drives unmodified AG2 1.2.1 clients (``ag2.network.HubClient(WsLink(url))``) for the gateway tests.

Runs in the separate ``.venv-ag2`` (the released ``ag2==1.2.1`` with ``websockets``), never in ours:
reads one JSON command per stdin line, answers one JSON line on stdout ({"ok": true, ...} or
{"ok": false, "error": "<class>: <message>"}). Agents answer with AG2's own scripted model
(``ag2.testing.TestConfig``); humans are ``HubClient.register_human`` participants.
"""

import asyncio
import dataclasses
import json
import ssl
import sys
import traceback
from typing import Any

from ag2 import Agent
from ag2.network import EV_TEXT, AuthBlock, Envelope, HubClient, Passport, Resume, Rule
from ag2.network.transport import WsLink
from ag2.testing import TestConfig

state: dict[str, Any] = {"hubs": {}, "clients": {}, "received": {}}


def _passport(name: str, token: str | None, kind: str | None = None) -> Passport:
    auth = AuthBlock(scheme="api_key", claim={"token": token}) if token is not None else AuthBlock()
    return Passport(name=name, auth=auth, kind=kind)


def _rule(cmd: dict[str, Any]) -> Rule | None:
    return Rule.from_dict(cmd["rule"]) if cmd.get("rule") is not None else None


def _record(name: str):
    async def callback(envelope: Any) -> None:
        state["received"].setdefault(name, []).append(envelope.to_dict())

    return callback


class _RecordOnFiling(dict):
    """``HubClient._clients`` that gives each client filed in it a recorder for ``name``."""

    def __init__(self, clients: dict[str, Any], name: str) -> None:
        super().__init__(clients)
        self.name = name

    def __setitem__(self, agent_id: str, client: Any) -> None:
        client.on_envelope(_record(self.name))
        super().__setitem__(agent_id, client)


async def _hub(conn: str, url: str | None = None) -> HubClient:
    if conn not in state["hubs"]:
        ssl_context = ssl.create_default_context(cafile=state["ca"]) if state.get("ca") else None
        state["hubs"][conn] = await HubClient(WsLink(url or state["url"], ssl_context=ssl_context)).open()
    return state["hubs"][conn]


async def run(cmd: dict[str, Any]) -> Any:
    op = cmd["op"]
    if op == "url":
        state["url"] = cmd["url"]
        state["ca"] = cmd.get("ca")  # wss://: the CA the gateway's certificate chains to
        return None
    if op == "agent":
        hub = await _hub(cmd.get("conn", "main"))
        agent = Agent(cmd["name"], config=TestConfig(*cmd.get("replies", [])))
        client = await hub.register(
            agent,
            _passport(cmd["name"], cmd.get("token")),
            Resume(summary=cmd.get("summary", ""), claimed_capabilities=cmd.get("capabilities", [])),
            rule=_rule(cmd),
        )
        original = client._on_envelope

        async def watch(envelope: Any) -> None:
            await _record(cmd["name"])(envelope)
            await original(envelope)

        client.on_envelope(watch)
        state["clients"][cmd["name"]] = client
        return {"agent_id": client.agent_id, "passport": client.passport.to_dict()}
    if op == "human":
        hub = await _hub(cmd.get("conn", "main"))
        human = await hub.register_human(
            _passport(cmd["name"], cmd.get("token"), "human"),
            rule=_rule(cmd),
            auto_ack_invites=cmd.get("auto_ack", True),
        )
        human.on_envelope(_record(cmd["name"]))
        state["clients"][cmd["name"]] = human
        return {"agent_id": human.agent_id}
    if op == "attach_human":
        hub = await _hub(cmd["conn"], cmd.get("url"))
        # AG2's attach() files the new client in ``hub._clients`` before its handshake, and the
        # replay starts right after the Welcome frame: a callback set after attach() returns can
        # miss a replayed envelope. Install the recorder the moment the client is filed.
        hub._clients = _RecordOnFiling(hub._clients, cmd["name"])
        try:
            client = await hub.attach(
                Agent(cmd["name"], config=TestConfig()),
                cmd["name"],
                passport=_passport(cmd["name"], cmd.get("token")),
                since_envelope_id=cmd.get("since", ""),
                attach_plugin=False,
            )
        finally:
            hub._clients = dict(hub._clients)
        state["clients"][cmd["name"]] = client
        return {"agent_id": client.agent_id}
    if op == "attach_agent":  # AG2's reconnect by name: attach(), then (optionally) resume_pending_turns()
        hub = await _hub(cmd["conn"], cmd.get("url"))
        client = await hub.attach(
            Agent(cmd["name"], config=TestConfig(*cmd.get("replies", []))),
            cmd["name"],
            passport=_passport(cmd["name"], cmd.get("token")),
            since_envelope_id=cmd.get("since", ""),
        )
        state["clients"][cmd["name"]] = client
        resumed = await client.resume_pending_turns() if cmd.get("resume") else None
        return {"agent_id": client.agent_id, "resumed": resumed}
    if op == "open":
        client = state["clients"][cmd["who"]]
        channel = await client.open(type=cmd["type"], target=cmd["targets"], knobs=cmd.get("knobs"))
        return {"channel_id": channel.channel_id, "metadata": channel.metadata.to_dict()}
    if op == "send":
        client = state["clients"][cmd["who"]]
        if hasattr(client, "send"):
            return {"envelope_id": await client.send(cmd["channel_id"], cmd["text"])}
        envelope = Envelope(
            channel_id=cmd["channel_id"],
            sender_id="",
            audience=None,
            event_type=EV_TEXT,
            event_data={"text": cmd["text"]},
        )
        return {"envelope_id": await client.send_envelope(envelope)}
    if op == "open_send":  # open, then at once every text in flight together (AG2 code that sends right after open())
        client = state["clients"][cmd["who"]]
        channel = await client.open(type=cmd["type"], target=cmd["targets"], knobs=cmd.get("knobs"))
        sent = await asyncio.gather(*(channel.send(text) for text in cmd["texts"]))
        return {"channel_id": channel.channel_id, "state": channel.metadata.state.value, "envelope_ids": list(sent)}
    if op == "open_many":  # `count` opens at once (AG2 code gathering open() calls), their states
        client = state["clients"][cmd["who"]]
        opens = [client.open(type=cmd["type"], target=cmd["targets"]) for _ in range(cmd["count"])]
        return [channel.metadata.state.value for channel in await asyncio.gather(*opens)]
    if op == "set_rule":
        hub = await _hub(cmd.get("conn", "main"))
        await hub.set_rule(state["clients"][cmd["who"]].agent_id, Rule.from_dict(cmd["rule"]))
        return None
    if op == "send_many":  # every text posted at once (requests in flight together), ids in the order given
        client = state["clients"][cmd["who"]]
        return list(await asyncio.gather(*(client.send(cmd["channel_id"], text) for text in cmd["texts"])))
    if op == "received":
        return state["received"].get(cmd["who"], [])
    if op == "rpc":
        hub = await _hub(cmd.get("conn", "main"))
        return await hub._rpc(cmd["name"], cmd.get("params", {}))
    if op == "call":
        hub = await _hub(cmd.get("conn", "main"))
        result = await getattr(hub, cmd["name"])(*cmd.get("args", []), **cmd.get("kwargs", {}))
        if isinstance(result, list):
            return [_plain(r) for r in result]
        return _plain(result)
    if op == "raw":
        # A hand-made frame on a fresh WebSocket: what the gateway answers, and whether it stays open.
        from websockets.asyncio.client import connect
        from websockets.exceptions import ConnectionClosed

        async with connect(state["url"], max_size=None) as ws:
            answers = []
            for frame in cmd["frames"]:
                try:
                    await ws.send(frame)
                    answers.append(json.loads(await asyncio.wait_for(ws.recv(), 10)))
                except ConnectionClosed as closed:
                    answers.append({"closed": closed.rcvd.code if closed.rcvd else None})
                    break
            return answers
    if op == "close":
        for hub in state["hubs"].values():
            await hub.close()
        state["hubs"].clear()
        return None
    if op == "drop":
        hub = state["hubs"].pop(cmd["conn"])
        await hub.close()
        return None
    raise ValueError(f"unknown op {op!r}")


def _plain(value: Any) -> Any:
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return value


async def main() -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while True:
        line = await reader.readline()
        if not line:
            return
        cmd = json.loads(line)
        try:
            out = {"ok": True, "result": await run(cmd)}
        except Exception as exc:
            traceback.print_exc(file=sys.stderr)
            out = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        sys.stdout.write(json.dumps(out, default=str) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    asyncio.run(main())
