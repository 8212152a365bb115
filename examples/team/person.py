"""The person: opens the team's discussion from Python, prints every turn, then asks the scribe a question.

It registers as a human, waits until every member is online, opens a ``discussion``
with one round (``knobs={"max_rounds": 1}``: the person first, then each member once, in
the order given) and posts the topic. Each turn is printed as ``[name] text`` until the hub
closes the channel (``closed: max_turns``). Then it asks the scribe, in a consulting
channel of its own, what it remembers; the scribe answers from its working memory in
the knowledge service (``[name -> person] text``).

    python examples/team/person.py --hub 127.0.0.1:50051 "Ship the search feature by Friday?"

The members (see README.md) are ``<team>-analyst`` and ``<team>-scribe`` (members.py),
``<team>-go`` (the Go bridge), ``<team>-ts`` (the TypeScript bridge) and ``<team>-ag2``
(an AG2 agent through the AG2 gateway); ``--members`` names others.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence

from agentsdk.network import EV_CHANNEL_CLOSED, EV_TEXT, HubClient, Passport

ROLES = ("analyst", "scribe", "go", "ts", "ag2")


async def wait_online(hc: HubClient, names: Sequence[str], timeout: float) -> None:
    """Return once every one of ``names`` is registered and connected; fail naming the missing ones."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        online = {a.name for a in await hc.list_agents() if a.online}
        missing = [n for n in names if n not in online]
        if not missing:
            return
        if loop.time() > deadline:
            raise SystemExit(f"not online after {timeout:g}s: {', '.join(missing)} (start them first, README.md)")
        await asyncio.sleep(0.2)


async def main(argv: Sequence[str] | None = None) -> int:
    """Run the discussion on the topic given on the command line, then ask the scribe."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("topic")
    parser.add_argument("--hub", default="127.0.0.1:50051", help="the hub's host:port (make serve: 127.0.0.1:50051)")
    parser.add_argument("--team", default="team", help="prefix of the members' names")
    parser.add_argument("--members", nargs="*", help="the members' names, in speaking order (default: the team)")
    parser.add_argument("--timeout", type=float, default=60, help="seconds to wait for members and for each turn")
    args = parser.parse_args(argv)
    members = args.members or [f"{args.team}-{role}" for role in ROLES]
    scribe = f"{args.team}-scribe"
    async with HubClient.connect(args.hub) as hc:
        person = await hc.register_human(Passport(name=f"{args.team}-person", kind="human"))
        await wait_online(hc, members, args.timeout)
        channel = await person.open(type="discussion", target=members, knobs={"max_rounds": 1})
        opening = await person.send(channel.channel_id, f"Topic: {args.topic}")
        print(f"[{person.passport.name}] {opening.text}", flush=True)  # nobody receives their own posts
        while True:
            env = await person.next_envelope(
                predicate=lambda e: e.channel_id == channel.channel_id, timeout=args.timeout
            )
            if env.event_type == EV_TEXT:
                print(f"[{hc.name_for(env.sender_id)}] {env.text}", flush=True)
            elif env.event_type == EV_CHANNEL_CLOSED:
                print(f"closed: {env.event_data['reason']}", flush=True)
                break
        if scribe in members:
            answer = await person.ask(scribe, "What did the team say?", timeout=args.timeout)
            print(f"[{scribe} -> {person.passport.name}] {answer.text}", flush=True)
        await person.unregister()  # frees the name: run this script again against the same team
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
