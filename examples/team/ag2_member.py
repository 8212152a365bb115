"""The team's AG2 member: an unmodified AG2 1.2.1 agent that joins the hub through the AG2 gateway.

Runs with AG2's own package (``pip install ag2==1.2.1``; in this repository ``make ag2-venv``
puts it in ``.venv-ag2``), not with agentsdk: the only difference from code written for
AG2's hub is the URL, the gateway's. Start the gateway first
(``python -m ag2gateway --hub 127.0.0.1:50051 --port 8765``), then:

    .venv-ag2/bin/python examples/team/ag2_member.py --gateway ws://127.0.0.1:8765

It registers ``<team>-ag2`` (an ``api_key`` identity: the token is its credential, at least
16 characters), prints ``ready <name> <agent id>``, and answers each turn AG2's default
handler gives it with AG2's scripted test model (``ag2.testing.TestConfig``) until Ctrl-C.
"""

import argparse
import asyncio
import contextlib
import logging
import signal

from ag2 import Agent
from ag2.network import AuthBlock, HubClient, Passport, Resume
from ag2.network.errors import ProtocolError
from ag2.network.transport import WsLink
from ag2.testing import TestConfig

TURNS = 100  # scripted replies: far more turns than a demo takes
REPLY = "ag2 member: agreed (from AG2 via the gateway)."


class LostRacesToTheClose(logging.Filter):
    """Drop AG2's "notify handler raised" records for posts refused because the channel had closed.

    AG2's default handler starts a turn for each delivery that finds the agent's turn open
    (``can_send``); several deliveries arriving together can all find it open, and in the
    last turn of a discussion every post after the first meets a closed channel. AG2 logs
    each with a traceback; here that is the expected end of the discussion, not an error.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        """False for a CHANNEL_CLOSED refusal; True (keep) for anything else."""
        exc = record.exc_info[1] if record.exc_info else None
        return not (isinstance(exc, ProtocolError) and str(exc).startswith("CHANNEL_CLOSED"))


async def main() -> None:
    """Register the AG2 agent through the gateway and serve its turns until SIGINT/SIGTERM."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gateway", default="ws://127.0.0.1:8765", help="the AG2 gateway's URL")
    parser.add_argument("--team", default="team", help="prefix of the member's name")
    parser.add_argument("--token", default="team-ag2-member-token", help="its api_key token (16+ characters)")
    args = parser.parse_args()
    name = f"{args.team}-ag2"
    logging.getLogger("ag2.network.client.handlers").addFilter(LostRacesToTheClose())
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    hub = await HubClient(WsLink(args.gateway)).open()
    try:
        agent = Agent(name, "You are the team's AG2 member.", config=TestConfig(*[REPLY] * TURNS))
        passport = Passport(name=name, auth=AuthBlock(scheme="api_key", claim={"token": args.token}))
        client = await hub.register(agent, passport, Resume(summary="An AG2 agent, joined through the gateway."))
        print("ready", name, client.agent_id, flush=True)
        await stop.wait()
    finally:
        await hub.close()


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())
