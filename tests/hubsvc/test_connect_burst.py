"""A burst of Connect streams (what a hub restart with thousands of agents produces) is accepted.

gRPC core holds calls the server's request loop has not picked up yet; beyond its default
backlog (1,000) it cancelled a growing share of them, which clients saw as INTERNAL
('Failed "execute_batch"') or CANCELLED while the hub logged nothing.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import grpc
import pytest
from agentnet.v1 import connect_pb2, hub_pb2, hub_pb2_grpc, identity_pb2

from tests.procs import ROOT, ServiceProcess, start_service

STREAMS = 3000
CHANNELS = 8


@pytest.fixture
def hub_process(tmp_path: Path) -> Iterator[ServiceProcess]:
    service = start_service("hubsvc", ["--data-dir", str(tmp_path), "--log-level", "WARNING"], cwd=ROOT)
    yield service
    service.terminate()


async def test_a_burst_of_connect_streams_is_welcomed(hub_process: ServiceProcess) -> None:
    chans = [grpc.aio.insecure_channel(hub_process.target) for _ in range(CHANNELS)]
    stubs = [hub_pb2_grpc.HubServiceStub(c) for c in chans]
    credentials = []
    for start in range(0, STREAMS, 100):
        calls = [
            stubs[0].Register(hub_pb2.RegisterRequest(passport=identity_pb2.Passport(name=f"agent-{i}")))
            for i in range(start, start + 100)
        ]
        credentials += [r.credential for r in await asyncio.gather(*calls)]
    release = asyncio.Event()
    outcomes: collections.Counter[str] = collections.Counter()
    calls_ = []

    async def connect(i: int, credential: str) -> None:
        async def frames() -> AsyncIterator[connect_pb2.ConnectRequest]:
            yield connect_pb2.ConnectRequest(hello=connect_pb2.Hello(credential=credential))
            await release.wait()

        call = stubs[i % CHANNELS].Connect(frames())
        calls_.append(call)
        try:
            frame = await call.read()
            outcomes["welcome" if frame is not grpc.aio.EOF and frame.HasField("welcome") else "eof"] += 1
        except grpc.aio.AioRpcError as err:
            outcomes[err.code().name] += 1

    try:
        await asyncio.gather(*(connect(i, c) for i, c in enumerate(credentials)))
        assert outcomes == {"welcome": STREAMS}
    finally:
        release.set()
        for call in calls_:
            call.cancel()
        for c in chans:
            await c.close()
