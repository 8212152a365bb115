"""Clients that stop reading: every per-client buffer of the hub is bounded in bytes.

A raw ``grpc.aio`` stream that never reads leaves the hub's writes blocked on gRPC flow
control; what the hub queues for it meanwhile must stay under the configured byte
budget, and the stream must end with RESOURCE_EXHAUSTED (reason INBOX_FULL) saying
where to resume from.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from agentnet.v1 import connect_pb2, hub_pb2

from agentsdk import errors
from hubsvc.core.delivery import Session
from hubsvc.core.options import HubOptions
from netkernel.errors import error_from_rpc
from tests.hubsvc.harness import (
    Participant,
    RunningHub,
    assert_eventually,
    conversation,
    make_envelope,
    running_hub,
)

BUDGET = 256 * 1024
BIG = "x" * (48 * 1024)


class RawConnect:
    """A Connect stream driven frame by frame: it reads only when told to."""

    def __init__(self, p: Participant, cursors: dict[str, int] | None = None) -> None:
        self.outbox: asyncio.Queue[connect_pb2.ConnectRequest | None] = asyncio.Queue()
        self.outbox.put_nowait(
            connect_pb2.ConnectRequest(hello=connect_pb2.Hello(credential=p.credential, cursors=cursors or {}))
        )
        self.call = p.stub.Connect(self._frames())

    async def _frames(self) -> AsyncIterator[connect_pb2.ConnectRequest]:
        while (item := await self.outbox.get()) is not None:
            yield item

    def send(self, frame: connect_pb2.ConnectRequest) -> None:
        self.outbox.put_nowait(frame)

    async def drain_until_error(self) -> tuple[list[connect_pb2.ConnectResponse], errors.AgentNetError]:
        """Read every frame the hub still has for us, then the status it ended the stream with."""
        frames = []
        try:
            while True:
                frame = await asyncio.wait_for(self.call.read(), 10)
                if frame is grpc.aio.EOF:
                    raise AssertionError("the stream ended without an error status")
                frames.append(frame)
        except grpc.aio.AioRpcError as err:
            return frames, error_from_rpc(err)


def session_of(hub: RunningHub, who: Participant) -> Session:
    """``who``'s session on the replica its stream is on."""
    return hub.serving(who).core.sessions._sessions[who.agent_id]


@pytest.fixture
async def small_hub(tmp_path: Path) -> AsyncIterator[RunningHub]:
    async with running_hub(tmp_path / "hub.db", HubOptions(max_stream_buffer_bytes=BUDGET)) as h:
        yield h


async def test_stalled_connect_stream_is_bounded_in_bytes_and_ended_resumably(small_hub: RunningHub) -> None:
    alice, bob, cid = await conversation(small_hub.target)
    await bob.disconnect()
    raw = RawConnect(bob)
    welcome = await raw.call.read()
    assert welcome.WhichOneof("frame") == "welcome"
    session = session_of(small_hub, bob)
    posted = []
    for i in range(400):  # ~2 MB, far beyond what flow control and the budget hold
        posted.append((await alice.post(cid, "myapp.note", {"i": i, "pad": BIG})).envelope_id)
        assert session.buffered_bytes <= BUDGET
        if session.closed:
            break
    assert session.closed, "the hub kept queueing for a client that does not read"
    assert session.buffered_bytes == 0, "a dropped session must release what it queued"
    frames, error = await raw.drain_until_error()
    assert isinstance(error, errors.InboxFull)
    assert error.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "reconnect" in error.message and error.metadata["limit_bytes"] == str(BUDGET)
    # Nothing is lost: a new stream resumes from the hub's stored cursors.
    seen = {f.delivery.envelope.envelope_id for f in frames if f.WhichOneof("frame") == "delivery"}
    await bob.connect()
    while not set(posted) <= seen:
        seen.add((await bob.next(lambda e: e.event_type == "myapp.note")).envelope_id)
    await alice.close()
    await bob.close()


async def test_unread_pongs_do_not_accumulate(small_hub: RunningHub) -> None:
    alice, bob, cid = await conversation(small_hub.target)
    await bob.disconnect()
    raw = RawConnect(bob)
    await raw.call.read()  # Welcome; nothing is read after it
    session = session_of(small_hub, bob)
    for n in range(5000):
        raw.send(connect_pb2.ConnectRequest(ping=connect_pb2.Ping(nonce=n)))
    # A post after the pings: once it is committed, the hub has read every ping.
    raw.send(
        connect_pb2.ConnectRequest(
            post=connect_pb2.Post(request_id="after-pings", envelope=make_envelope(cid, "myapp.note", {}))
        )
    )
    live = small_hub.holder(cid).core.live_channel(cid)
    assert live is not None
    before = live.committed_seq
    await assert_eventually(lambda: live.committed_seq > before, timeout=30)
    assert session.queued_frames <= 2, "at most one pong (the latest) and the post result may wait"
    raw.call.cancel()
    await alice.close()
    await bob.close()


async def test_stalled_wal_follow_is_ended_with_resume_seq(small_hub: RunningHub) -> None:
    alice, bob, cid = await conversation(small_hub.target)
    follow = bob.stub.ReadWal(hub_pb2.ReadWalRequest(channel_id=cid, follow=True), metadata=bob.metadata)
    first = await follow.read()  # the stream is open (the invite); nothing is read after it
    channels = small_hub.serving(bob).core.channels  # where the follow is served
    for i in range(400):
        await alice.post(cid, "myapp.note", {"i": i, "pad": BIG})
        if not channels.watched(cid):
            break
    assert not channels.watched(cid), "the hub kept queueing for a WAL follower that does not read"
    items = [first]
    with pytest.raises(grpc.aio.AioRpcError) as info:
        while True:
            item = await asyncio.wait_for(follow.read(), 10)
            assert item is not grpc.aio.EOF
            items.append(item)
    error = error_from_rpc(info.value)
    assert isinstance(error, errors.InboxFull)
    resume = int(error.metadata["resume_from_seq"])
    assert resume == items[-1].envelope.seq + 1
    assert f"from_seq={resume}" in error.message
    # Resuming from that seq returns the rest, gap-free.
    rest = bob.stub.ReadWal(hub_pb2.ReadWalRequest(channel_id=cid, from_seq=resume), metadata=bob.metadata)
    seqs = [item.envelope.seq async for item in rest]
    assert seqs and seqs[0] == resume
    await alice.close()
    await bob.close()


def test_stream_buffer_flag(tmp_path: Path) -> None:
    from hubsvc.config import parse_args

    config = parse_args(["--max-stream-buffer-bytes", "1048576"])
    assert config.options().max_stream_buffer_bytes == 1048576
    with pytest.raises(SystemExit):
        parse_args(["--max-stream-buffer-bytes", "0"])


async def test_a_backlog_larger_than_the_budget_replays_without_overflow(small_hub: RunningHub) -> None:
    alice, bob, cid = await conversation(small_hub.target)
    await bob.disconnect()
    posted = [(await alice.post(cid, "myapp.note", {"i": i, "pad": BIG})).envelope_id for i in range(30)]
    await bob.connect()  # the replay (~1.5 MB) waits for room instead of ending the stream
    got = [(await bob.next(lambda e: e.event_type == "myapp.note")).envelope_id for _ in posted]
    assert got == posted and bob.stream_error is None
    await alice.close()
    await bob.close()
