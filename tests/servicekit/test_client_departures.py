"""A client that cancels a stalled stream is an expected event: the hub logs it at DEBUG, never an
ERROR traceback (servicekit/grpc_logs.py), while real errors on the same logger still show."""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path

import grpc
import pytest
from agentnet.v1 import connect_pb2, hub_pb2, hub_pb2_grpc
from grpc._cython import cygrpc

from servicekit.grpc_logs import GRPC_LOGGER, quiet_client_departures
from tests.hubsvc.harness import EV_TEXT, Participant, conversation, running_hub


async def test_cancelling_a_stalled_connect_stream_logs_no_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    async with running_hub(tmp_path / "hub.db") as hub:
        alice, bob, channel_id = await conversation(hub.target)
        await bob.close()
        big = {"text": "x" * 60_000}
        for _ in range(4):
            # bob reads his Welcome, then nothing: the hub's sends stall on flow control; then he gives up.
            async with grpc.aio.insecure_channel(hub.target) as channel:
                call = hub_pb2_grpc.HubServiceStub(channel).Connect(metadata=bob.metadata)
                await call.write(connect_pb2.ConnectRequest(hello=connect_pb2.Hello(credential=bob.credential)))
                assert (await call.read()).WhichOneof("frame") == "welcome"
                for _ in range(40):
                    await alice.post(channel_id, EV_TEXT, big)
                await asyncio.sleep(0.2)
                call.cancel()
                await asyncio.sleep(0.2)
        # The hub serves on: bob's next stream gets what he missed.
        bob = Participant(hub.target, bob.record, bob.credential)
        await bob.connect()
        got = await bob.next(lambda e: e.event_type == EV_TEXT)
        assert got.channel_id == channel_id
        listed = await bob.rpc("ListChannels", hub_pb2.ListChannelsRequest())
        assert [c.channel_id for c in listed.channels] == [channel_id]
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == [], [r.getMessage() for r in errors]


def test_the_filter_quiets_only_a_failed_response_send(caplog: pytest.LogCaptureFixture) -> None:
    quiet_client_departures()
    quiet_client_departures()  # once per process, however often services start
    grpc_log = logging.getLogger(GRPC_LOGGER)
    assert len([f for f in grpc_log.filters if type(f).__name__ == "ClientDepartureFilter"]) == 1
    caplog.set_level(logging.DEBUG)
    method = "/agentnet.v1.HubService/Connect"
    for text in ('Failed "execute_batch": (<grpc._cython.cygrpc.SendMessageOperation object at 0x1>,)',):
        try:
            raise cygrpc.ExecuteBatchError(text)
        except cygrpc.ExecuteBatchError:
            grpc_log.exception(f"ExecuteBatchError raised in core by servicer method [{method}]")
    # Real errors pass: a failed status send, and any other exception a servicer raised.
    try:
        raise cygrpc.ExecuteBatchError('Failed "execute_batch": (<SendStatusFromServerOperation object>,)')
    except cygrpc.ExecuteBatchError:
        grpc_log.exception(f"ExecuteBatchError raised in core by servicer method [{method}]")
    try:
        raise RuntimeError("a real bug")
    except RuntimeError:
        grpc_log.exception(f"Unexpected [RuntimeError] raised by servicer method [{method}]")
    shown = [(r.name, r.levelname, r.getMessage()) for r in caplog.records]
    assert shown == [
        (
            "agentnet.service",
            "DEBUG",
            f"a response of {method} was not sent: the client cancelled the stream or its connection closed",
        ),
        (GRPC_LOGGER, "ERROR", f"ExecuteBatchError raised in core by servicer method [{method}]"),
        (GRPC_LOGGER, "ERROR", f"Unexpected [RuntimeError] raised by servicer method [{method}]"),
    ]
    assert sys.exc_info() == (None, None, None)
