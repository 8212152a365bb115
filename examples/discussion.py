"""Three agents discuss a topic, one round each, in a discussion channel opened from Python.

A person (``moderator``) opens a ``discussion`` with two LLM agents and one round
(``knobs={"max_rounds": 1}``: every participant speaks once, in participant order, the
moderator first), posts the topic, and prints every turn until the hub closes the channel
with ``max_turns``. A misspelled knob (``rounds``) is refused first, to show the error.

    python examples/discussion.py "Tabs or spaces?"
    python examples/discussion.py --hub 127.0.0.1:50051 "Tabs or spaces?"   # against `make serve`

Model: by default a scripted model per agent (no network); set ``OPENAI_BASE_URL`` (and
``OPENAI_API_KEY``, ``OPENAI_MODEL``) to use an OpenAI-compatible endpoint instead.
Without ``--hub`` an embedded hub is started in this process (``Hub.open()``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

from agentsdk import Agent, OpenAIConfig, ScriptedConfig
from agentsdk.config import ModelConfig
from agentsdk.errors import InvalidArgument
from agentsdk.network import EV_CHANNEL_CLOSED, EV_TEXT, Hub, HubClient, Passport


def model_for(name: str, stance: str) -> ModelConfig:
    """``OpenAIConfig`` when ``OPENAI_BASE_URL`` is set, else a scripted model stating ``stance``."""
    base_url = os.environ.get("OPENAI_BASE_URL")
    if base_url:
        return OpenAIConfig(
            model=os.environ.get("OPENAI_MODEL", "gpt-4o-mini"),
            base_url=base_url,
            api_key=os.environ.get("OPENAI_API_KEY") or "unused",
        )
    return ScriptedConfig([f"{name}: {stance}"])


@asynccontextmanager
async def connect(target: str | None) -> AsyncIterator[HubClient]:
    """The hub at ``target``, or an embedded one."""
    if target:
        async with HubClient.connect(target) as hc:
            yield hc
    else:
        async with Hub.open() as hub:
            yield hub


async def main(argv: Sequence[str] | None = None) -> int:
    """Run one round of a discussion on the topic given on the command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("topic")
    parser.add_argument("--hub", help="host:port of a running hub (default: an embedded hub)")
    args = parser.parse_args(argv)
    async with connect(args.hub) as hc:
        suffix = os.urandom(3).hex()  # names are unique on a shared hub
        ada = Agent(f"ada-{suffix}", "You argue for tabs.", config=model_for("ada", "tabs, for accessibility."))
        bob = Agent(f"bob-{suffix}", "You argue for spaces.", config=model_for("bob", "spaces, for consistency."))
        await hc.register(ada)
        await hc.register(bob)
        moderator = await hc.register_human(Passport(name=f"moderator-{suffix}", kind="human"))
        targets = [ada.name, bob.name]
        try:
            await moderator.open(type="discussion", target=targets, knobs={"rounds": 1})
        except InvalidArgument as err:
            print(f"refused: {err.message}")
        ch = await moderator.open(type="discussion", target=targets, knobs={"max_rounds": 1})
        await moderator.send(ch.channel_id, f"Topic: {args.topic}")
        while True:
            env = await moderator.next_envelope(predicate=lambda e: e.channel_id == ch.channel_id, timeout=60)
            if env.event_type == EV_TEXT:
                print(f"[{hc.name_for(env.sender_id)}] {env.text}")
            elif env.event_type == EV_CHANNEL_CLOSED:
                print(f"closed: {env.event_data['reason']}")
                return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
