"""Read a channel's WAL with the betterproto2 stubs (gen/python_betterproto) over grpclib.

No agentsdk involved: just the generated ``HubServiceStub`` and a bearer credential,
the way any non-SDK Python program (or a bridge in another language) talks to the hub.

    python examples/betterproto_read_wal.py HOST:PORT CREDENTIAL CHANNEL_ID
    AGENTNET_TARGET=127.0.0.1:50051 AGENTNET_CREDENTIAL=... AGENTNET_CHANNEL=... \
        python examples/betterproto_read_wal.py

The credential is the one ``Register`` / ``RegisterHuman`` returned to a participant
of the channel (the hub only shows what that participant may see). Prints one line
per envelope: ``<seq> <event_type> <text>``.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys

from agentnet_betterproto.agentnet.v1 import Envelope, HubServiceStub, ReadWalRequest
from grpclib.client import Channel
from grpclib.exceptions import GRPCError


def text_of(envelope: Envelope) -> str:
    """event_data.text of a text, event_data.body of a packet, else the raw payload."""
    try:
        data = json.loads(envelope.event_data_json or "{}")
    except json.JSONDecodeError:
        return envelope.event_data_json
    if isinstance(data, dict):
        for key in ("text", "body"):
            if isinstance(data.get(key), str):
                return data[key]
    return envelope.event_data_json


async def read_wal(target: str, credential: str, channel_id: str) -> int:
    """Print every envelope of ``channel_id`` the credential's owner may see; returns how many."""
    host, _, port = target.rpartition(":")
    channel = Channel(host=host or "127.0.0.1", port=int(port))
    try:
        stub = HubServiceStub(channel, metadata={"authorization": f"Bearer {credential}"})
        count = 0
        async for response in stub.read_wal(ReadWalRequest(channel_id=channel_id), timeout=30):
            env = response.envelope
            if env is None:
                continue
            print(f"{env.seq} {env.event_type} {text_of(env)}", flush=True)
            count += 1
        return count
    finally:
        channel.close()


def main(argv: list[str]) -> int:
    args = argv[1:]
    target = args[0] if len(args) > 0 else os.environ.get("AGENTNET_TARGET", "127.0.0.1:50051")
    credential = args[1] if len(args) > 1 else os.environ.get("AGENTNET_CREDENTIAL", "")
    channel_id = args[2] if len(args) > 2 else os.environ.get("AGENTNET_CHANNEL", "")
    if not credential or not channel_id:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        asyncio.run(read_wal(target, credential, channel_id))
    except GRPCError as err:
        # The reason (e.g. NOT_PARTICIPANT) is in err.details when grpclib decodes it;
        # the status and message are always there.
        print(f"ReadWal failed: {err.status.name}: {err.message}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
