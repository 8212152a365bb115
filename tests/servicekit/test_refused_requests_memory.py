"""A refused request is freed as soon as its call ends (issue 41: a bad-input probe took a hub from
62 to 248 MB RSS, and it stayed there).

Every refusal used to end with ``context.abort_with_status``: grpc.aio keeps the AbortError on the
call's state and its traceback holds the handler's frames, which hold the call's state — a cycle
keeping the request (a 15 MiB post refused for its size) until the cyclic GC ran, which it seldom
does in a process making few Python objects. ``check_limits`` kept its refusal in a local the
raised error's traceback held too. Now refusals set the status (servicekit.boundary.end_with) and
nothing refers back, so reference counting frees each request at once; and after large requests
the C heap is trimmed (servicekit/heap.py). Measured with a probe of bad inputs against
``python -m hubsvc``: 62 MB at start, 633 MB (740 at the peak) after it before, 67-120 MB now.
"""

from __future__ import annotations

import gc
import json
import os
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from agentnet.v1 import envelope_pb2, hub_pb2, identity_pb2
from google.protobuf.message import Message

from servicekit.heap import LARGE_REQUEST_BYTES, TRIMMER
from tests.eventually import assert_eventually
from tests.hubsvc.harness import conversation, running_hub


@pytest.fixture
def no_cyclic_gc() -> Iterator[None]:
    """Only reference counting frees objects meanwhile (what a cycle holds stays)."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


async def test_refused_requests_are_freed_when_their_call_ends(tmp_path: Path, no_cyclic_gc: None) -> None:
    async with running_hub(tmp_path / "hub.db") as hub:
        alice, _bob, channel_id = await conversation(hub.target)
        big = "x" * (2 << 20)
        refused = [
            hub_pb2.RegisterRequest(passport=identity_pb2.Passport(name=big)),  # a field over its limit
            hub_pb2.RegisterRequest(passport=identity_pb2.Passport(name="ok", description=big)),
            hub_pb2.PostEnvelopeRequest(  # event data over its limit
                envelope=envelope_pb2.Envelope(
                    channel_id=channel_id, event_type="ag2.msg.text", event_data_json=json.dumps({"text": big})
                )
            ),
            hub_pb2.PostEnvelopeRequest(  # refused by the channel (not a member's post): a domain error
                envelope=envelope_pb2.Envelope(channel_id="nowhere", event_type="ag2.msg.text", event_data_json="{}")
            ),
        ]
        async with grpc.aio.insecure_channel(hub.target) as channel:
            for request in refused:
                method = "Register" if isinstance(request, hub_pb2.RegisterRequest) else "PostEnvelope"
                call = channel.unary_unary(
                    f"/agentnet.v1.HubService/{method}",
                    request_serializer=lambda m: m.SerializeToString(),
                    response_deserializer=lambda b: b,
                )
                with pytest.raises(grpc.aio.AioRpcError):
                    await call(request, metadata=alice.metadata, timeout=10)
            garbage = _unreachable_requests()
        assert garbage == [], "refused requests kept alive by reference cycles"


def _unreachable_requests() -> list[str]:
    """The request messages only reference cycles still hold (found by one collection)."""
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        found = [
            type(o).__name__
            for o in gc.garbage
            if isinstance(o, Message) and type(o).__name__.endswith("Request") and o.ByteSize() > 1000
        ]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    return found


async def test_the_c_heap_is_trimmed_after_large_requests(tmp_path: Path) -> None:
    if TRIMMER._trim is None:
        pytest.skip("no malloc_trim in this C library")
    async with running_hub(tmp_path / "hub.db") as hub:
        before = TRIMMER.trims
        async with grpc.aio.insecure_channel(hub.target) as channel:
            call = channel.unary_unary("/agentnet.v1.HubService/ListAgents", request_serializer=lambda b: b)
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await call(os.urandom(16) + b"\xff" * LARGE_REQUEST_BYTES, timeout=10)  # unparsable, 1 MiB
            assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        await assert_eventually(lambda: TRIMMER.trims > before, timeout=15)
