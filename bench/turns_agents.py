"""``python -m bench.turns_agents``: one agents process of the turns benchmark (``bench/turns_bench.py``).

It registers ``channels × size`` SDK agents on the hub through one ``HubClient`` (the way a
service hosts its agents), each an :class:`agentsdk.Agent` with the default handler and a
model at ``--model``; then it talks to its parent over stdin/stdout, one line each:

1. prints ``ready`` once every agent is connected, and waits for ``go``;
2. each channel's first agent opens a ``discussion`` with the other ``size - 1`` as targets,
   ``max_turns`` knob = ``--turns`` and a seed message (turn 1); the default handlers take
   the remaining turns in round robin until the hub closes the channel with ``max_turns``;
3. prints ``done`` when every channel was seen closed;
4. reads every channel's WAL back through the SDK and prints one JSON line: per channel, the
   envelopes it holds, the substantive ones (turns) with their sender and admission time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from agentsdk import Agent, OpenAIConfig
from agentsdk.network import EV_CHANNEL_CLOSED, EV_PACKET, EV_TEXT, AgentClient, Envelope, HubClient, default_handler

SEED = "Benchmark discussion: each of you answers once per round."


@dataclass
class Group:
    """The agents of one channel; ``closed`` resolves with the close reason."""

    agents: list[AgentClient]
    closed: asyncio.Future[str]
    channel_id: str = ""
    errors: list[str] = field(default_factory=list)


def admitted(envelope: Envelope) -> float:
    """The hub's admission time of an envelope (``created_at``: RFC 3339, microseconds), in seconds."""
    return datetime.fromisoformat(envelope.created_at.replace("Z", "+00:00")).timestamp()


def watch(client: AgentClient, group: Group) -> None:
    """Run the default handler, and note when the group's channel closes."""

    async def handler(envelope: Envelope) -> None:
        if envelope.event_type == EV_CHANNEL_CLOSED and not group.closed.done():
            group.closed.set_result(str(envelope.event_data.get("reason", "")))
        try:
            await default_handler(envelope, client)
        except Exception as exc:  # a failed turn stalls its channel: report it rather than hang silently
            group.errors.append(f"{client.name}: {type(exc).__name__}: {exc}")
            raise

    client.on_envelope(handler)


async def line(expected: str) -> None:
    """Wait for ``expected`` on stdin (the parent's signal)."""
    got = (await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)).strip()
    if got != expected:
        raise SystemExit(f"turns_agents: expected {expected!r} on stdin, got {got!r}")


def say(text: str) -> None:
    """One line to the parent."""
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


async def channel_record(group: Group) -> dict[str, Any]:
    """What the channel's WAL holds: the union of its members' reads (envelopes with an audience,
    such as invites, are readable by their audience only)."""
    by_seq: dict[int, Envelope] = {}
    for agent in group.agents:
        by_seq.update((e.seq, e) for e in await agent.read_wal(group.channel_id))
    wal = [by_seq[seq] for seq in sorted(by_seq)]
    turns = [e for e in wal if e.event_type in (EV_TEXT, EV_PACKET)]
    return {
        "channel_id": group.channel_id,
        "close_reason": group.closed.result(),
        "envelopes": len(wal),
        "seqs_contiguous": [e.seq for e in wal] == list(range(1, len(wal) + 1)),
        "turns": [[e.sender_id, admitted(e)] for e in turns],
        "participants": [a.agent_id for a in group.agents],
        "errors": group.errors,
    }


async def warm(config: OpenAIConfig, connections: int) -> None:
    """Open the model client's connections before the clock starts (one per concurrent channel)."""
    client = config.client
    await asyncio.gather(
        *(
            client.chat.completions.create(model=config.model, messages=[{"role": "user", "content": "warm up"}])
            for _ in range(connections)
        )
    )


async def run(args: argparse.Namespace) -> None:
    """Register, wait for ``go``, run every channel to its close, report."""
    config = OpenAIConfig(model="bench", base_url=args.model, api_key="bench", max_retries=0)
    async with HubClient.connect(args.hub) as hc:
        loop = asyncio.get_running_loop()
        groups: list[Group] = []
        for c in range(args.first_channel, args.first_channel + args.channels):
            group = Group([], loop.create_future())
            for a in range(args.size):
                client = await hc.register(Agent(f"turns-c{c}-a{a}", config=config))
                watch(client, group)
                group.agents.append(client)
            groups.append(group)
        await warm(config, len(groups))
        say("ready")
        await line("go")

        async def converse(group: Group) -> None:
            opener, others = group.agents[0], group.agents[1:]
            channel = await opener.open(
                type="discussion",
                target=[a.agent_id for a in others],
                knobs={"max_turns": args.turns},
                message=SEED,
            )
            group.channel_id = channel.channel_id
            await group.closed

        await asyncio.wait_for(asyncio.gather(*(converse(g) for g in groups)), args.timeout)
        say("done")
        records = [await channel_record(g) for g in groups]
        say(json.dumps({"channels": records}))


def main() -> None:
    """Parse the flags and run."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hub", required=True, help="host:port of the hub")
    parser.add_argument("--model", required=True, help="base URL of the OpenAI-compatible model")
    parser.add_argument("--first-channel", type=int, default=0, help="number of this process's first channel")
    parser.add_argument("--channels", type=int, required=True, help="channels this process runs")
    parser.add_argument("--size", type=int, required=True, help="agents per channel")
    parser.add_argument("--turns", type=int, required=True, help="turns per channel (the seed is turn 1)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds for every channel to close")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
