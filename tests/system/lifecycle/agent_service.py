"""An agent service for the restart tests: ``python agent_service.py <hub> <credential_file> <log> [--a2a]``.

It registers (or, when the credential file exists, resumes) the agent "svc", accepts invites, answers every text
with "echo: <text>", appends each text it handled to ``<log>`` (one line each), prints
``ready <json>`` and serves until SIGTERM / SIGINT, then disconnects cleanly.
``--unregister`` resumes the identity and retires it instead.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys

from agentsdk import Agent, OpenAIConfig
from agentsdk.a2a import A2ASettings
from agentsdk.network import EV_CHANNEL_INVITE, EV_TEXT, Envelope, HubClient, stop_signal


def handled(log_path: str, text: str) -> None:
    """Append ``text`` to the log, on disk before the handler returns."""
    with open(log_path, "a", encoding="utf-8") as log:
        log.write(text + "\n")
        log.flush()
        os.fsync(log.fileno())


async def main(target: str, credential_file: str, log_path: str, flags: list[str]) -> None:
    """Serve "svc" until a stop signal."""
    # The handler below never asks the model; the config only satisfies Agent.
    agent = Agent("svc", config=OpenAIConfig(model="unused", base_url="http://127.0.0.1:9", api_key="unused"))
    a2a = A2ASettings(enabled=True, skills=["echo"]) if "--a2a" in flags else None
    async with HubClient.connect(target) as hub:

        async def echo(envelope: Envelope) -> None:
            if envelope.event_type == EV_CHANNEL_INVITE:
                await agent.network.ack_invite(envelope.channel_id)
                return
            if envelope.event_type != EV_TEXT or envelope.sender_id == agent.network.agent_id:
                return
            handled(log_path, envelope.text)
            await agent.network.send(envelope.channel_id, f"echo: {envelope.text}")

        # The handler is passed to register: a resumed identity's backlog arrives as soon as it connects.
        client = await hub.register(
            agent, a2a=a2a, credential_file=credential_file, attach_plugin=False, on_envelope=echo
        )
        if "--unregister" in flags:
            await client.unregister()
            print("unregistered", flush=True)
            return
        stopped = stop_signal()  # before "ready": a signal right after it must be caught
        ready = {"agent_id": client.agent_id, "a2a": client.a2a_settings.model_dump()}
        print("ready " + json.dumps(ready), flush=True)
        await stopped
    print("stopped", flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]))
