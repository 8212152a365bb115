"""Agents use the tools of MCP servers: ``Agent(..., mcp_servers=[MCPServerStdio(...)])``.

An :class:`MCPServerStdio` (a process the agent launches and talks to over stdin/stdout) or an
:class:`MCPServerStreamableHttp` (a server at a URL) is connected when the agent starts
(:meth:`agentsdk.Agent.start`, ``async with agent:``, or its first ``ask``) through the official
``mcp`` package's client (the ``mcp`` extra). Its tools are listed once then and become
:class:`MCPTool` s: ordinary :class:`~agentsdk.tools.Tool` s whose JSON schema is the server's
``inputSchema`` and whose :meth:`~MCPTool.invoke` sends ``tools/call``. So the turn loop offers,
dispatches and records them exactly like Python tools.

A failure never hangs a turn: a tool's ``isError`` result, a protocol error, a server that
exited, and a call slower than the server's ``timeout`` all become an error result the model
sees. See ``docs/mcp.md``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from agentsdk.tools import Tool, ToolOutput, render_result
from netkernel.extras import require

if TYPE_CHECKING:
    from mcp import ClientSession

__all__ = [
    "MAX_TOOLS",
    "PREFIX_SEPARATOR",
    "MCPError",
    "MCPServer",
    "MCPServerStdio",
    "MCPServerStreamableHttp",
    "MCPTool",
    "mcp_tools",
]

log = logging.getLogger(__name__)

MAX_TOOLS = 1000
"""The most tools one server may list; a server listing more fails to start (its listing is held in memory)."""

PREFIX_SEPARATOR = "__"
"""Joins a server's name and a tool's when two servers offer the same tool name (``files__read``).
Not ``.``: model APIs (OpenAI's among them) accept only letters, digits, ``_`` and ``-`` in names."""


class MCPError(RuntimeError):
    """An MCP server could not be started or listed (the agent's start fails with it)."""


def _mcp() -> Any:
    """The ``mcp`` package (raises ``MissingExtra`` naming the ``mcp`` extra when absent)."""
    return require("mcp", "mcp")[0]


class MCPServer:
    """One MCP server an agent uses; subclasses say how to connect (stdio or streamable HTTP).

    ``allow`` (tool names to keep; ``None`` keeps all) and ``deny`` (tool names to drop) filter
    what the server lists; ``timeout`` bounds each tool call, ``start_timeout`` the connection
    and the tool listing, both in seconds.
    """

    def __init__(
        self,
        name: str,
        *,
        allow: Iterable[str] | None = None,
        deny: Iterable[str] = (),
        timeout: float = 30.0,
        start_timeout: float = 30.0,
    ) -> None:
        if not re.fullmatch(r"[A-Za-z0-9_-]{1,32}", name):
            raise ValueError(f"MCP server name {name!r} must be 1-32 letters, digits, '_' or '-'")
        if timeout <= 0 or start_timeout <= 0:
            raise ValueError("timeout and start_timeout must be > 0 seconds")
        _mcp()  # a missing extra fails here, where the server is configured
        self.name = name
        """Names the server in errors and prefixes its tools when names collide."""
        self.allow: frozenset[str] | None = frozenset(allow) if allow is not None else None
        """Only these tools are offered (``None``: all)."""
        self.deny: frozenset[str] = frozenset(deny)
        """These tools are never offered."""
        self.timeout = timeout
        """Seconds one tool call may take before the model gets a timeout error."""
        self.start_timeout = start_timeout
        """Seconds connecting and listing may take before the agent's start fails."""
        self.tools: list[MCPTool] = []
        """The tools offered, once started (filtered by ``allow``/``deny``)."""
        self._session: ClientSession | None = None
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"

    @property
    def running(self) -> bool:
        """True between a successful :meth:`start` and :meth:`stop` (a server that exited meanwhile
        still counts until then: its calls fail with an error result)."""
        return self._session is not None and self._task is not None and not self._task.done()

    def _transport(self) -> contextlib.AbstractAsyncContextManager[Any]:
        """The ``mcp`` client transport: an async context giving (read stream, write stream, ...)."""
        raise NotImplementedError

    async def start(self) -> list[MCPTool]:
        """Connect, initialize and list the tools (bounded by ``start_timeout``); idempotent.

        Raises :class:`MCPError` when the server cannot be reached, fails the handshake or is slow.
        """
        if self.running:
            return self.tools
        await self.stop()
        self._stop = asyncio.Event()
        ready: asyncio.Future[list[Any]] = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._hold(ready), name=f"mcp-server-{self.name}")
        try:
            listed = await asyncio.wait_for(asyncio.shield(ready), self.start_timeout)
        except TimeoutError:
            await self.stop()
            raise MCPError(f"MCP server {self.name!r} did not start within {self.start_timeout}s") from None
        except Exception as exc:
            await self.stop()
            raise MCPError(f"MCP server {self.name!r} failed to start: {_describe(exc)}") from exc
        self.tools = [MCPTool(self, t) for t in listed if self._offered(t.name)]
        return self.tools

    def _offered(self, name: str) -> bool:
        return (self.allow is None or name in self.allow) and name not in self.deny

    async def _hold(self, ready: asyncio.Future[list[Any]]) -> None:
        """The connection's own task: the ``mcp`` contexts are entered and left in it, as anyio requires."""
        mcp = _mcp()
        try:
            async with self._transport() as streams, mcp.ClientSession(streams[0], streams[1]) as session:
                await session.initialize()
                listed: list[Any] = []
                cursor: str | None = None
                while True:
                    params = mcp.types.PaginatedRequestParams(cursor=cursor) if cursor else None
                    page = await session.list_tools(params=params)
                    listed.extend(page.tools)
                    if len(listed) > MAX_TOOLS:
                        raise MCPError(f"it lists more than {MAX_TOOLS} tools")
                    cursor = page.next_cursor
                    if not cursor:
                        break
                self._session = session
                ready.set_result(listed)
                await self._stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else MCPError("cancelled while starting"))
            elif not isinstance(exc, asyncio.CancelledError):
                log.warning("MCP server %r: connection ended: %s", self.name, _describe(exc))
            if isinstance(exc, asyncio.CancelledError):
                raise
        finally:
            self._session = None

    async def stop(self) -> None:
        """Close the session and the transport (a stdio server's process is ended); idempotent."""
        task, self._task = self._task, None
        self._stop.set()
        if task is None:
            return
        try:
            await asyncio.wait_for(asyncio.shield(task), 5.0)
        except TimeoutError:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        except BaseException:
            log.debug("MCP server %r: error while stopping", self.name, exc_info=True)

    async def call(self, tool: str, arguments: Mapping[str, Any]) -> ToolOutput:
        """Call ``tool``; every failure (tool error, protocol error, exit, timeout) is an error output."""
        session, task = self._session, self._task
        where = f"MCP tool {tool!r} (server {self.name!r})"
        if session is None or task is None or task.done():
            return ToolOutput(f"Error: {where} is unavailable: the server is not running", is_error=True)
        call = asyncio.ensure_future(session.call_tool(tool, dict(arguments), read_timeout_seconds=self.timeout))
        done, _ = await asyncio.wait({call, task}, timeout=self.timeout, return_when=asyncio.FIRST_COMPLETED)
        if call not in done:
            call.cancel()
            with contextlib.suppress(BaseException):
                await call
            if task in done:
                return ToolOutput(f"Error: {where} failed: the server exited during the call", is_error=True)
            return ToolOutput(f"Error: {where} timed out after {self.timeout}s", is_error=True)
        try:
            result = call.result()
        except Exception as exc:
            return ToolOutput(f"Error: {where} failed: {_describe(exc)}", is_error=True)
        return _output(where, result)


