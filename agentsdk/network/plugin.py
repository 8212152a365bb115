"""NetworkPlugin: the five identity-level network tools an agent gets on registration.

``peers``, ``channels``, ``tasks``, ``context`` and ``delegate`` take the actions
and arguments of their pydantic models in :mod:`netkernel.tool_schemas` (shared
with the hub; listed in ``docs/network.md``). Each call validates
locally, then runs on the hub through the ``CallTool`` RPC, so a Python agent and
a Go or TypeScript bridge see the same tools. ``context(scope="knowledge")`` is
answered from the agent's own KnowledgeStore. The plugin also adds the
:class:`NetworkContextPolicy` prompt prefix.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from agentnet.v1 import task_pb2
from pydantic import BaseModel, ValidationError

from agentsdk._assembly import AssemblyContext
from agentsdk.events import BaseEvent
from agentsdk.network.agent_client import Task
from agentsdk.network.deps import AGENT_CLIENT_DEP, CHANNEL_DEP, TASK_DEP
from agentsdk.network.turn_context import current_cause
from agentsdk.tools import Tool, ToolOutput
from netkernel.errors import AgentNetError, FailedPrecondition, InvalidArgument
from netkernel.tool_schemas import PLUGIN_TOOLS, ContextArgs, TasksArgs, description, parameters_schema

if TYPE_CHECKING:
    from agentsdk.agent import Agent
    from agentsdk.network.agent_client import AgentClient
    from agentsdk.network.clients import NetworkClient


class HubTool(Tool):
    """A network tool whose schema is a shared pydantic model and whose body runs on the hub."""

    def __init__(self, name: str, args_model: type[BaseModel]) -> None:
        # Not a wrapped Python function: schema and behaviour come from the shared model.
        self.name = name
        self.description = description(args_model)
        self.args_model = args_model
        self.parameters = parameters_schema(args_model)
        self.injected = {"client": AGENT_CLIENT_DEP, "channel": CHANNEL_DEP, "task": TASK_DEP}
        self.func = self._unsupported

    @staticmethod
    def _unsupported(*args: Any, **kwargs: Any) -> Any:
        raise TypeError("network tools run through invoke() with an agent client dependency")

    async def invoke(self, arguments: Mapping[str, Any], dependencies: Mapping[Any, Any] | None = None) -> ToolOutput:
        """Validate, then run on the hub (errors come back as tool errors the model can read)."""
        if (dependencies or {}).get(AGENT_CLIENT_DEP) is None:
            return ToolOutput(
                f"Error: {self.name} needs a network connection (register the agent with a hub: hc.register(agent)).",
                True,
            )
        try:
            result = await self.run(arguments, dependencies)
        except InvalidToolArguments as err:
            return ToolOutput(f"Error: {err.message}", True)
        except AgentNetError as err:
            return ToolOutput(f"Error ({err.reason}): {err.message}", True)
        return ToolOutput(json.dumps(result, ensure_ascii=False), value=result)

    async def run(self, arguments: Mapping[str, Any], dependencies: Mapping[Any, Any] | None = None) -> Any:
        """Validate and run on the hub; returns the JSON result and raises the hub's refusal as the
        :class:`~netkernel.errors.AgentNetError` it is (invalid arguments: :class:`InvalidToolArguments`).

        ``dependencies`` must hold the identity's client under ``AGENT_CLIENT_DEP`` (any
        :class:`~agentsdk.network.NetworkClient`: an agent's, or a person's as ``agentnet mcp`` serves)."""
        deps = dependencies or {}
        client: NetworkClient | None = deps.get(AGENT_CLIENT_DEP)
        if client is None:
            raise FailedPrecondition(f"{self.name} needs a network connection (a registered identity's client).")
        try:
            args = self.args_model.model_validate(dict(arguments))
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in exc.errors())
            raise InvalidToolArguments(f"invalid arguments for tool {self.name!r}: {problems}") from None
        channel = deps.get(CHANNEL_DEP)
        task = deps.get(TASK_DEP)
        if isinstance(args, ContextArgs) and args.action == "search" and args.scope == "knowledge":
            return await search_knowledge(deps, args.query or "", args.limit)
        result = await client.call_tool(
            self.name,
            args.model_dump(exclude_none=True),
            channel_id=getattr(channel, "channel_id", "") or "",
            task_id=getattr(task, "task_id", "") or "",
            causation_id=current_cause(),
        )
        if isinstance(args, TasksArgs) and isinstance(task, Task):
            await _mirror_task_report(task, args)
        return result


class InvalidToolArguments(InvalidArgument):
    """A network tool's arguments do not fit its schema (checked before anything reaches the hub)."""


