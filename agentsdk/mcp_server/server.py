"""One hub identity served over MCP: the ``mcp`` package's low-level server over our tools and resources."""

from __future__ import annotations

import sys
from typing import Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler
from starlette.applications import Starlette

from agentsdk.mcp_server.resources import NetworkResources
from agentsdk.mcp_server.subscriptions import Subscriptions
from agentsdk.mcp_server.tools import NetworkTools
from agentsdk.network.clients import HumanClient

SERVER_NAME = "agentnet"
"""The MCP server's name (``serverInfo.name``)."""


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("agent-network")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree without metadata
        return ""


class NetworkMCPServer:
    """The MCP server of one identity: its network tools and ``ask``, its channels as resources, and
    resource-updated notifications as envelopes reach it.

    ``client`` is a connected person-kind identity (``hc.register_human(...)``); the server adds an
    envelope callback to it. Several MCP sessions (streamable HTTP) share the identity."""

    def __init__(self, client: HumanClient) -> None:
        self.client = client
        """The identity served."""
        self.tools = NetworkTools(client)
        """Its tools."""
        self.resources = NetworkResources(client)
        """Its resources."""
        self.bus = InMemorySubscriptionBus()
        """Updates for hosts on ``subscriptions/listen`` (2026-07-28 protocol)."""
        self.subscriptions = Subscriptions(self.bus)
        """Updates for hosts on ``resources/subscribe``."""
        client.on_envelope(self.subscriptions.envelope)
        self.server: Server[Any] = Server(
            SERVER_NAME,
            version=_version(),
            title=f"agent network: {client.name}",
            instructions=(
                f"You are on an agent network as {client.name!r} (agent id {client.agent_id}). Find agents with "
                "peers(action='find'), ask one with ask(agent, question); channels and their transcripts are "
                "resources (agentnet://channels)."
            ),
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_list_resources=self._list_resources,
            on_list_resource_templates=self._list_templates,
            on_read_resource=self._read_resource,
            on_subscribe_resource=self._subscribe,
            on_unsubscribe_resource=self._unsubscribe,
            on_subscriptions_listen=ListenHandler(self.bus),
        )

    async def _list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=self.tools.listing())

    async def _call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        return await self.tools.call(params.name, params.arguments or {})

    async def _list_resources(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=await self.resources.listing())

    async def _list_templates(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(resource_templates=self.resources.templates())

    async def _read_resource(
        self, ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        return await self.resources.read(str(params.uri))

    async def _subscribe(
        self, ctx: ServerRequestContext[Any], params: types.SubscribeRequestParams
    ) -> types.EmptyResult:
        self.subscriptions.subscribe(ctx.session, str(params.uri))
        return types.EmptyResult()

    async def _unsubscribe(
        self, ctx: ServerRequestContext[Any], params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        self.subscriptions.unsubscribe(ctx.session, str(params.uri))
        return types.EmptyResult()

    async def run_stdio(self) -> None:
        """Serve one MCP session on this process's stdin and stdout until the host closes stdin."""
        try:
            async with stdio_server() as (read, write):
                await self.server.run(read, write, self.server.create_initialization_options())
        finally:
            await self.subscriptions.close()

    def http_app(self, *, host: str, max_sessions: int) -> Starlette:
        """The streamable HTTP app (endpoint ``/mcp``); ``host`` is where it listens (on loopback the
        ``mcp`` package also refuses requests whose Host or Origin header is not a loopback one)."""
        return self.server.streamable_http_app(host=host, max_sessions=max_sessions)


def log(message: str) -> None:
    """A line on stderr (stdout carries the MCP session on stdio)."""
    print(message, file=sys.stderr, flush=True)