class MCPServerStdio(MCPServer):
    """An MCP server the agent launches as a process and talks to over its stdin/stdout.

    ``env`` is merged over the ``mcp`` package's safe default environment (not the whole of
    ``os.environ``); ``cwd`` is the process's working directory. The process's stderr is the
    agent process's. ``name`` defaults to the command's file name.
    """

    def __init__(
        self,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        name: str | None = None,
        allow: Iterable[str] | None = None,
        deny: Iterable[str] = (),
        timeout: float = 30.0,
        start_timeout: float = 30.0,
    ) -> None:
        default = re.sub(r"[^A-Za-z0-9_-]", "_", command.replace("\\", "/").rsplit("/", 1)[-1])[:32] or "stdio"
        super().__init__(name or default, allow=allow, deny=deny, timeout=timeout, start_timeout=start_timeout)
        self.command = command
        """The executable."""
        self.args = list(args)
        """Its arguments."""
        self.env = dict(env) if env is not None else None
        """Extra environment variables."""
        self.cwd = cwd
        """Working directory (``None``: the agent's)."""

    def _transport(self) -> contextlib.AbstractAsyncContextManager[Any]:
        stdio = require("mcp", "mcp.client.stdio")[0]
        params = stdio.StdioServerParameters(command=self.command, args=self.args, env=self.env, cwd=self.cwd)
        cm: contextlib.AbstractAsyncContextManager[Any] = stdio.stdio_client(params)
        return cm


