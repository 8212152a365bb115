"""PostEnvelope for a delivery stream's post that the stream did not carry, sent again under the same
idempotency key while hub replicas stop or move the channel (:data:`MOVING_CAUSES`)."""

from __future__ import annotations

import asyncio
import random

from agentnet.v1 import connect_pb2, envelope_pb2, hub_pb2

from agentsdk.backoff import NO_RETRY
from agentsdk.network._outbox import posted_envelope
from agentsdk.rpc import HubRpc
from agentsdk.transport import HubConnection
from netkernel.errors import Unavailable

MOVING_CAUSES = frozenset({"shutdown", "partition_moved", "replica_unreachable", "lost_race"})
"""The ``cause`` metadata of an UNAVAILABLE post answer that says hub replicas are stopping or
moving a channel (docs/errors.md): posted again under the same key. A store that fails
(``store_write_failed``, ``store_unreachable``) is the application's to see at once."""


def moving(error: Unavailable) -> bool:
    """Whether ``error`` answers a post while replicas stop or move its channel (:data:`MOVING_CAUSES`)."""
    return error.metadata.get("cause") in MOVING_CAUSES


def admitted_unless_moving(result: connect_pb2.PostResult) -> envelope_pb2.Envelope | None:
    """The envelope a stream's post result admitted; None when it is UNAVAILABLE because hub replicas
    are stopping or moving the channel (:func:`moving`: the caller posts again by PostEnvelope under
    the same key); any other refusal raised."""
    try:
        return posted_envelope(result)
    except Unavailable as err:  # e.g. the channel's holder stopped mid-forward
        if not moving(err):
            raise
        return None


class UnaryPoster:
    """PostEnvelope as one identity (``credential``), to where its stream is: ``home`` (the address
    given) or, after :meth:`use`, the replica a Redirect named."""

    def __init__(self, home: HubConnection, credential: str) -> None:
        self._home = home
        self._credential = credential
        self.rpc = HubRpc(home, credential, backoff=NO_RETRY)
        """The calls, without a RATE_LIMITED retry of their own (the caller's retry covers them)."""

    def use(self, conn: HubConnection) -> None:
        """Send the posts to ``conn`` from now on."""
        self.rpc = HubRpc(conn, self._credential, backoff=NO_RETRY)

    async def post(self, envelope: envelope_pb2.Envelope, timeout: float) -> envelope_pb2.Envelope:
        """PostEnvelope, sent again under the same idempotency key while the hub answers UNAVAILABLE
        because replicas are moving (:func:`moving`; gRPC's own retries spent) until ``timeout``
        seconds are up; a post that was admitted comes back as the duplicate. Sent where the stream is
        (a replica a Redirect named, else the address given); a replica a Redirect named that does not
        answer at all is tried again too, at the stream's next connection (a moved stream whose replica
        went away goes back to the address given)."""
        loop = asyncio.get_running_loop()
        deadline, backoff = loop.time() + timeout, 0.05
        request = hub_pb2.PostEnvelopeRequest(envelope=envelope)
        while True:
            fallback = self.rpc
            try:
                response = await fallback.post_envelope(request, timeout=max(0.001, deadline - loop.time()))
                return response.envelope
            except Unavailable as err:
                pause = backoff * (0.5 + random.random())
                # A replica a Redirect named that did not answer at all (no cause: not the hub's answer).
                gone = fallback.connection is not self._home and not err.metadata.get("cause")
                if not (moving(err) or gone) or loop.time() + pause >= deadline:
                    raise
                await asyncio.sleep(pause)  # a backoff between attempts, not a wait for a condition
                backoff = min(backoff * 2, 1.0)
