"""CallTool: the network tools as JSON in, JSON out, over the typed operations.

A bridge's LLM calls the same tools a Python agent has (``peers``, ``channels``,
``tasks``, ``context``, ``delegate`` and the adapter tool ``say``): the arguments are
validated with the pydantic models of :mod:`netkernel.tool_schemas`, the matching
operation runs, and its result is shaped as the tool's JSON answer.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from agentnet.v1 import hub_pb2, task_pb2
from google.protobuf.json_format import MessageToDict
from pydantic import ValidationError

from hubsvc.core.operations import Operations
from netkernel.errors import FailedPrecondition, InvalidArgument
from netkernel.tool_schemas import (
    ALL_TOOLS,
    PLUGIN_TOOLS,
    ChannelsArgs,
    ContextArgs,
    DelegateArgs,
    PeersArgs,
    SayArgs,
    TasksArgs,
)
from netkernel.wire import CHANNEL_STATE, PASSPORT_KIND, TASK_STATE, dumps_json, parse_json_object


def _to_dict(message: Any) -> dict[str, Any]:
    return MessageToDict(message, preserving_proto_field_name=True)


@dataclass(frozen=True)
class ToolTurn:
    """Where the caller's turn is: its channel, its task and the envelope it answers ("" = none)."""

    channel_id: str = ""
    task_id: str = ""
    causation_id: str = ""


