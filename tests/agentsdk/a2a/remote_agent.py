"""An outside A2A agent for the tests, built only from the released ``a2a-sdk``: its request handler,
agent executor, JSON-RPC Starlette routes on uvicorn and its gRPC servicer, on loopback ports.

What the agent does depends on the text it is sent:

* ``fail ...`` — the task fails with the status message "the remote broke";
* ``ask ...`` — the task asks for input ("which policy?"); the follow-up message on the same task
  completes it with ``got: <follow-up text>``;
* ``headers`` — completes with the message's and the request's metadata as JSON (what the hub forwarded);
* ``big`` — completes with an artifact of 200 000 characters;
* ``slow`` — answers only once ``release`` is set (the server sets it when it stops);
* anything else — completes with the artifact ``echo: <text>``.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import grpc
import uvicorn
from a2a.helpers.proto_helpers import get_message_text, new_task_from_user_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler, GrpcHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import a2a_pb2 as a2a
from a2a.types import a2a_pb2_grpc
from google.protobuf.json_format import MessageToDict
from starlette.applications import Starlette
from starlette.types import ASGIApp, Receive, Scope, Send


class Executor(AgentExecutor):
    """The remote agent's logic; ``messages`` holds every message it was sent, in order."""

    def __init__(self) -> None:
        self.messages: list[a2a.Message] = []
        self.release = asyncio.Event()

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Answer one message (see the module doc)."""
        message = context.message
        assert message is not None
        self.messages.append(message)
        task = context.current_task
        if task is None:
            task = new_task_from_user_message(message)
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        text = get_message_text(message)
        if task.status.state == a2a.TASK_STATE_INPUT_REQUIRED:
            await updater.add_artifact([new_text_part(f"got: {text}")])
            await updater.complete()
        elif text.startswith("fail"):
            await updater.failed(updater.new_agent_message([new_text_part("the remote broke")]))
        elif text.startswith("ask"):
            await updater.requires_input(updater.new_agent_message([new_text_part("which policy?")]))
        elif text == "headers":
            seen = {"message": MessageToDict(message.metadata), "request": context.metadata}
            await updater.add_artifact([new_text_part(json.dumps(seen, sort_keys=True))])
            await updater.complete()
        elif text == "slow":
            await self.release.wait()
            await updater.complete()
        elif text == "big":
            await updater.add_artifact([new_text_part("x" * 200_000)])
            await updater.complete()
        else:
            await updater.add_artifact([new_text_part(f"echo: {text}")])
            await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Cancelling is not offered."""
        raise NotImplementedError


class _CountRequests:
    """ASGI middleware counting every HTTP request the server received."""

    def __init__(self, app: ASGIApp, counter: list[str]) -> None:
        self.app = app
        self.counter = counter

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            self.counter.append(scope["path"])
        await self.app(scope, receive, send)


@dataclass
class RemoteAgent:
    """A running outside agent: where its card is, and what it received."""

    card_url: str
    base_url: str
    executor: Executor
    transport: str
    """The interface its card lists first: "JSONRPC" or "GRPC"."""
    http_requests: list[str] = field(default_factory=list)
    """Paths of every HTTP request (card fetches included)."""


def _card(name: str, interfaces: list[a2a.AgentInterface]) -> a2a.AgentCard:
    return a2a.AgentCard(
        name=name,
        description="Looks up insurance policies (outside the hub)",
        version="1.0.0",
        supported_interfaces=interfaces,
        capabilities=a2a.AgentCapabilities(streaming=False),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[a2a.AgentSkill(id="policy-lookup", name="Policy lookup", description="Finds a policy", tags=["x"])],
    )


def _listen() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    return sock


@asynccontextmanager
async def serve_remote_agent(transport: str, name: str = "outside-policy") -> AsyncIterator[RemoteAgent]:
    """Run the agent with its card on HTTP; ``transport`` "JSONRPC" or "GRPC" is the interface the card
    lists first (the other is listed second, so the hub must follow the card's preference)."""
    executor = Executor()
    sock = _listen()
    http_port = sock.getsockname()[1]
    base = f"http://127.0.0.1:{http_port}"
    grpc_server = grpc.aio.server()
    grpc_port = grpc_server.add_insecure_port("127.0.0.1:0")
    jsonrpc = a2a.AgentInterface(url=f"{base}/a2a", protocol_binding="JSONRPC", protocol_version="1.0")
    grpc_if = a2a.AgentInterface(url=f"127.0.0.1:{grpc_port}", protocol_binding="GRPC", protocol_version="1.0")
    card = _card(name, [jsonrpc, grpc_if] if transport == "JSONRPC" else [grpc_if, jsonrpc])
    handler = DefaultRequestHandler(agent_executor=executor, task_store=InMemoryTaskStore(), agent_card=card)
    a2a_pb2_grpc.add_A2AServiceServicer_to_server(GrpcHandler(handler), grpc_server)
    await grpc_server.start()
    remote = RemoteAgent(f"{base}/.well-known/agent-card.json", base, executor, transport)
    app = Starlette(routes=[*create_agent_card_routes(card), *create_jsonrpc_routes(handler, "/a2a")])
    server = uvicorn.Server(
        uvicorn.Config(_CountRequests(app, remote.http_requests), log_level="warning", lifespan="off")
    )
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            if serving.done():
                serving.result()
            await asyncio.sleep(0.01)
        yield remote
    finally:
        executor.release.set()
        server.should_exit = True
        await serving
        await grpc_server.stop(None)
        sock.close()