async def _mirror_task_report(task: Task, args: TasksArgs) -> None:
    """The model reported on the running task through the hub: the SDK's Task learns it too
    (so leaving ``agent.task(...)`` does not report a second time) and the agent's observers see it."""
    if args.action == "progress":
        await task._reported(task_pb2.TASK_EVENT_KIND_PROGRESS, args.payload)
    elif args.action == "complete":
        await task._reported(task_pb2.TASK_EVENT_KIND_COMPLETED, args.result)


async def search_knowledge(dependencies: Mapping[Any, Any], query: str, limit: int) -> dict[str, Any]:
    """Case-insensitive substring search over the agent's own KnowledgeStore."""
    from agentsdk.knowledge import KnowledgeStore

    store = dependencies.get(KnowledgeStore)
    if store is None:
        raise _NoStore()
    needle = query.lower()
    hits: list[dict[str, str]] = []
    pending = ["/"]
    while pending and len(hits) < limit:
        directory = pending.pop()
        for entry in await store.list(directory):
            path = directory.rstrip("/") + "/" + entry
            if entry.endswith("/"):
                pending.append(path)
                continue
            text = await store.read(path)
            at = text.lower().find(needle)
            if needle and at >= 0:
                hits.append({"path": path, "excerpt": text[max(0, at - 80) : at + len(query) + 80]})
                if len(hits) >= limit:
                    break
    return {"excerpts": hits}


class _NoStore(FailedPrecondition):
    def __init__(self) -> None:
        super().__init__(
            "context(scope='knowledge') needs a KnowledgeStore: give the agent knowledge=KnowledgeConfig(...)"
        )


class NetworkContextPolicy:
    """Tells the model who it is on the network and how to use the network tools."""

    def __init__(self, client: AgentClient) -> None:
        self.client = client

    async def apply(
        self, prompts: list[str], events: list[BaseEvent], context: AssemblyContext
    ) -> tuple[list[str], list[BaseEvent]]:
        """Add the network prefix to the prompts."""
        note = (
            f"You are {self.client.name} (agent id {self.client.agent_id}) on an agent network. Your reply is posted "
            "to the channel you were addressed in. Network tools: peers (find and describe other agents), channels "
            "(list, open, inspect, close channels), tasks (report on your task, observe others), context (search "
            "past messages), delegate (ask another agent one question and get its answer)."
        )
        return [*prompts, note], events


class NetworkPlugin:
    """Adds (and removes) the five plugin tools and the network prompt prefix on an Agent."""

    def __init__(self, client: AgentClient) -> None:
        self.client = client
        self.tools = [HubTool(name, model) for name, model in PLUGIN_TOOLS.items()]
        self.policy = NetworkContextPolicy(client)

    def register(self, agent: Agent) -> None:
        """Attach the tools and the prompt prefix to ``agent``."""
        agent.tools.extend(self.tools)
        agent.assembly.insert(0, self.policy)

    def unregister(self, agent: Agent) -> None:
        """Remove exactly what :meth:`register` added."""
        agent.tools[:] = [t for t in agent.tools if t not in self.tools]
        agent.assembly[:] = [p for p in agent.assembly if p is not self.policy]
