"""Answering a participant's posts: admitted here, refused, or forwarded to the replica holding
their channel — the one path for a Connect frame's posts and for the posts another replica
forwards (:mod:`hubsvc.replica_servicer`)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Protocol

from agentnet.v1 import connect_pb2, envelope_pb2, errors_pb2

from hubsvc.core.delivery import Session
from hubsvc.core.hub import HubCore
from hubsvc.core.posts import Admitted
from hubsvc.core.util import committed_already
from hubsvc.rpc import Authenticated, check_limits
from netkernel.envelope import Envelope
from netkernel.errors import AgentNetError, LostRace, PartitionMoved, Unavailable
from netkernel.wire import envelope_from_wire
from servicekit.boundary import domain_error, error_detail

_Answer = tuple[str, envelope_pb2.Envelope, bool, Envelope, str | None, connect_pb2.Post]
"""A post waiting for its commit: request id, envelope as written, duplicate, the post, its event_data JSON,
and the Post as it came (forwarded as it came if the channel's partition moved)."""


class PostSink(Protocol):
    """Where :meth:`HubServicer.answer_posts` puts each post's result: a Connect session, or the
    collector of a forwarded call."""

    def control(self, frame: connect_pb2.ConnectResponse) -> None:
        """Take a frame holding one PostResult."""


class PostingServicer(Authenticated, Protocol):
    """A servicer that admits posts: its hub core, and its forwarder to other replicas."""

    core: HubCore


async def answer_posts(
    servicer: PostingServicer,
    agent_id: str,
    session: PostSink,
    posts: Sequence[connect_pb2.Post],
    *,
    forward: bool = True,
) -> None:
    """Admit ``agent_id``'s posts in order; each gets its PostResult (into ``session``) once its
    commit is done, or at once when refused: a Connect frame's posts, and the posts another
    replica forwards (:mod:`hubsvc.replica_servicer`, ``forward`` False). Posts into a channel
    another replica holds are forwarded to it (:class:`~hubsvc.forwarding.Forwarder`), unless
    ``forward`` is False: then they are refused ``partition_moved`` and the forwarding replica
    asks the holder again."""

    def result(
        request_id: str,
        *,
        envelope: envelope_pb2.Envelope | None = None,
        error: errors_pb2.ErrorDetail | None = None,
        duplicate: bool = False,
    ) -> None:
        # Filled in place: a PostResult built with keyword arguments would copy the envelope
        # twice (into the PostResult, then the PostResult into the frame).
        response = connect_pb2.ConnectResponse()
        post_result = response.post_result
        post_result.SetInParent()
        post_result.request_id = request_id
        if envelope is not None:
            post_result.envelope.CopyFrom(envelope)
        if error is not None:
            post_result.error.CopyFrom(error)
        post_result.duplicate = duplicate
        session.control(response)

    def forwarded(post_result: connect_pb2.PostResult) -> None:
        response = connect_pb2.ConnectResponse()
        response.post_result.CopyFrom(post_result)
        session.control(response)

    forwarder = servicer.forwarder if forward else None

    stream = session if isinstance(session, Session) else None  # a Connect stream's (not a forwarded call's)
    steering = servicer.core.sessions.steering

    def send_on(channel_id: str, moving: list[connect_pb2.Post]) -> None:
        assert forwarder is not None
        if stream is not None and steering is not None:  # posting into a channel held elsewhere
            steering.used_elsewhere((stream,))
        forwarder.submit(
            agent_id,
            channel_id,
            moving,
            forwarded,
            lambda again: answer_posts(servicer, agent_id, session, again, forward=False),
            servicer.core.spawn,
        )

    request_ids: list[str] = []
    envelopes: list[tuple[Envelope, str | None]] = []
    originals: list[connect_pb2.Post] = []
    for post in posts:
        try:
            check_limits(servicer, agent_id, "Connect", post)
            env = envelope_from_wire(post.envelope, max_json_depth=servicer.core.options.max_json_depth)
        except Exception as exc:  # the same decision as the RPC boundary, answered in the stream
            result(post.request_id, error=error_detail(domain_error(exc, "HubServicer.Connect (post)")))
            continue
        request_ids.append(post.request_id)
        envelopes.append((env, post.envelope.event_data_json))
        originals.append(post)
    if not envelopes:
        return
    if len(envelopes) == 1:  # the common single Post: no list round trip through the core
        env, raw = envelopes[0]
        try:
            outcomes: list[Admitted | Exception] = [await servicer.core.admit(agent_id, env, event_data_json=raw)]
        except Exception as exc:
            outcomes = [exc]
    else:
        outcomes = await servicer.core.admit_many(agent_id, envelopes)
    # One commit callback per commit future (a batch's posts into one channel share one).
    waiting: dict[int, tuple[asyncio.Future[None], list[_Answer]]] = {}
    moved: dict[str, list[connect_pb2.Post]] = {}
    for request_id, (env, raw), original, outcome in zip(request_ids, envelopes, originals, outcomes, strict=True):
        if forwarder is not None and isinstance(outcome, PartitionMoved):  # another replica holds the channel
            moved.setdefault(env.channel_id, []).append(original)
            continue
        if isinstance(outcome, Exception):
            result(request_id, error=error_detail(domain_error(outcome, "HubServicer.Connect (post)")))
            continue
        fut, wire, duplicate = outcome
        waiting.setdefault(id(fut), (fut, []))[1].append((request_id, wire, duplicate, env, raw, original))
    for channel_id, moving in moved.items():
        send_on(channel_id, moving)

    async def readmit(request_id: str, env: Envelope, raw: str | None, admitted: Admitted) -> None:
        try:
            wire, duplicate = await servicer.core.post(agent_id, env, event_data_json=raw, admitted=admitted)
        except Exception as exc:
            result(request_id, error=error_detail(domain_error(exc, "HubServicer.Connect (post)")))
        else:
            result(request_id, envelope=wire, duplicate=duplicate)

    def answer(answers: list[_Answer]) -> Callable[[asyncio.Future[None]], None]:
        def committed(f: asyncio.Future[None]) -> None:
            error = None if f.cancelled() else f.exception()
            for request_id, wire, duplicate, env, raw, original in answers:
                if isinstance(error, LostRace):  # nothing was stored: the core's retry loop admits it again
                    servicer.core.spawn(readmit(request_id, env, raw, (f, wire, duplicate)), "readmit-post")
                elif forwarder is not None and isinstance(error, PartitionMoved):  # fenced: the holder moved
                    send_on(env.channel_id, [original])
                elif f.cancelled() or error is not None:
                    failed = error if isinstance(error, AgentNetError) else Unavailable("the write failed; retry")
                    result(request_id, error=error_detail(failed))
                else:
                    result(request_id, envelope=wire, duplicate=duplicate)

        return committed

    for fut, answers in waiting.values():
        if committed_already(fut):
            answer(answers)(fut)  # committed at once (inline): answered now, after its deliveries
        else:
            fut.add_done_callback(answer(answers))
    if forwarder is not None:
        for channel_id in moved:  # bounded: past MAX_QUEUED_BYTES the stream waits for its forwards
            await forwarder.room(agent_id, channel_id)
