"""Agent-to-agent (A2A) calls, one module per area: the rules of a call (:mod:`.rules`), discovery
(:mod:`.discovery`), invocation (:mod:`.invocation`), outside A2A agents (:mod:`.outside`), executions
(:mod:`.executions`) and call tokens (:mod:`.tokens`). :class:`A2AOps` is what the servicer calls.

Call tokens never enter the channel: the dispatch is part of the channel's WAL, which
every member (the caller too) and the operator read, so it names only the execution;
its target asks for a token with ``RefreshCallToken{execution_id}`` when it makes a
nested call. Tokens are stored as hashes while their execution runs
(:mod:`hubsvc.core.call_tokens`), so a token one replica issued verifies on any other; an
execution cannot outlive the hub process that runs it (its caller waits on an RPC there),
so running executions left by a stopped hub are marked failed at start, which drops their
tokens.
"""

from __future__ import annotations

from agentnet.v1 import a2a_pb2, hub_pb2, identity_pb2

from hubsvc.core.hub import HubCore
from hubsvc.core.operations.a2a.discovery import DEFAULT_DISCOVER_LIMIT, discover
from hubsvc.core.operations.a2a.executions import ExecutionOps
from hubsvc.core.operations.a2a.invocation import Invocations
from hubsvc.core.operations.a2a.outside import OutsideAgents
from hubsvc.core.operations.a2a.rules import (
    CANCEL_REASON,
    CANCELED_TEXT,
    RESERVED_HEADER_PREFIX,
    check_custom_headers,
    matches_any,
    may_call,
)
from hubsvc.core.operations.a2a.tokens import CallTokenOps
from hubsvc.core.operations.messages import MessageOps

__all__ = [
    "CANCELED_TEXT",
    "CANCEL_REASON",
    "DEFAULT_DISCOVER_LIMIT",
    "RESERVED_HEADER_PREFIX",
    "A2AOps",
    "check_custom_headers",
    "matches_any",
    "may_call",
]


class A2AOps:
    """DiscoverAgents, InvokeAgent, executions, call tokens and outside agents (SetA2ASettings is in agents.py)."""

    def __init__(self, core: HubCore, messages: MessageOps) -> None:
        self.core = core
        self.outside = OutsideAgents(core)
        self.tokens = CallTokenOps(core)
        self.invocations = Invocations(core, messages, self.outside, self.tokens)
        self.executions = ExecutionOps(core, self.outside)

    async def register_remote(
        self, request: hub_pb2.RegisterRemoteA2AAgentRequest, *, by_operator: bool
    ) -> tuple[identity_pb2.AgentRecord, str]:
        """Fetch an outside agent's card and register it as a remote_agent identity."""
        return await self.outside.register(request, by_operator=by_operator)

    async def refresh_remote(self, caller: str) -> identity_pb2.AgentRecord:
        """Fetch the caller's card again and replace what its identity took from it."""
        return await self.outside.refresh(caller)

    async def discover(self, caller: str, request: hub_pb2.DiscoverAgentsRequest) -> list[a2a_pb2.DiscoveredAgent]:
        """The A2A-enabled agents of the caller's project the caller may invoke, filtered."""
        return await discover(self.core, caller, request)

    async def invoke(self, caller: str, request: hub_pb2.InvokeAgentRequest) -> hub_pb2.InvokeAgentResponse:
        """Run one call and wait for its outcome (a ``detach`` call returns once started)."""
        return await self.invocations.invoke(caller, request)

    async def get_execution(self, viewer: str, execution_id: str) -> a2a_pb2.Execution:
        """One execution of a root session ``viewer`` took part in (NOT_FOUND otherwise)."""
        return await self.executions.get(viewer, execution_id)

    async def cancel(self, caller: str, execution_id: str) -> a2a_pb2.Execution:
        """Cancel a running execution ``caller`` made; it ends CANCELED."""
        return await self.executions.cancel(caller, execution_id)

    async def list_executions(self, viewer: str | None, root_session_id: str, limit: int) -> list[a2a_pb2.Execution]:
        """An execution tree the viewer took part in (any tree, or every execution, for the operator: None)."""
        return await self.executions.list(viewer, root_session_id, limit)

    async def refresh(self, caller: str, token: str, execution_id: str = "") -> tuple[str, float]:
        """A fresh call token for a running execution the caller answers, or in exchange for ``token``."""
        return await self.tokens.refresh(caller, token, execution_id)
