"""AgentToAgent: discover and invoke agents through the hub, list call trees."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from agentnet.v1 import a2a_pb2, hub_pb2

from agentsdk.a2a.context import Dispatch, current_dispatch
from agentsdk.rpc import HubRpc
from agentsdk.tls import TlsSetting
from agentsdk.transport import ClosedOnExit, HubConnection
from netkernel.channel_types import DEFAULT_WAIT_SECONDS
from netkernel.errors import TokenExpired
from netkernel.wire import INVOCATION_STATUS, InvocationStatus

_RPC_MARGIN = 30.0  # seconds the RPC deadline exceeds the call's own timeout


@dataclass(frozen=True)
class DiscoveredAgent:
    """An agent the caller may invoke."""

    agent_id: str
    name: str
    description: str
    skills: tuple[str, ...]
    capabilities: tuple[str, ...]
    input_modes: tuple[str, ...]


@dataclass(frozen=True)
class AgentResponse:
    """The outcome of :meth:`AgentToAgent.invoke_agent`."""

    status: InvocationStatus
    """"completed", "input-required" (``result`` is the callee's question) or "failed" (see ``error``)."""
    result: str = ""
    error: str = ""
    execution_id: str = ""
    """The child execution recording the call."""
    root_session_id: str = ""


@dataclass(frozen=True)
class Execution:
    """One recorded A2A call (a node of a call tree)."""

    execution_id: str
    parent_execution_id: str
    """"" for a top-level call."""
    root_session_id: str
    caller_id: str
    target_id: str
    skill: str
    status: InvocationStatus
    channel_id: str
    started_at: datetime | None
    ended_at: datetime | None
    error: str


def _time(message: a2a_pb2.Execution, name: str) -> datetime | None:
    return getattr(message, name).ToDatetime() if message.HasField(name) else None  # type: ignore[arg-type]


class AgentToAgent(ClosedOnExit):
    """Client of the hub's A2A RPCs for one identity (its credential is ``auth_token``).

    Agents use the pre-authenticated ``client.a2a`` instead of building one. Inside the
    answer to an A2A call, :meth:`invoke_agent` makes a child call of it, refreshing an
    expired call token transparently.
    """

    def __init__(
        self,
        hub_url: str = "",
        auth_token: str = "",
        *,
        oe_url: str = "",
        connection: HubConnection | None = None,
        tls: TlsSetting = None,
    ) -> None:
        """Connect to the hub at ``hub_url`` (``host:port``; ``oe_url`` is the same, by its other name),
        over TLS as ``tls`` says (:mod:`agentsdk.tls`; ignored with ``connection``)."""
        if hub_url and oe_url and hub_url != oe_url:
            raise ValueError(f"AgentToAgent got hub_url={hub_url!r} and oe_url={oe_url!r}; give one of them.")
        target = hub_url or oe_url
        if not target and connection is None:
            raise ValueError("AgentToAgent needs the hub's address: AgentToAgent(hub_url) or AgentToAgent(oe_url=...).")
        self._owned = connection is None
        self._connection = connection or HubConnection(target, tls)
        self._rpc = HubRpc(self._connection, auth_token)

    async def close(self) -> None:
        """Close the connection if this client opened it."""
        if self._owned:
            await self._connection.close()

    async def discover_agents(
        self,
        project_id: str = "",
        skills: Sequence[str] | None = None,
        capabilities: Sequence[str] | None = None,
        input_modes: Sequence[str] | None = None,
        limit: int = 50,
    ) -> list[DiscoveredAgent]:
        """Agents of your project you may invoke (the result may include yourself).

        Several values in one filter match any of them; several filters must all match.
        """
        request = hub_pb2.DiscoverAgentsRequest(
            project_id=project_id,
            skills=list(skills or ()),
            capabilities=list(capabilities or ()),
            input_modes=list(input_modes or ()),
            limit=limit,
        )
        response = await self._rpc.discover_agents(request)
        return [
            DiscoveredAgent(
                a.agent_id, a.name, a.description, tuple(a.skills), tuple(a.capabilities), tuple(a.input_modes)
            )
            for a in response.agents
        ]

    async def invoke_agent(
        self,
        agent_id: str,
        message: str,
        skill: str = "",
        timeout: float | None = None,
        custom_headers: Mapping[str, str] | None = None,
        *,
        root_session_id: str = "",
    ) -> AgentResponse:
        """Call an agent (id or name, or the http(s) URL of an outside A2A agent, which the hub calls for
        you: docs/a2a.md "Calling outside A2A agents") and wait for its answer (``timeout`` seconds;
        None = the hub's 300).

        Inside the answer to an A2A call, the call is recorded as its child. Elsewhere
        ``root_session_id`` groups the call under a session of yours ("" = a new one).
        """
        request = hub_pb2.InvokeAgentRequest(
            agent_id=agent_id,
            message=message,
            skill=skill,
            custom_headers=dict(custom_headers or {}),
            root_session_id=root_session_id,
        )
        if timeout is not None:
            request.timeout_seconds = timeout
        deadline = (timeout if timeout is not None else DEFAULT_WAIT_SECONDS) + _RPC_MARGIN
        dispatch = current_dispatch()
        if dispatch is not None:
            request.call_token = dispatch.call_token or await self._new_call_token(dispatch)
        try:
            response = await self._rpc.invoke_agent(request, timeout=deadline)
        except TokenExpired:
            if dispatch is None:
                raise
            request.call_token = await self._new_call_token(dispatch, expired=request.call_token)
            response = await self._rpc.invoke_agent(request, timeout=deadline)
        return AgentResponse(
            INVOCATION_STATUS.name_of(response.status, "failed"),
            response.result,
            response.error,
            response.execution_id,
            response.root_session_id,
        )

    async def refresh_call_token(self, call_token: str = "", *, execution_id: str = "") -> tuple[str, str]:
        """A fresh call token and its RFC 3339 expiry: for the running execution you answer
        (``execution_id``), or in exchange for ``call_token``. Set exactly one."""
        request = hub_pb2.RefreshCallTokenRequest(call_token=call_token, execution_id=execution_id)
        response = await self._rpc.refresh_call_token(request)
        return response.call_token, response.expires_at.ToJsonString()

    async def _new_call_token(self, dispatch: Dispatch, expired: str = "") -> str:
        """Ask the hub for a token of the execution ``dispatch`` runs as (to replace ``expired``, or
        the first), and keep it on the dispatch. Nested calls made at once ask once: a call that
        finds a token another one got meanwhile uses it."""
        async with dispatch.call_token_lock:
            if dispatch.call_token and dispatch.call_token != expired:
                return dispatch.call_token
            dispatch.call_token, dispatch.call_token_expires_at = await self.refresh_call_token(
                execution_id=dispatch.execution_id
            )
            return dispatch.call_token

    async def list_executions(self, root_session_id: str = "", limit: int = 100) -> list[Execution]:
        """The executions of a root session you took part in ("" = of all of them), in start order."""
        request = hub_pb2.ListExecutionsRequest(root_session_id=root_session_id, limit=limit)
        response = await self._rpc.list_executions(request)
        return [
            Execution(
                e.execution_id,
                e.parent_execution_id,
                e.root_session_id,
                e.caller_id,
                e.target_id,
                e.skill,
                INVOCATION_STATUS.name_of(e.status, "failed"),
                e.channel_id,
                _time(e, "started_at"),
                _time(e, "ended_at"),
                e.error,
            )
            for e in response.executions
        ]