class MCPServerStreamableHttp(MCPServer):
    """An MCP server at ``url`` over the streamable HTTP transport; ``headers`` go with every request
    (e.g. ``{"Authorization": "Bearer ..."}``). ``name`` defaults to the URL's host."""

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        name: str | None = None,
        allow: Iterable[str] | None = None,
        deny: Iterable[str] = (),
        timeout: float = 30.0,
        start_timeout: float = 30.0,
    ) -> None:
        if not re.match(r"https?://", url):
            raise ValueError(f"MCP server URL {url!r} must start with http:// or https://")
        host = re.sub(r"^https?://([^/:]*).*$", r"\1", url)
        default = re.sub(r"[^A-Za-z0-9_-]", "_", host)[:32] or "http"
        super().__init__(name or default, allow=allow, deny=deny, timeout=timeout, start_timeout=start_timeout)
        self.url = url
        """The endpoint (e.g. ``http://127.0.0.1:8000/mcp``)."""
        self.headers = dict(headers or {})
        """Sent with every request."""

    @contextlib.asynccontextmanager
    async def _transport(self) -> AsyncIterator[Any]:
        httpx2, http = require("mcp", "httpx2", "mcp.client.streamable_http")
        timeout = httpx2.Timeout(self.start_timeout, read=max(self.timeout, 300.0))
        async with (
            httpx2.AsyncClient(headers=self.headers, timeout=timeout) as client,
            http.streamable_http_client(self.url, http_client=client) as streams,
        ):
            yield streams


class MCPTool(Tool):
    """A tool of an MCP server, offered to the model like a Python :class:`~agentsdk.tools.Tool`.

    :attr:`name` is the MCP name, or ``server__tool`` when another server has the same one;
    :attr:`mcp_name` is always the server's. :attr:`parameters` is the server's ``inputSchema``
    (the server validates the arguments)."""

    def __init__(self, server: MCPServer, listed: Any, *, name: str | None = None) -> None:
        self.server = server
        """The server that runs it."""
        self.mcp_name: str = listed.name
        """Its name on the server."""
        self.name = name or listed.name
        self.description = listed.description or ""
        self.injected = {}
        self.parameters = dict(listed.input_schema or {"type": "object"})
        self.parameters.setdefault("properties", {})
        self._listed = listed

        async def call(**arguments: Any) -> ToolOutput:
            return await server.call(self.mcp_name, arguments)

        self.func = call

    def __repr__(self) -> str:
        return f"MCPTool(name={self.name!r}, server={self.server.name!r})"

    def renamed(self, name: str) -> MCPTool:
        """The same tool offered under ``name``."""
        return MCPTool(self.server, self._listed, name=name)

    async def invoke(self, arguments: Mapping[str, Any], dependencies: Mapping[Any, Any] | None = None) -> ToolOutput:
        """Send ``tools/call``; a failure of any kind is an error :class:`ToolOutput`, never a raise."""
        return await self.server.call(self.mcp_name, arguments)


def mcp_tools(servers: Sequence[MCPServer], reserved: Iterable[str] = ()) -> list[MCPTool]:
    """The started ``servers``' tools under the names the model sees: the MCP name, or
    ``server__tool`` when two servers (or a name in ``reserved``, the agent's own tools) share it."""
    counts: dict[str, int] = {}
    for server in servers:
        for t in server.tools:
            counts[t.mcp_name] = counts.get(t.mcp_name, 0) + 1
    taken = set(reserved)
    out: list[MCPTool] = []
    for server in servers:
        for t in server.tools:
            clash = counts[t.mcp_name] > 1 or t.mcp_name in taken
            out.append(t.renamed(f"{server.name}{PREFIX_SEPARATOR}{t.mcp_name}") if clash else t)
    names = [t.name for t in out]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise MCPError(f"two MCP servers share a name and a tool ({duplicates}); give the servers distinct names")
    return out


def _output(where: str, result: Any) -> ToolOutput:
    """A ``CallToolResult`` as the text the model reads (images and other binaries as a placeholder
    line: tool results are text), its structured content as the value."""
    parts = [_render_block(block) for block in getattr(result, "content", None) or []]
    structured = getattr(result, "structured_content", None)
    if not parts and structured is not None:
        parts = [render_result(structured)]
    text = "\n".join(parts)
    if getattr(result, "is_error", False):
        return ToolOutput(f"Error: {where} failed: {text or 'no details'}", is_error=True)
    return ToolOutput(text, value=structured if structured is not None else text)


def _render_block(block: Any) -> str:
    kind = getattr(block, "type", "")
    if kind == "text":
        return str(block.text)
    if kind in ("image", "audio"):
        size = len(block.data) * 3 // 4 - str(block.data)[-2:].count("=")  # decoded size of the base64
        return f"[{kind} {block.mime_type}, {size} bytes: not shown, tool results are text]"
    if kind == "resource_link":
        return f"[resource {block.uri}]"
    if kind == "resource":
        resource = block.resource
        text = getattr(resource, "text", None)
        return text if text is not None else f"[resource {resource.uri}: binary, not shown]"
    return f"[{kind or 'unknown'} content: not shown]"


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_describe(e) for e in exc.exceptions)
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