class ToolCalls:
    """Runs one tool call for a caller (in the context of a current channel and task, if any)."""

    def __init__(self, ops: Operations) -> None:
        self.ops = ops
        self._plugin_tools: dict[str, Callable[[str, Any, ToolTurn], Awaitable[Any]]] = {
            "peers": self._tool_peers,
            "channels": self._tool_channels,
            "tasks": self._tool_tasks,
            "context": self._tool_context,
            "delegate": self._tool_delegate,
        }
        """The network tools by name (``say``, the adapter tool, is answered with its envelope)."""
        if set(self._plugin_tools) != set(PLUGIN_TOOLS):
            raise RuntimeError(
                f"tool handlers {sorted(self._plugin_tools)} do not match PLUGIN_TOOLS {sorted(PLUGIN_TOOLS)}"
            )

    async def call_tool(
        self, caller: str, name: str, arguments_json: str, channel_id: str, task_id: str, causation_id: str = ""
    ) -> str:
        """Validate JSON arguments against the tool's schema, run it, return its JSON result.

        ``causation_id`` is the envelope the caller's turn answers: ``delegate`` counts one
        hop more than its depth (as the Delegate RPC does), ``say`` carries it on."""
        model = ALL_TOOLS.get(name)
        if model is None:
            raise InvalidArgument(f"unknown tool {name!r}; use one of {sorted(ALL_TOOLS)} (see ListTools).")
        raw = parse_json_object(arguments_json, "arguments_json", self.ops.core.options.max_json_depth)
        try:
            args = model.model_validate(raw)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in exc.errors())
            raise InvalidArgument(f"bad arguments for {name}: {problems}") from None
        if name == "say":
            assert isinstance(args, SayArgs)
            wire = await self.ops.messages.say(
                caller,
                args.content,
                args.audience or [],
                args.channel_id or channel_id,
                causation_id=causation_id or None,
            )
            return dumps_json({"envelope_id": wire.envelope_id, "channel_id": wire.channel_id, "seq": wire.seq})
        result = await self._plugin_tools[name](caller, args, ToolTurn(channel_id, task_id, causation_id))
        return dumps_json(result)

    async def _tool_peers(self, caller: str, args: PeersArgs, turn: ToolTurn) -> Any:
        if args.action == "describe":
            if not args.name:
                raise InvalidArgument("peers(action='describe') needs name.")
            r = await self.ops.agents.with_observed(await self.ops.agents.describe_agent(args.name))
            return {
                "agent_id": r.agent_id,
                # the same short kind names as find ("agent", "human", "remote_agent")
                "passport": {**_to_dict(r.passport), "kind": PASSPORT_KIND.name_of(r.passport.kind, "agent")},
                "resume": _to_dict(r.resume),
                "skill_md": r.skill_md,
            }
        peers, _ = await self.ops.agents.find_agents(
            caller,
            capability=args.capability or "",
            query=args.query or "",
            sort_by=args.sort_by or "",
            limit=args.limit,
            exclude_self=True,
        )
        return {
            "peers": [
                {
                    "agent_id": p.agent_id,
                    "name": p.name,
                    "kind": PASSPORT_KIND.name_of(p.kind, "agent"),
                    "description": p.description,
                    "capabilities": list(p.claimed_capabilities),
                    "domains": list(p.domains),
                    "online": p.online,
                }
                for p in peers
            ]
        }

    async def _tool_channels(self, caller: str, args: ChannelsArgs, turn: ToolTurn) -> Any:
        channels = self.ops.channels
        if args.action == "list":
            metas, _ = await channels.list_channels(caller, include_ended=args.state == "all")
            return {
                "channels": [
                    {
                        "channel_id": m.channel_id,
                        "type": m.type,
                        "state": CHANNEL_STATE.name_of(m.state, "unknown"),
                        "participants": [p.name for p in m.participants],
                        "intent": m.intent,
                    }
                    for m in metas
                ]
            }
        if args.action == "info":
            target = args.channel_id or turn.channel_id
            if not target:
                raise InvalidArgument("channels(action='info') needs channel_id.")
            described = await channels.describe_channel(caller, target)
            return {
                **_to_dict(described.channel),
                "adapter_state": json.loads(described.adapter_state_json) if described.adapter_state_json else None,
                "expected_next": [self.ops.core.name_for(a) for a in described.expected_next],
            }
        if args.action == "close":
            target = args.channel_id or turn.channel_id
            if not target:
                raise InvalidArgument("channels(action='close') needs channel_id (no current channel).")
            meta = await self.ops.core.close_channel(caller, target, "closed_by_agent")
            return {
                "channel_id": meta.channel_id,
                "state": CHANNEL_STATE.name_of(meta.state, "unknown"),
                "close_reason": meta.close_reason,
            }
        if not args.type or not args.target:
            raise InvalidArgument("channels(action='open') needs type and target.")
        request = hub_pb2.OpenChannelRequest(
            type=args.type,
            targets=[args.target] if isinstance(args.target, str) else args.target,
            knobs_json=dumps_json(args.knobs) if args.knobs else "",
            intent=args.intent or "",
            wait_until_opened=True,  # the tool answers once the invitees acked (or the channel ended)
        )
        if args.ttl is not None:
            request.ttl_seconds = args.ttl
        if args.message is not None:
            request.message = args.message
        meta, seed_id = await channels.open_channel(caller, request)
        out: dict[str, Any] = {
            "channel_id": meta.channel_id,
            "type": meta.type,
            "state": CHANNEL_STATE.name_of(meta.state, "unknown"),
            "participants": [p.name for p in meta.participants],
        }
        if seed_id:
            out["seed_envelope_id"] = seed_id
        return out

    async def _tool_tasks(self, caller: str, args: TasksArgs, turn: ToolTurn) -> Any:
        tasks = self.ops.tasks
        if args.action in ("progress", "complete"):
            if not turn.task_id:
                raise FailedPrecondition(
                    f"tasks(action='{args.action}') works only inside your own running task "
                    "(the owner starts it with `async with agent.task(...)`)."
                )
            kind = (
                task_pb2.TASK_EVENT_KIND_PROGRESS if args.action == "progress" else task_pb2.TASK_EVENT_KIND_COMPLETED
            )
            value = args.payload if args.action == "progress" else args.result
            report = hub_pb2.ReportTaskRequest(
                task_id=turn.task_id, kind=kind, payload_json=dumps_json(value) if value is not None else ""
            )
            task = await tasks.report_task(caller, report)
            return {"task_id": task.task_id, "state": TASK_STATE.name_of(task.state, "unknown")}
        if args.action == "list":
            listed, _ = await tasks.list_tasks(
                caller, all_scope=args.scope == "all", include_ended=args.state == "all", limit=args.limit
            )
            return {"tasks": [_to_dict(t) for t in listed]}
        if not args.task_id:
            raise InvalidArgument(f"tasks(action='{args.action}') needs task_id.")
        if args.action == "status":
            return _to_dict(await tasks.get_task(args.task_id))
        if args.action == "cancel":  # CancelTask's rules: the caller's task, or one in a channel it is in
            task, envelope_id = await tasks.cancel_task(caller, args.task_id, args.reason or "")
            return {**_to_dict(task), "envelope_id": envelope_id}
        task, timed_out = await tasks.wait_task(args.task_id, args.timeout)
        return {**_to_dict(task), "timed_out": timed_out}

    async def _tool_context(self, caller: str, args: ContextArgs, turn: ToolTurn) -> Any:
        if args.action == "search":
            if args.scope == "knowledge":
                raise InvalidArgument(
                    "context(scope='knowledge') searches the agent's own KnowledgeStore; the agent's SDK serves it, "
                    "not the hub. Use scope='channel' here."
                )
            excerpts = await self.ops.context.search_context(
                caller, args.query or "", args.channel_id or "", args.limit
            )
        else:
            excerpts = await self.ops.context.quote_context(
                caller, args.speaker or "", args.recent_n, args.channel_id or ""
            )
        return {
            "excerpts": [
                {
                    "channel_id": e.channel_id,
                    "envelope_id": e.envelope_id,
                    "seq": e.seq,
                    "sender": e.sender_name,
                    "text": e.text,
                    "created_at": e.created_at,
                }
                for e in excerpts
            ]
        }

    async def _tool_delegate(self, caller: str, args: DelegateArgs, turn: ToolTurn) -> Any:
        text, used_channel, envelope_id = await self.ops.messages.delegate(
            caller,
            args.target,
            args.prompt,
            capability=args.capability or "",
            timeout=args.timeout,
            causation_id=turn.causation_id,
        )
        return {"text": text, "channel_id": used_channel, "envelope_id": envelope_id}
