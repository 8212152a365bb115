"""Run a LangGraph agent on the network: :class:`App` (A2A tools, a checkpointer, the hub identity).

Needs ``langgraph`` and ``langchain-core``: ``pip install 'agent-network[langgraph]'``. The shape::

    app = App(app_name="router-agent")

    @app.entrypoint
    def build_agent():
        llm = app.llm(ChatOpenAI(model="gpt-5.4"))
        a2a = app.a2a_tools()
        llm_with_tools = llm.bind_tools(app.get_tool_schemas() + a2a)
        tool_node = ToolNode(app.get_tools() + a2a)
        graph = StateGraph(MessagesState)  # ... nodes and edges
        return graph.compile(checkpointer=app.checkpointer())

    app.run()  # or: async with app: ...

Starting the app connects to the hub, registers (or resumes) the identity ``app_name`` with the
``a2a:`` settings of ``agent.yaml``, then calls the entrypoint, so the entrypoint may use
everything that needs the connected identity (:meth:`App.a2a_tools`, ``app.runtime.a2a``).
Every A2A call and channel message the identity receives then runs the graph with
``{"messages": [HumanMessage(text)]}`` (thread id: the channel id) and is answered with the
content of the last message of the resulting state. See ``docs/a2a.md``.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from agentsdk.a2a.client import AgentToAgent
from agentsdk.a2a.context import Dispatch, dispatch_scope
from agentsdk.a2a.settings import A2ASettings
from agentsdk.agent import Agent
from agentsdk.config import ScriptedConfig
from agentsdk.langchain import to_langchain_tools
from agentsdk.network.agent_client import AgentClient, accept_invite
from agentsdk.network.hub_client import HubClient
from agentsdk.network.service import stop_signal
from agentsdk.tls import TlsSetting
from agentsdk.tools import ToolLike
from agentsdk.transport import HubConnection
from netkernel.envelope import EV_CHANNEL_INVITE, EV_TEXT, Envelope, text_envelope
from netkernel.extras import require
from netkernel.identity import Passport

if TYPE_CHECKING:
    from langchain_core.tools import StructuredTool
    from langgraph.checkpoint.memory import InMemorySaver

require("langgraph", "langgraph", "langchain_core")

log = logging.getLogger("agentnet.sdk.langgraph")

DEFAULT_HUB = "127.0.0.1:50051"
"""The hub address used when neither ``hub=`` nor ``AGENTNET_HUB`` gives one."""

F = TypeVar("F", bound=Callable[..., Any])
M = TypeVar("M")


class App:
    """A LangGraph agent as one network identity named ``app_name``.

    ``hub`` is the hub's ``host:port`` (default: env ``AGENTNET_HUB``, else ``127.0.0.1:50051``),
    read when the app starts. ``agent_yaml`` is read at start too: its ``a2a:`` section sets the
    identity's A2A settings (A2A stays disabled when the file does not exist). With
    ``credential_file`` the identity outlives the process (see ``HubClient.register``).
    ``passport`` sets the rest of the identity (e.g. ``project``); its name must be ``app_name``.
    ``tls`` connects over TLS / mTLS (:class:`~agentsdk.tls.TlsConfig`, or True for gRPC's default roots).
    """

    def __init__(
        self,
        app_name: str,
        *,
        hub: str | None = None,
        agent_yaml: str | os.PathLike[str] = "agent.yaml",
        credential_file: str | os.PathLike[str] | None = None,
        passport: Passport | None = None,
        tls: TlsSetting = None,
    ) -> None:
        if passport is not None and passport.name != app_name:
            raise ValueError(f"passport.name {passport.name!r} differs from app_name {app_name!r}; make them equal.")
        self.app_name = app_name
        self.passport = passport or Passport(name=app_name)
        self.agent_yaml = Path(agent_yaml)
        self.credential_file = credential_file
        self._hub_address = hub
        self._tls = tls
        self._builder: Callable[[], Any] | None = None
        self._tools: list[ToolLike] = []
        self._hub: HubClient | None = None
        self._client: AgentClient | None = None
        self._ready: asyncio.Event | None = None
        self.graph: Any = None
        """The compiled graph the entrypoint returned (None until started)."""

    # -- building -----------------------------------------------------------------------

    def entrypoint(self, builder: F) -> F:
        """Register the function that builds and returns the compiled graph (sync or async).

        It runs when the app starts, after the identity is connected. Returns ``builder`` unchanged.
        """
        self._builder = builder
        return builder

    def tool(self, function: F) -> F:
        """Register one of the app's own tools (a function with a docstring); returns it unchanged."""
        self._tools.append(function)
        return function

    def get_tools(self) -> list[StructuredTool]:
        """The app's own tools (:meth:`tool`) as LangChain ``StructuredTool``s, for ``ToolNode``."""
        dependencies = self._client.turn_dependencies() if self._client is not None else {}
        return to_langchain_tools(self._tools, dependencies=dependencies)

    def get_tool_schemas(self) -> list[StructuredTool]:
        """What ``llm.bind_tools`` takes for the app's own tools: the same ``StructuredTool``s as
        :meth:`get_tools` (``bind_tools`` reads their names, descriptions and JSON schemas)."""
        return self.get_tools()

    def llm(self, model: M) -> M:
        """A hook for the app's chat model: returns ``model`` unchanged (nothing is wrapped or tagged)."""
        return model

    def a2a_tools(self) -> list[StructuredTool]:
        """The LangChain tools ``discover_available_agents`` and ``invoke_a2a_agent`` of this identity;
        ``[]`` when its A2A is disabled, so binding them is safe in every agent.

        They act as the connected identity, so they exist once the app has started: call this
        inside the entrypoint. Before, it raises ``RuntimeError`` saying so.
        """
        client = self._require_client("app.a2a_tools()")
        return to_langchain_tools(client.a2a_tools())

    def checkpointer(self) -> InMemorySaver:
        """A new LangGraph ``InMemorySaver``: thread state (per channel) lives as long as the process."""
        from langgraph.checkpoint.memory import InMemorySaver

        return InMemorySaver()

    # -- the connected identity ---------------------------------------------------------

    @property
    def runtime(self) -> AgentClient:
        """The connected identity's client: ``runtime.a2a`` is its pre-authenticated
        :class:`~agentsdk.a2a.AgentToAgent` (None when A2A is disabled or unavailable).

        Raises ``RuntimeError`` before the app has started."""
        return self._require_client("app.runtime")

    @property
    def _runtime(self) -> AgentClient:
        """Same as :attr:`runtime` (the name used by other LangGraph agent runtimes)."""
        return self.runtime

    @property
    def a2a(self) -> AgentToAgent | None:
        """Shortcut for ``runtime.a2a``."""
        return self.runtime.a2a

    def _require_client(self, what: str) -> AgentClient:
        if self._client is None:
            raise RuntimeError(
                f"{what} needs the app's connected identity: call it inside the @app.entrypoint function "
                "(it runs after `await app.start()` / `app.run()` has connected to the hub), or after start."
            )
        return self._client

    # -- running ------------------------------------------------------------------------

    async def start(self) -> None:
        """Connect to the hub, register (or resume) the identity, build the graph, start answering."""
        if self._builder is None:
            raise RuntimeError("no entrypoint: decorate the function that builds the graph with @app.entrypoint.")
        if self._client is not None:
            raise RuntimeError(f"app {self.app_name!r} is already started.")
        target = self._hub_address or os.environ.get("AGENTNET_HUB") or DEFAULT_HUB
        settings = A2ASettings.from_yaml(self.agent_yaml) if self.agent_yaml.exists() else None
        self._ready = ready = asyncio.Event()  # made here: bound to the loop the app runs in
        self._hub = HubClient(HubConnection(target, self._tls))
        try:
            self._client = await self._hub.register(
                Agent(self.app_name, config=ScriptedConfig([])),  # placeholder: the graph answers, not this Agent
                self.passport,
                a2a=settings,
                attach_plugin=False,
                on_envelope=self._on_envelope,
                credential_file=self.credential_file,
            )
            graph = self._builder()
            self.graph = await graph if inspect.isawaitable(graph) else graph
        except BaseException:
            await self.stop()
            raise
        ready.set()

    async def stop(self) -> None:
        """Disconnect the identity and close the hub connection (the identity stays registered)."""
        hub, self._hub, self._client, self._ready = self._hub, None, None, None
        if hub is not None:
            await hub.close()

    async def __aenter__(self) -> App:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        """:meth:`stop`."""
        await self.stop()

    def run(self) -> None:
        """Start, answer until SIGINT or SIGTERM, then stop (a blocking helper for scripts)."""

        async def serve() -> None:
            stopped = stop_signal()
            async with self:
                await stopped

        asyncio.run(serve())

    async def ainvoke(self, text: str, thread_id: str) -> str:
        """Run the graph on one user message in ``thread_id``; the content of the last message."""
        from langchain_core.messages import HumanMessage

        state = await self.graph.ainvoke({"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": thread_id}})
        return _content_text(state["messages"][-1].content)

    async def _on_envelope(self, envelope: Envelope) -> None:
        ready = self._ready
        if ready is None:
            return
        await ready.wait()  # a resumed identity's backlog may arrive before register() returns
        client = self._client
        if client is None or envelope.sender_id == client.agent_id:
            return
        if envelope.event_type == EV_CHANNEL_INVITE:
            await accept_invite(client, envelope.channel_id)
            return
        if envelope.event_type != EV_TEXT or not await client.can_send(
            envelope.channel_id, causation_id=envelope.envelope_id
        ):
            return
        dispatch = Dispatch.from_envelope(envelope)
        with dispatch_scope(dispatch):
            try:
                answer = await self.ainvoke(dispatch.message if dispatch else envelope.text, envelope.channel_id)
            except Exception as exc:
                if dispatch is None:
                    raise
                log.exception("app %s failed to answer A2A call %s", self.app_name, dispatch.execution_id)
                await client.send_envelope(dispatch.failure(client.agent_id, exc))
                return
        if dispatch is not None:
            reply = dispatch.reply(client.agent_id, answer)
        else:
            reply = text_envelope(envelope.channel_id, client.agent_id, answer, causation_id=envelope.envelope_id)
        await client.send_envelope(reply)


def _content_text(content: Any) -> str:
    """A LangChain message content as text (string content, or the text parts of a list)."""
    if isinstance(content, str):
        return content
    parts = [p.get("text", "") if isinstance(p, dict) else str(p) for p in content]
    return "".join(parts)
