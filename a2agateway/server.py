"""The gateway's two listeners: HTTP (cards, JSON-RPC, via Starlette + uvicorn) and gRPC, both
serving a2a-sdk's own routes / servicer over one :class:`GatewayHandler`."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from contextlib import contextmanager
from typing import Any

import a2a.types.a2a_pb2_grpc as a2a_grpc
import grpc
import uvicorn
from a2a.server.request_handlers.grpc_handler import GrpcHandler
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.routes import create_jsonrpc_routes
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from a2agateway.cards import Addresses, Cards
from a2agateway.config import GatewayOptions
from a2agateway.handler import NO_TOKEN, GatewayHandler
from a2agateway.hub import HubLink
from netkernel.errors import AgentNetError, NotFound, Unauthenticated
from servicekit.auth import bearer_token
from servicekit.grpc_logs import quiet_client_departures
from servicekit.parse_guard import guarded

JSONRPC_PATH = "/a2a"
Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def _too_large(limit: int, size: int | None) -> Response:
    said = f"{size} bytes" if size is not None else "larger"
    error = {
        "code": -32600,
        "message": f"the request body is {said}, over this gateway's limit of {limit} bytes "
        "(--max-request-bytes); send a shorter message.",
    }
    return JSONResponse({"jsonrpc": "2.0", "id": None, "error": error}, status_code=413)


class BodyLimit:
    """Refuse request bodies over ``limit`` bytes (413 with a JSON-RPC error) before anything reads them."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """ASGI entry: check Content-Length, and count a body sent without one."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            await _too_large(self.limit, int(declared))(scope, receive, send)
            return
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.limit:
                from starlette.exceptions import HTTPException

                raise HTTPException(status_code=413, detail=f"request body over {self.limit} bytes")
            return message

        await self.app(scope, counted, send)


def _refusal(err: AgentNetError) -> JSONResponse:
    status = 401 if isinstance(err, Unauthenticated) else 404 if isinstance(err, NotFound) else 403
    if err.reason in ("INVALID_ARGUMENT",):
        status = 400
    headers = {"WWW-Authenticate": 'Bearer realm="agent-network"'} if status == 401 else None
    return JSONResponse({"error": {"reason": err.reason, "message": err.message}}, status_code=status, headers=headers)


class _Server(uvicorn.Server):
    """uvicorn's server without its signal handlers (the process that runs the gateway handles signals)."""

    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        """Leave signals alone."""
        yield


class Gateway:
    """A running gateway: its hub link and both listeners."""

    def __init__(self, options: GatewayOptions) -> None:
        self.options = options
        self.hub = HubLink(options.hub, options.hub_tls)
        self._http_socket = _bind(options.host, options.port)
        self.http_port: int = self._http_socket.getsockname()[1]
        self.grpc_server: grpc.aio.Server | None = None
        self.grpc_port = 0
        if options.grpc_port >= 0:
            quiet_client_departures()
            self.grpc_server = grpc.aio.server(
                options=[
                    ("grpc.max_receive_message_length", options.max_request_bytes),
                    ("grpc.max_send_message_length", 16 * 1024 * 1024),
                ]
            )
            self.grpc_port = self.grpc_server.add_insecure_port(f"{options.host}:{options.grpc_port}")
        host = f"[{options.host}]" if ":" in options.host else options.host
        public_url = (options.public_url or f"http://{host}:{self.http_port}").rstrip("/")
        grpc_target = options.public_grpc or (f"{host}:{self.grpc_port}" if self.grpc_server else "")
        self.cards = Cards(self.hub, Addresses(public_url + JSONRPC_PATH, grpc_target), options.max_tasks_listed)
        self.handler = GatewayHandler(self.hub, self.cards, options.max_tasks_listed)
        if self.grpc_server is not None:
            a2a_grpc.add_A2AServiceServicer_to_server(GrpcHandler(self.handler), guarded(self.grpc_server))  # type: ignore[no-untyped-call]
        self.app = BodyLimit(self._starlette(), options.max_request_bytes)
        self._uvicorn = _Server(
            uvicorn.Config(self.app, log_level="warning", lifespan="off", timeout_graceful_shutdown=1)
        )
        self._serving: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        """The HTTP listener's base URL."""
        return self.cards.addresses.jsonrpc_url.removesuffix(JSONRPC_PATH)

    def _starlette(self) -> Starlette:
        async def with_token(request: Request, build: Callable[[str], Awaitable[Any]]) -> Response:
            token = bearer_token(request.headers.items())
            try:
                if not token:
                    raise Unauthenticated(NO_TOKEN)
                return JSONResponse(await build(token))
            except AgentNetError as err:
                return _refusal(err)

        async def directory(request: Request) -> Response:
            return await with_token(request, lambda t: _card_dict(self.cards.directory(t)))

        async def listing(request: Request) -> Response:
            async def build(token: str) -> dict[str, Any]:
                return {"agents": [agent_card_to_dict(c) for c in await self.cards.cards(token)]}

            return await with_token(request, build)

        async def one(request: Request) -> Response:
            name = request.path_params["name"]
            return await with_token(request, lambda t: _card_dict(self.cards.card(t, name)))

        routes = [
            Route("/.well-known/agent-card.json", directory, methods=["GET"]),
            Route("/agents", listing, methods=["GET"]),
            Route("/agents/{name}/.well-known/agent-card.json", one, methods=["GET"]),
            *create_jsonrpc_routes(self.handler, JSONRPC_PATH),
        ]
        return Starlette(routes=routes)

    async def start(self) -> None:
        """Start both listeners."""
        if self.grpc_server is not None:
            await self.grpc_server.start()
        self._serving = asyncio.create_task(self._uvicorn.serve(sockets=[self._http_socket]))
        while not self._uvicorn.started:
            if self._serving.done():
                await self._serving  # raises what stopped it
            await asyncio.sleep(0.01)

    async def stop(self) -> None:
        """Stop both listeners (streams get a second), then close the hub link."""
        self._uvicorn.should_exit = True
        if self._serving is not None:
            await self._serving
        if self.grpc_server is not None:
            await self.grpc_server.stop(1.0)
        await self.hub.close()
        self._http_socket.close()


async def _card_dict(card: Awaitable[Any]) -> dict[str, Any]:
    return agent_card_to_dict(await card)


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    return sock


async def start_gateway(options: GatewayOptions) -> Gateway:
    """Build and start a gateway (tests and ``python -m a2agateway``)."""
    gateway = Gateway(options)
    await gateway.start()
    return gateway


def describe(gateway: Gateway) -> str:
    """The line the process prints once listening."""
    return json.dumps({"http": gateway.url, "grpc": gateway.cards.addresses.grpc_target, "hub": gateway.options.hub})
