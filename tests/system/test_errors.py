"""The single error table: proto enum == SDK classes == docs, and every domain
error survives a real gRPC round trip as the same exception class."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import grpc
import pytest
from agentnet.v1 import errors_pb2

from agentsdk import errors
from servicekit.boundary import ErrorBoundary, unary_boundary

ROOT = Path(__file__).resolve().parents[2]
PROTO_REASONS = {
    v.name.removeprefix("ERROR_REASON_") for v in errors_pb2.ErrorReason.DESCRIPTOR.values if v.number != 0
}


def test_proto_enum_and_sdk_classes_are_one_table() -> None:
    assert set(errors.ERROR_CLASSES) == PROTO_REASONS


def test_docs_error_table_lists_every_reason_with_its_code_and_class() -> None:
    text = (ROOT / "docs" / "errors.md").read_text()
    for reason, cls in errors.ERROR_CLASSES.items():
        row = re.search(rf"^\|\s*`{reason}`\s*\|(.*)$", text, re.MULTILINE)
        assert row, f"docs/errors.md has no row for {reason}"
        assert cls.code.name in row.group(1), reason
        assert cls.__name__ in row.group(1), reason


class _Raiser:
    """Raises the error class named by the request bytes."""

    @unary_boundary
    async def Raise(self, request: bytes, context: Any) -> bytes:
        if request == b"bug":
            raise ZeroDivisionError("boom")
        cls = errors.ERROR_CLASSES[request.decode()]
        raise cls(f"{cls.__name__} happened; do X", metadata={"k": "v"})


async def _serve(handler: grpc.GenericRpcHandler) -> tuple[grpc.aio.Server, int]:
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return server, port


@pytest.fixture
async def raiser_target() -> Any:
    raiser = _Raiser()
    handler = grpc.method_handlers_generic_handler(
        "test.Errors", {"Raise": grpc.unary_unary_rpc_method_handler(raiser.Raise)}
    )
    server, port = await _serve(handler)
    yield f"127.0.0.1:{port}"
    await server.stop(None)


@pytest.mark.parametrize("reason", sorted(errors.ERROR_CLASSES))
async def test_domain_error_round_trips_as_same_class(raiser_target: str, reason: str) -> None:
    cls = errors.ERROR_CLASSES[reason]
    async with grpc.aio.insecure_channel(raiser_target) as channel:
        call = channel.unary_unary("/test.Errors/Raise")
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await call(reason.encode())
    assert info.value.code() == cls.code
    err = errors.error_from_rpc(info.value)
    assert type(err) is cls
    assert err.message == f"{cls.__name__} happened; do X"
    assert err.metadata == {"k": "v"}


async def test_unexpected_exception_becomes_internal_without_leaking_details(raiser_target: str) -> None:
    async with grpc.aio.insecure_channel(raiser_target) as channel:
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await channel.unary_unary("/test.Errors/Raise")(b"bug")
    assert info.value.code() == grpc.StatusCode.INTERNAL
    err = errors.error_from_rpc(info.value)
    assert isinstance(err, errors.InternalError)
    assert "ZeroDivisionError" in err.message and "boom" not in err.message


def test_status_without_error_info_maps_by_code() -> None:
    err = errors.error_from_reason("", "nope", code=grpc.StatusCode.NOT_FOUND.value[0])
    assert isinstance(err, errors.NotFound)


def test_seed_spelling_channel_closed_is_a_protocol_error() -> None:
    assert issubclass(errors.ChannelClosed, errors.ProtocolError)
    assert issubclass(errors.NotYourTurn, errors.ProtocolError)


async def _stream_then_raise(request: bytes, context: Any) -> Any:
    """A long-lived stream handler with the boundary opened inside it: one item, then the error."""
    async with ErrorBoundary(context, "test.Errors.Stream"):
        yield b"first"
        if request == b"bug":
            raise ZeroDivisionError("boom")
        raise errors.NotYourTurn("wait for bob", metadata={"k": "v"})


@pytest.mark.parametrize(
    ("request_bytes", "code", "cls"),
    [
        (b"domain", grpc.StatusCode.FAILED_PRECONDITION, errors.NotYourTurn),
        (b"bug", grpc.StatusCode.INTERNAL, errors.InternalError),
    ],
)
async def test_error_boundary_inside_a_stream_ends_it_with_the_status(
    request_bytes: bytes, code: grpc.StatusCode, cls: type[errors.AgentNetError]
) -> None:
    handler = grpc.method_handlers_generic_handler(
        "test.Errors", {"Stream": grpc.unary_stream_rpc_method_handler(_stream_then_raise)}
    )
    server, port = await _serve(handler)
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            received = []
            with pytest.raises(grpc.aio.AioRpcError) as info:
                async for item in channel.unary_stream("/test.Errors/Stream")(request_bytes):
                    received.append(item)
    finally:
        await server.stop(None)
    assert received == [b"first"]
    assert info.value.code() == code
    err = errors.error_from_rpc(info.value)
    assert type(err) is cls
    assert "boom" not in err.message


def test_one_http_status_table_serves_the_gateway_and_the_console() -> None:
    from a2agateway.refusals import HTTP_ANSWERED
    from netkernel.errors import HTTP_STATUS, http_status

    expected = {
        "UNAUTHENTICATED": 401,
        "TOKEN_EXPIRED": 401,
        "NOT_PARTICIPANT": 403,
        "PERMISSION_DENIED": 403,
        "RULE_DENIED": 403,
        "PAYLOAD_TOO_LARGE": 413,
        "RATE_LIMITED": 429,
        "INBOX_FULL": 429,
        "LIMIT_EXCEEDED": 429,
        "INVALID_ARGUMENT": 400,
        "OUT_OF_RANGE": 400,
        "NOT_FOUND": 404,
        "ALREADY_EXISTS": 409,
        "FAILED_PRECONDITION": 409,
        "CHANNEL_CLOSED": 409,
        "NOT_YOUR_TURN": 409,
        "DEPTH_EXCEEDED": 409,
        "PROTOCOL_ERROR": 409,
        "SUPERSEDED": 409,
        "TURN_FAILED": 502,
        "TIMEOUT": 504,
        "UNIMPLEMENTED": 501,
        "UNAVAILABLE": 503,
        "INTERNAL": 500,
    }
    assert {reason: http_status(cls("x")) for reason, cls in errors.ERROR_CLASSES.items()} == expected
    assert HTTP_ANSWERED <= {status for _, status in HTTP_STATUS}
    # The console's page and the gateway's answer come from that one function.
    for path in ("agentsdk/console/app.py", "a2agateway/refusals.py"):
        source = (ROOT / path).read_text()
        assert "http_status(err)" in source and not re.search(r"\b(NotFound|Unauthenticated): 40[14]\b", source), path


def test_partition_moved_reaches_a_client_as_a_retryable_unavailable_with_its_cause() -> None:
    from hubsvc.storage import nothing_stored
    from netkernel.errors import PartitionMoved, error_from_reason, error_status

    moved = PartitionMoved("this replica no longer owns the channel's partition; retry", metadata={"partition": "7"})
    assert moved.metadata == {"cause": "partition_moved", "partition": "7"}
    assert nothing_stored(moved)  # nothing was written: the rate token is given back, the post may be retried
    status = error_status(moved)
    assert status.code == grpc.StatusCode.UNAVAILABLE
    # The client side has no PartitionMoved: it gets the plain Unavailable, the cause in the metadata.
    client = error_from_reason(moved.reason, moved.message, moved.metadata)
    assert type(client) is errors.Unavailable and client.metadata["cause"] == "partition_moved"
