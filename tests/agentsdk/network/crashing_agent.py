"""An agent process that answers one envelope and then hangs before acking it (the test kills it).

``python -m tests.agentsdk.network.crashing_agent HUB_TARGET LLM_BASE_URL CREDENTIAL_FILE``: registers
"worker" (saving its credential), prints ``READY``, answers the first substantive envelope
with the default handler, prints ``ANSWERED <envelope id>`` and never returns from the handler,
so the envelope is never acked: what a crash between a reply and its ack leaves behind.
"""

from __future__ import annotations

import asyncio
import sys

from agentsdk import Agent, OpenAIConfig
from agentsdk.network import EV_TEXT, Envelope, HubClient, Passport
from agentsdk.network.agent_client import AgentClient, default_handler


async def main(target: str, base_url: str, credential_file: str) -> None:
    """Register, answer once, hang."""
    async with HubClient.connect(target) as hc:
        client: AgentClient | None = None

        async def answer_then_hang(envelope: Envelope) -> None:
            assert client is not None
            await default_handler(envelope, client)
            if envelope.event_type == EV_TEXT:
                print(f"ANSWERED {envelope.envelope_id}", flush=True)
                await asyncio.Event().wait()  # killed here: the reply is in, the ack never goes out

        config = OpenAIConfig(model="scripted", base_url=base_url, api_key="test")
        client = await hc.register(
            Agent("worker", config=config),
            Passport(name="worker"),
            credential_file=credential_file,
            on_envelope=answer_then_hang,
        )
        print("READY", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
