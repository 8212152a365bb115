"""Network tools and the higher-level operations behind several RPCs.

``HubTools`` implements the seeds' plugin tools (peers, channels, tasks, context,
delegate) and the adapter tool ``say`` on top of :class:`HubCore`, both as typed
methods (used by the typed RPCs) and through ``call_tool`` (JSON in, JSON out,
used by CallTool so a bridge's LLM gets the same tool surface as a Python agent).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from agentnet.v1 import channel_pb2, envelope_pb2, hub_pb2, identity_pb2, task_pb2
from google.protobuf.json_format import MessageToDict
from pydantic import ValidationError

from hubsvc.adapters import get_adapter
from hubsvc.core.channel import OPENED, TERMINAL, ChannelRuntime, spec_from_meta
from hubsvc.core.hub import HubCore
from hubsvc.core.registry import AgentEntry
from hubsvc.core.util import from_timestamp, to_timestamp
from netkernel.envelope import (
    EV_CHANNEL_CLOSED,
    EV_CHANNEL_EXPIRED,
    EV_CHANNEL_OPENED,
    EV_TASK_CANCEL_REQUEST,
    EV_TEXT,
    Envelope,
    text_envelope,
)
from netkernel.errors import (
    AgentNetError,
    ChannelClosed,
    DepthExceeded,
    FailedPrecondition,
    InvalidArgument,
    PermissionDenied,
    Timeout,
)
from netkernel.tool_schemas import (
    ADAPTER_TOOLS,
    ALL_TOOLS,
    PLUGIN_TOOLS,
    ChannelsArgs,
    ContextArgs,
    DelegateArgs,
    PeersArgs,
    SayArgs,
    TasksArgs,
    description,
    parameters_schema,
)
from netkernel.wire import (
    CHANNEL_STATE,
    PASSPORT_KIND,
    TASK_STATE,
    dumps_json,
    envelope_from_wire,
    parse_json_object,
    wire_readable_by,
)

_TERMINAL_EVENTS = (EV_CHANNEL_CLOSED, EV_CHANNEL_EXPIRED)


def _to_dict(message: Any) -> dict[str, Any]:
    return MessageToDict(message, preserving_proto_field_name=True)


def _summary(entry: AgentEntry) -> identity_pb2.AgentSummary:
    r = entry.record
    return identity_pb2.AgentSummary(
        agent_id=r.agent_id,
        name=r.passport.name,
        kind=r.passport.kind,
        description=r.passport.description,
        claimed_capabilities=r.resume.claimed_capabilities,
        domains=r.resume.domains,
        online=r.online,
        project=r.passport.project,
    )


class HubTools:
    """Tool semantics over a :class:`HubCore`."""

    def __init__(self, core: HubCore) -> None:
        self.core = core

    # -- peers --------------------------------------------------------------------------

    def find_agents(
        self,
        caller: str,
        *,
        kind: int = 0,
        capability: str = "",
        query: str = "",
        sort_by: str = "",
        limit: int = 0,
        exclude_self: bool = False,
    ) -> list[identity_pb2.AgentSummary]:
        """Registry search (all filters ANDed)."""
        if limit < 0 or limit > 1000:
            raise InvalidArgument("limit must be between 1 and 1000 (0 = 20).")
        sort_by = sort_by or "name"
        if sort_by not in ("name", "registered_at", "last_seen"):
            raise InvalidArgument(f"sort_by {sort_by!r} is unknown; use name, registered_at or last_seen.")
        cap = capability.lower()
        q = query.lower()
        out = []
        for entry in self.core.registry.entries():
            r = entry.record
            if exclude_self and entry.agent_id == caller:
                continue
            if kind and r.passport.kind != kind:
                continue
            if cap and cap not in (c.lower() for c in r.resume.claimed_capabilities):
                continue
            if q:
                haystack = " ".join(
                    [
                        r.passport.name,
                        r.passport.description,
                        r.resume.summary,
                        *r.resume.domains,
                        *r.resume.claimed_capabilities,
                    ]
                ).lower()
                if q not in haystack:
                    continue
            out.append(entry)
        if sort_by == "name":
            out.sort(key=lambda e: e.name)
        elif sort_by == "registered_at":
            out.sort(key=lambda e: from_timestamp(e.record.registered_at))
        else:
            out.sort(key=lambda e: from_timestamp(e.record.last_seen_at), reverse=True)
        return [_summary(e) for e in out[: limit or 20]]

    def _describe(self, ref: str) -> dict[str, Any]:
        r = self.core.registry.resolve(ref).record
        return {
            "agent_id": r.agent_id,
            "passport": _to_dict(r.passport),
            "resume": _to_dict(r.resume),
            "skill_md": r.skill_md,
        }

    # -- channels -----------------------------------------------------------------------

    async def open_channel(
        self, caller: str, request: hub_pb2.OpenChannelRequest
    ) -> tuple[channel_pb2.ChannelMetadata, str]:
        """OpenChannel: create, invite, optionally seed and wait until OPENED."""
        seed: Envelope | None = None
        which = request.WhichOneof("seed")
        if which == "message":
            seed = text_envelope("", caller, request.message)
        elif which == "seed_envelope":
            seed = envelope_from_wire(request.seed_envelope)
            if seed.sender_id and seed.sender_id != caller:
                raise PermissionDenied("seed_envelope.sender_id must be empty or your own agent id.")
        ch = await self.core.open_channel(
            caller,
            type=request.type,
            targets=list(request.targets),
            knobs_json=request.knobs_json,
            intent=request.intent,
            ttl_seconds=request.ttl_seconds if request.HasField("ttl_seconds") else None,
            invite_ack_timeout=request.invite_ack_timeout_seconds
            if request.HasField("invite_ack_timeout_seconds")
            else None,
            seed=seed,
        )
        meta = ch.meta
        if request.wait_until_opened:
            timeout = request.wait_timeout_seconds or meta.invite_ack_timeout_seconds + 5.0
            meta = await self.core.wait_channel(
                ch.channel_id, lambda m: m.state == OPENED or m.state in TERMINAL, timeout
            )
        seed_id = ""
        if seed is not None and meta.state != channel_pb2.CHANNEL_STATE_PENDING:
            seed_id = await self._seed_id(caller, ch.channel_id)
        return meta, seed_id

    async def _seed_id(self, caller: str, channel_id: str) -> str:
        opened = False
        for wire in await self.core.read_wal(caller, channel_id, 1, 0, 0):
            if wire.event_type == EV_CHANNEL_OPENED:
                opened = True
            elif opened and wire.sender_id == caller:
                return wire.envelope_id
        return ""

    async def describe_channel(self, caller: str, channel_id: str) -> hub_pb2.DescribeChannelResponse:
        """Metadata, adapter state JSON, expected next speakers, the caller's offered adapter tools
        and the channel type's default view."""
        meta = await self.core.require_member(caller, channel_id)
        ch = self.core.live_channel(channel_id)
        response = hub_pb2.DescribeChannelResponse(channel=meta)
        if ch is None:
            policy, recent_n = get_adapter(meta.type).default_view(spec_from_meta(meta))
        else:
            policy, recent_n = ch.adapter.default_view(ch.spec)
            response.adapter_state_json = dumps_json(ch.adapter.state_json(ch.state))
            if ch.meta.state == OPENED:
                response.expected_next.extend(ch.adapter.expected_next(ch.spec, ch.state))
            response.offered_tools.extend(self._offered_tools(ch, caller))
        response.default_view.policy = policy
        response.default_view.recent_n = recent_n
        return response

    @staticmethod
    def _offered_tools(ch: ChannelRuntime, caller: str) -> list[str]:
        """The adapter tools ``caller`` may use in the live channel now (the say table)."""
        if ch.meta.state == OPENED and ch.adapter.offers_say(ch.spec, ch.state, caller):
            return list(ADAPTER_TOOLS)
        return []

    async def list_channels(
        self, caller: str, *, include_ended: bool, type: str = "", limit: int = 0
    ) -> list[channel_pb2.ChannelMetadata]:
        """The caller's channels, newest first."""
        if limit < 0:
            raise InvalidArgument("limit must not be negative.")
        rows = await self.core.store.list_channels_for(caller, include_ended=include_ended, limit=limit or 100)
        out = []
        for row in rows:
            live = self.core.live_channel(row.channel_id)
            meta = live.meta if live is not None else channel_pb2.ChannelMetadata.FromString(row.record)
            if type and meta.type != type:
                continue
            if not include_ended and meta.state in TERMINAL:
                continue
            out.append(meta)
        return out

    async def stream_wal(
        self, caller: str, channel_id: str, from_seq: int, until_seq: int, limit: int, *, follow: bool
    ) -> AsyncIterator[envelope_pb2.Envelope]:
        """The visible WAL; with ``follow``, then every new envelope until the channel ends."""
        if limit < 0:
            raise InvalidArgument("limit must not be negative.")
        await self.core.require_member(caller, channel_id)
        if not follow:
            for wire in await self.core.read_wal(caller, channel_id, from_seq, until_seq, limit):
                yield wire
            return
        queue: asyncio.Queue[envelope_pb2.Envelope] = asyncio.Queue()
        unsubscribe = self.core.watch(channel_id, queue.put_nowait)
        try:
            sent = 0
            last = max(from_seq, 1) - 1
            for wire in await self.core.read_wal(caller, channel_id, from_seq, until_seq, limit):
                yield wire
                last = wire.seq
                sent += 1
                if wire.event_type in _TERMINAL_EVENTS or (limit and sent >= limit):
                    return
            if self.core.live_channel(channel_id) is None:
                # It ended meanwhile: whatever came after our first read is in the WAL.
                for wire in await self.core.read_wal(caller, channel_id, last + 1, until_seq, 0):
                    yield wire
                    sent += 1
                    if limit and sent >= limit:
                        return
                return
            while True:
                wire = await queue.get()
                if wire.seq <= last or not wire_readable_by(wire, caller):
                    continue
                if until_seq and wire.seq > until_seq:
                    return
                yield wire
                last = wire.seq
                sent += 1
                if wire.event_type in _TERMINAL_EVENTS or (limit and sent >= limit):
                    return
        finally:
            unsubscribe()

    # -- tasks --------------------------------------------------------------------------

    async def report_task(self, caller: str, request: hub_pb2.ReportTaskRequest) -> task_pb2.TaskMetadata:
        """ReportTask."""
        if request.channel_id:
            await self.core.require_member(caller, request.channel_id)
        return await self.core.tasks.report(
            caller,
            request.task_id,
            request.kind,
            title=request.title,
            channel_id=request.channel_id,
            payload_json=request.payload_json,
            error=request.error,
            ttl_seconds=request.ttl_seconds if request.HasField("ttl_seconds") else None,
        )

    async def _visible_task(self, caller: str, task: task_pb2.TaskMetadata) -> bool:
        if task.owner_id == caller:
            return True
        if not task.channel_id:
            return False
        try:
            await self.core.require_member(caller, task.channel_id)
        except AgentNetError:
            return False
        return True

    async def list_tasks(
        self, caller: str, *, all_scope: bool, include_ended: bool, limit: int
    ) -> list[task_pb2.TaskMetadata]:
        """Own or all visible tasks, newest first."""
        if limit < 0:
            raise InvalidArgument("limit must not be negative.")
        tasks = await self.core.tasks.all() if include_ended else self.core.tasks.live()
        picked = []
        for task in tasks:
            if task.owner_id == caller or (all_scope and await self._visible_task(caller, task)):
                picked.append(task)
        picked.sort(key=lambda t: from_timestamp(t.created_at), reverse=True)
        return picked[: limit or 20]

    async def cancel_task(self, caller: str, task_id: str, reason: str) -> tuple[task_pb2.TaskMetadata, str]:
        """Ask the owner to cancel; posts EV_TASK_CANCEL_REQUEST into the task's channel when it has one."""
        task = await self.core.tasks.get(task_id)
        if not await self._visible_task(caller, task):
            raise PermissionDenied(f"task {task_id!r} is not yours and not in a channel you participate in.")
        task = await self.core.tasks.request_cancel(task_id, reason)
        envelope_id = ""
        if task.channel_id and self.core.live_channel(task.channel_id) is not None and caller != task.owner_id:
            env = Envelope(
                channel_id=task.channel_id,
                sender_id=caller,
                audience=[task.owner_id],
                event_type=EV_TASK_CANCEL_REQUEST,
                event_data={"task_id": task_id, "reason": reason},
                task_id=task_id,
                priority="urgent",
            )
            wire, _ = await self.core.post(caller, env)
            envelope_id = wire.envelope_id
        return task, envelope_id

    # -- context ------------------------------------------------------------------------

    async def _channels_of(self, caller: str, channel_id: str) -> list[str]:
        if channel_id:
            await self.core.require_member(caller, channel_id)
            return [channel_id]
        rows = await self.core.store.list_channels_for(caller, include_ended=True, limit=10_000)
        return [r.channel_id for r in rows]

    def _excerpt(self, wire: envelope_pb2.Envelope) -> hub_pb2.ContextExcerpt:
        text = envelope_from_wire(wire).event_data.get("text", "")
        return hub_pb2.ContextExcerpt(
            channel_id=wire.channel_id,
            envelope_id=wire.envelope_id,
            seq=wire.seq,
            sender_id=wire.sender_id,
            sender_name=self.core.name_for(wire.sender_id),
            text=text if isinstance(text, str) else "",
            created_at=wire.created_at,
        )

    async def search_context(
        self, caller: str, query: str, channel_id: str, limit: int
    ) -> list[hub_pb2.ContextExcerpt]:
        """Visible EV_TEXT containing ``query`` (case-insensitive), newest first."""
        if not query:
            raise InvalidArgument("query is empty; give the text to search for.")
        if limit < 0 or limit > 1000:
            raise InvalidArgument("limit must be between 1 and 1000 (0 = 10).")
        limit = limit or 10
        channels = await self._channels_of(caller, channel_id)
        out = []
        for data in await self.core.store.search_text(channels, query, limit * 4):
            wire = envelope_pb2.Envelope.FromString(data)
            if wire_readable_by(wire, caller):
                out.append(self._excerpt(wire))
        out.sort(key=lambda e: e.created_at, reverse=True)
        return out[:limit]

    async def quote_context(
        self, caller: str, speaker: str, recent_n: int, channel_id: str
    ) -> list[hub_pb2.ContextExcerpt]:
        """The speaker's latest visible EV_TEXT, oldest first."""
        if not speaker:
            raise InvalidArgument("speaker is empty; name whose words to quote.")
        if recent_n < 0 or recent_n > 1000:
            raise InvalidArgument("recent_n must be between 1 and 1000 (0 = 1).")
        recent_n = recent_n or 1
        speaker_id = self.core.registry.resolve(speaker).agent_id
        channels = await self._channels_of(caller, channel_id)
        picked = []
        for data in await self.core.store.texts_from(channels, speaker_id, recent_n * 4):
            wire = envelope_pb2.Envelope.FromString(data)
            if wire_readable_by(wire, caller):
                picked.append(self._excerpt(wire))
        picked.sort(key=lambda e: e.created_at, reverse=True)
        return list(reversed(picked[:recent_n]))

    # -- delegate and say ---------------------------------------------------------------

    async def delegate(
        self,
        caller: str,
        target: str,
        prompt: str,
        *,
        capability: str = "",
        timeout: float = 300.0,
        causation_id: str = "",
    ) -> tuple[str, str, str]:
        """Consult ``target`` once: returns (reply text, channel id, reply envelope id)."""
        if not prompt:
            raise InvalidArgument("prompt is empty; say what to ask.")
        if timeout <= 0:
            raise InvalidArgument("timeout must be positive.")
        entry = self.core.registry.resolve(target)
        if entry.agent_id == caller:
            raise InvalidArgument("you cannot delegate to yourself; pick a peer with peers(action='find').")
        if capability and capability.lower() not in (c.lower() for c in entry.record.resume.claimed_capabilities):
            raise FailedPrecondition(
                f"{entry.name} does not claim capability {capability!r}; find a peer that does with "
                f"peers(action='find', capability={capability!r}).",
            )
        depth = 1
        if causation_id:
            cause = await self.core.store.find_envelope(causation_id)
            if cause is not None:
                depth = envelope_pb2.Envelope.FromString(cause).depth + 1
        if depth > self.core.options.max_depth:
            raise DepthExceeded(
                f"delegating would reach depth {depth}, above the hub's limit of {self.core.options.max_depth}; "
                "answer directly instead.",
                metadata={"limit": str(self.core.options.max_depth)},
            )
        seed = text_envelope("", caller, prompt, depth=depth, causation_id=causation_id or None)
        ch = await self.core.open_channel(
            caller,
            type="consulting",
            targets=[entry.agent_id],
            intent=f"delegate: {capability}" if capability else "delegate",
            seed=seed,
        )
        reply = await self.await_reply(caller, ch.channel_id, entry.agent_id, timeout)
        return envelope_from_wire(reply).event_data.get("text", ""), ch.channel_id, reply.envelope_id

    async def await_reply(
        self, caller: str, channel_id: str, sender: str, timeout: float, *, timeout_reason: str = "delegate_timeout"
    ) -> envelope_pb2.Envelope:
        """The first EV_TEXT of ``sender`` in the channel. Raises Timeout (after closing the
        channel with ``timeout_reason``) or ChannelClosed when the channel ends first."""
        queue: asyncio.Queue[envelope_pb2.Envelope] = asyncio.Queue()
        unsubscribe = self.core.watch(channel_id, queue.put_nowait)
        try:
            for wire in await self.core.read_wal(caller, channel_id):
                queue.put_nowait(wire)
            loop = asyncio.get_running_loop()
            deadline = loop.time() + timeout
            while True:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    await self.core.close_channel(caller, channel_id, timeout_reason)
                    raise Timeout(
                        f"no reply from {self.core.name_for(sender)} within {timeout:g}s; the channel was closed.",
                        metadata={"channel_id": channel_id},
                    )
                try:
                    wire = await asyncio.wait_for(queue.get(), remaining)
                except TimeoutError:
                    continue
                if wire.event_type == EV_TEXT and wire.sender_id == sender:
                    return wire
                if wire.event_type in _TERMINAL_EVENTS:
                    reason = envelope_from_wire(wire).event_data.get("reason", "")
                    raise ChannelClosed(
                        f"channel '{channel_id}' ended before {self.core.name_for(sender)} replied (reason: {reason}).",
                        metadata={"channel_id": channel_id, "reason": str(reason)},
                    )
        finally:
            unsubscribe()

    async def say(
        self, caller: str, content: str, audience: list[str], channel_id: str, *, causation_id: str | None = None
    ) -> envelope_pb2.Envelope:
        """Post EV_TEXT to a channel the caller participates in; audience by peer names or ids."""
        if not channel_id:
            raise InvalidArgument("say needs a channel: pass channel_id (the current channel when called as a tool).")
        await self.core.require_member(caller, channel_id)
        ids = [self.core.registry.resolve(name).agent_id for name in audience] if audience else None
        wire, _ = await self.core.post(
            caller, text_envelope(channel_id, caller, content, audience=ids, causation_id=causation_id)
        )
        return wire

    # -- the tools RPCs -----------------------------------------------------------------

    def list_tools(self, caller: str, channel_id: str, *, include_plugin: bool) -> list[hub_pb2.ToolSchema]:
        """Plugin tools plus the adapter tools ``channel_id`` offers the caller this turn."""
        names: list[tuple[str, hub_pb2.ToolSource.ValueType]] = []
        if include_plugin:
            names += [(n, hub_pb2.TOOL_SOURCE_PLUGIN) for n in PLUGIN_TOOLS]
        ch = self.core.live_channel(channel_id) if channel_id else None
        if channel_id and ch is None:
            raise ChannelClosed(f"channel '{channel_id}' is not live; no adapter tools are offered.")
        if ch is not None:
            if caller not in ch.participants:
                raise PermissionDenied(f"you are not a participant of channel '{channel_id}'.")
            names += [(n, hub_pb2.TOOL_SOURCE_ADAPTER) for n in self._offered_tools(ch, caller)]
        return [
            hub_pb2.ToolSchema(
                name=name,
                description=description(ALL_TOOLS[name]),
                parameters_json_schema=json.dumps(parameters_schema(ALL_TOOLS[name])),
                source=source,
            )
            for name, source in names
        ]

    async def call_tool(self, caller: str, name: str, arguments_json: str, channel_id: str, task_id: str) -> str:
        """Validate JSON arguments against the tool's schema, run it, return its JSON result."""
        model = ALL_TOOLS.get(name)
        if model is None:
            raise InvalidArgument(f"unknown tool {name!r}; use one of {sorted(ALL_TOOLS)} (see ListTools).")
        raw = parse_json_object(arguments_json, "arguments_json")
        try:
            args = model.model_validate(raw)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in exc.errors())
            raise InvalidArgument(f"bad arguments for {name}: {problems}") from None
        if name == "say":
            assert isinstance(args, SayArgs)
            wire = await self.say(caller, args.content, args.audience or [], args.channel_id or channel_id)
            return dumps_json({"envelope_id": wire.envelope_id, "channel_id": wire.channel_id, "seq": wire.seq})
        handler = getattr(self, f"_tool_{name}")
        result = await handler(caller, args, channel_id, task_id)
        return dumps_json(result)

    async def _tool_peers(self, caller: str, args: PeersArgs, channel_id: str, task_id: str) -> Any:
        if args.action == "describe":
            if not args.name:
                raise InvalidArgument("peers(action='describe') needs name.")
            return self._describe(args.name)
        peers = self.find_agents(
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

    async def _tool_channels(self, caller: str, args: ChannelsArgs, channel_id: str, task_id: str) -> Any:
        if args.action == "list":
            metas = await self.list_channels(caller, include_ended=args.state == "all")
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
            target = args.channel_id or channel_id
            if not target:
                raise InvalidArgument("channels(action='info') needs channel_id.")
            described = await self.describe_channel(caller, target)
            return {
                **_to_dict(described.channel),
                "adapter_state": json.loads(described.adapter_state_json) if described.adapter_state_json else None,
                "expected_next": [self.core.name_for(a) for a in described.expected_next],
            }
        if args.action == "close":
            target = args.channel_id or channel_id
            if not target:
                raise InvalidArgument("channels(action='close') needs channel_id (no current channel).")
            meta = await self.core.close_channel(caller, target, "closed_by_agent")
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
            wait_until_opened=args.message is not None,
        )
        if args.ttl is not None:
            request.ttl_seconds = args.ttl
        if args.message is not None:
            request.message = args.message
        meta, seed_id = await self.open_channel(caller, request)
        out: dict[str, Any] = {
            "channel_id": meta.channel_id,
            "type": meta.type,
            "participants": [p.name for p in meta.participants],
        }
        if seed_id:
            out["seed_envelope_id"] = seed_id
        return out

    async def _tool_tasks(self, caller: str, args: TasksArgs, channel_id: str, task_id: str) -> Any:
        if args.action in ("progress", "complete"):
            if not task_id:
                raise FailedPrecondition(
                    f"tasks(action='{args.action}') works only inside your own running task "
                    "(the owner starts it with `async with agent.task(...)`)."
                )
            kind = (
                task_pb2.TASK_EVENT_KIND_PROGRESS if args.action == "progress" else task_pb2.TASK_EVENT_KIND_COMPLETED
            )
            value = args.payload if args.action == "progress" else args.result
            task = await self.core.tasks.report(
                caller, task_id, kind, payload_json=dumps_json(value) if value is not None else ""
            )
            return {"task_id": task.task_id, "state": TASK_STATE.name_of(task.state, "unknown")}
        if args.action == "list":
            tasks = await self.list_tasks(
                caller, all_scope=args.scope == "all", include_ended=args.state == "all", limit=args.limit
            )
            return {"tasks": [_to_dict(t) for t in tasks]}
        if not args.task_id:
            raise InvalidArgument(f"tasks(action='{args.action}') needs task_id.")
        if args.action == "status":
            return _to_dict(await self.core.tasks.get(args.task_id))
        task, timed_out = await self.core.tasks.wait(args.task_id, args.timeout)
        return {**_to_dict(task), "timed_out": timed_out}

    async def _tool_context(self, caller: str, args: ContextArgs, channel_id: str, task_id: str) -> Any:
        if args.action == "search":
            if args.scope == "knowledge":
                raise InvalidArgument(
                    "context(scope='knowledge') searches the agent's own KnowledgeStore; the agent's SDK serves it, "
                    "not the hub. Use scope='channel' here."
                )
            excerpts = await self.search_context(caller, args.query or "", args.channel_id or "", args.limit)
        else:
            excerpts = await self.quote_context(caller, args.speaker or "", args.recent_n, args.channel_id or "")
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

    async def _tool_delegate(self, caller: str, args: DelegateArgs, channel_id: str, task_id: str) -> Any:
        text, used_channel, envelope_id = await self.delegate(
            caller, args.target, args.prompt, capability=args.capability or "", timeout=args.timeout
        )
        return {"text": text, "channel_id": used_channel, "envelope_id": envelope_id}

    # -- audit --------------------------------------------------------------------------

    async def list_audit(self, kind: str, subject_id: str, after_id: int, limit: int) -> list[hub_pb2.AuditRecord]:
        """Audit records in id order."""
        if limit < 0 or limit > 10_000:
            raise InvalidArgument("limit must be between 1 and 10000 (0 = 100).")
        rows = await self.core.store.list_audit(kind=kind, subject_id=subject_id, after_id=after_id, limit=limit or 100)
        return [
            hub_pb2.AuditRecord(
                audit_id=r.audit_id,
                kind=r.kind,
                actor_id=r.actor_id,
                subject_id=r.subject_id,
                detail_json=r.detail_json,
                created_at=to_timestamp(r.created_at),
            )
            for r in rows
        ]
