"""The ``agentnet`` commands that read the hub: ``status``, the lists (``agents``, ``channels``,
``tasks``, ``describe``), the WALs (``tail``, ``wal``), ``audit`` and ``calls``."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Annotated, Any

import grpc
import typer
from agentnet.v1 import channel_pb2, hub_pb2, identity_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from rich.progress import Progress
from rich.text import Text

from agentsdk.cli import render
from agentsdk.cli.common import (
    PROGRESS_AT,
    JsonOption,
    Reader,
    _agent_names,
    _channel_names,
    _client,
    _err,
    _out,
    _run,
    _show,
    _show_line,
    app,
)
from agentsdk.cli.settings import Settings
from agentsdk.operator import AgentView
from agentsdk.tls import open_channel
from netkernel.errors import (
    InvalidArgument,
    NotFound,
)

# -- status ---------------------------------------------------------------------------------


async def _health(target: str, settings: Settings) -> str:
    """A service's health ("serving", "not_serving", or why it cannot be asked)."""
    channel = open_channel(target, settings.tls_setting())
    try:
        response = await health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(service=""), timeout=min(settings.timeout, 5.0)
        )
        return str(health_pb2.HealthCheckResponse.ServingStatus.Name(response.status)).lower()
    except grpc.aio.AioRpcError as err:
        return f"unreachable ({err.code().name.lower()})"
    finally:
        await channel.close()


@app.command()
def status(ctx: typer.Context, json_: JsonOption = False) -> None:
    """Health of the hub and the knowledge service; the hub's version, store, uptime and counts (with an
    agent credential: who you are, your live channels and running tasks)."""

    async def work(settings: Settings) -> None:
        hub_health, knowledge_health = await asyncio.gather(
            _health(settings.hub, settings), _health(settings.knowledge, settings)
        )
        health = [
            ["hub", f"{settings.hub}: {hub_health}"],
            ["knowledge", f"{settings.knowledge}: {knowledge_health}"],
        ]
        health_json = {"hub": hub_health, "knowledge": knowledge_health}
        client = _client(settings)
        async with client:
            if isinstance(client, AgentView):
                me = await client.me()
                live = await client.channels(
                    states=[channel_pb2.CHANNEL_STATE_PENDING, channel_pb2.CHANNEL_STATE_OPENED]
                )
                running = await client.tasks()
                by_state = Counter(render.channel_state(c.state) for c in live)
                rows = [
                    *health,
                    ["agent", f"{me.passport.name} ({me.agent_id})"],
                    ["your live channels", ", ".join(f"{k} {v}" for k, v in sorted(by_state.items())) or "none"],
                    ["your running tasks", str(len(running))],
                ]
                value = {
                    "health": health_json,
                    "agent": me,
                    "live_channels": dict(by_state),
                    "running_tasks": len(running),
                }
                _show(json_, value, lambda: render.table("agentnet status (agent view)", ["", ""], rows))
                return
            st = await client.status()
        live_text = ", ".join(f"{render.channel_state(c.state)} {c.count}" for c in st.live_channels) or "none"
        rows = [
            *health,
            ["version", st.version],
            ["store", f"{st.store_kind} {st.store_address}"],
            [
                "store health",
                f"answers ({st.store_probe_seconds * 1000:.1f} ms)"
                if st.store_healthy
                else f"NOT ANSWERING: {st.store_error}",
            ],
            *([["replica", st.replica_id]] if st.replica_id else []),
            ["uptime", f"{st.uptime_seconds:.0f} s (since {render.when(st.started_at)} UTC)"],
            ["identities", f"{st.identities} ({st.online} online)"],
            ["live channels", live_text],
            ["running tasks", str(st.running_tasks)],
            ["connected streams", f"{st.connected_streams} (this replica)"],
            ["waiting for answers", f"{st.pending_inbox_total} (at most {st.max_pending_inbox} for one identity)"],
            ["channel types", ", ".join(st.channel_types)],
            *render.retention_rows(st.retention),
            *render.partition_rows(st),
        ]
        _show(
            json_,
            {**render.as_json(st), "health": health_json},
            lambda: render.table("agentnet status", ["", ""], rows),
        )

    _run(ctx, work)


# -- lists ----------------------------------------------------------------------------------


@app.command()
def agents(
    ctx: typer.Context,
    online: Annotated[bool, typer.Option("--online", help="Only identities with a stream open.")] = False,
    limit: Annotated[int, typer.Option(help="At most this many (0 = all).")] = 0,
    json_: JsonOption = False,
) -> None:
    """Every registered identity, by name (with an agent credential: those the agent may see)."""

    async def work(settings: Settings) -> None:
        async with _client(settings) as client:
            found = await client.agents(online_only=online, limit=limit)
        rows = (
            [
                a.name,
                a.agent_id,
                render.enum_name(identity_pb2.PassportKind, a.kind, "PASSPORT_KIND_"),
                "yes" if a.online else "",
                ", ".join(a.claimed_capabilities),
                a.description,
            ]
            for a in found
        )
        columns = ["name", "agent", "kind", "online", "capabilities", "description"]
        _show(json_, found, lambda: render.table("agents", columns, rows))

    _run(ctx, work)


STATE_NAMES = {render.channel_state(v): v for v in channel_pb2.ChannelState.values() if v}


def _states(values: list[str]) -> list[channel_pb2.ChannelState.ValueType]:
    out = []
    for value in values:
        state = STATE_NAMES.get(value.lower())
        if state is None:
            raise InvalidArgument(f"unknown channel state {value!r}: use one of {', '.join(STATE_NAMES)}.")
        out.append(state)
    return out


@app.command()
def channels(
    ctx: typer.Context,
    state: Annotated[
        list[str] | None,
        typer.Option("--state", help="Only this state (pending, opened, closed, expired); repeatable."),
    ] = None,
    type_: Annotated[str, typer.Option("--type", help="Only this channel type, e.g. conversation.")] = "",
    limit: Annotated[int, typer.Option(help="At most this many (0 = all).")] = 0,
    json_: JsonOption = False,
) -> None:
    """Every channel, newest first, with whose turn it is (with an agent credential: the agent's channels)."""

    async def work(settings: Settings) -> None:
        states = _states(state or [])
        async with _client(settings) as client:
            turns: dict[str, list[str]] = {}
            if json_:
                found = await client.channels(states=states, type=type_, limit=limit)
            else:
                found, turns = await client.channels_and_turns(states=states, type=type_, limit=limit)
        _show(json_, found, lambda: render.channels_table(found, turns))

    _run(ctx, work)


@app.command()
def tasks(
    ctx: typer.Context,
    all_: Annotated[bool, typer.Option("--all", help="Ended tasks too.")] = False,
    limit: Annotated[int, typer.Option(help="At most this many (0 = all).")] = 0,
    json_: JsonOption = False,
) -> None:
    """Running tasks (every task with --all), newest first (with an agent credential: those it may see)."""

    async def work(settings: Settings) -> None:
        async with _client(settings) as client:
            found = await client.tasks(include_ended=all_, limit=limit)
            names = {} if json_ else await _agent_names(client, (t.owner_id for t in found))
        _show(json_, found, lambda: render.tasks_table(found, names))

    _run(ctx, work)


@app.command()
def describe(
    ctx: typer.Context,
    what: Annotated[str, typer.Argument(help="A channel id, a task id, or an agent id or name.")],
    json_: JsonOption = False,
) -> None:
    """One channel (metadata, participants, whose turn), task or agent."""

    async def work(settings: Settings) -> None:
        async with _client(settings) as client:
            kind, message = await _describe(client, what)
            owner = await _agent_names(client, [message.owner_id]) if kind == "task" and not json_ else {}
        if kind == "channel":
            rows = render.channel_rows(message)
        elif kind == "task":
            rows = render.task_rows(message, owner)
        else:
            rows = render.field_rows(message)
        _show(json_, {"kind": kind, kind: message}, lambda: render.table(f"{kind} {what}", ["field", "value"], rows))

    _run(ctx, work)


async def _describe(client: Reader, what: str) -> tuple[str, Any]:
    lookups: list[tuple[str, Callable[[str], Awaitable[Any]]]] = [
        ("channel", client.describe_channel),
        ("task", client.get_task),
        ("agent", client.describe_agent),
    ]
    for kind, lookup in lookups:
        try:
            return kind, await lookup(what)
        except NotFound:
            continue
    raise NotFound(f"no channel, task or agent is named {what!r}.")


# -- WALs -----------------------------------------------------------------------------------


@app.command()
def tail(
    ctx: typer.Context,
    channel: Annotated[str, typer.Argument(help="The channel id.")],
    from_seq: Annotated[int, typer.Option("--from-seq", help="Start at this seq (0 = the start).")] = 0,
    json_: JsonOption = False,
) -> None:
    """Follow a channel live: its envelopes so far, then each as it is committed, until it ends (Ctrl-C stops)."""

    async def work(settings: Settings) -> None:
        async with _client(settings) as client:
            names = _channel_names(await client.describe_channel(channel))
            out = _out()
            async for env in client.read_wal(channel, from_seq=from_seq, follow=True):
                _show_line(out, json_, env, partial(render.envelope_line, env, names))

    _run(ctx, work)


@app.command()
def wal(
    ctx: typer.Context,
    channel: Annotated[str, typer.Argument(help="The channel id.")],
    from_seq: Annotated[int, typer.Option("--from-seq", help="Start at this seq (0 = the start).")] = 0,
    until_seq: Annotated[int, typer.Option("--until-seq", help="Stop at this seq (0 = the end).")] = 0,
    json_: JsonOption = False,
) -> None:
    """Dump a channel's WAL (a progress bar on stderr for a large one)."""

    async def work(settings: Settings) -> None:
        async with _client(settings) as client:
            described = await client.describe_channel(channel)
            names = _channel_names(described)
            last = described.channel.last_seq
            total = max(0, (until_seq or last) - max(from_seq, 1) + 1)
            out = _out()
            stream = client.read_wal(channel, from_seq=from_seq, until_seq=until_seq)
            with Progress(console=_err(), transient=True, disable=total < PROGRESS_AT) as progress:
                bar = progress.add_task(f"reading {channel}", total=total)
                async for env in stream:
                    _show_line(out, json_, env, partial(render.envelope_line, env, names))
                    progress.advance(bar)

    _run(ctx, work)


# -- audit and calls ------------------------------------------------------------------------


def _audit_line(r: hub_pb2.AuditRecord) -> Text:
    line = Text(f"{r.audit_id:>6} {render.when(r.created_at)} ", style="dim")
    line.append(r.kind, style="bold")
    line.append(f" actor={r.actor_id or 'hub'} subject={r.subject_id} {r.detail_json}")
    return line


@app.command()
def audit(
    ctx: typer.Context,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep printing new records (Ctrl-C stops).")] = False,
    kind: Annotated[str, typer.Option(help="Only this kind, e.g. post_refused.")] = "",
    subject: Annotated[str, typer.Option(help="Only records about this agent, channel or task id.")] = "",
    after: Annotated[
        int | None, typer.Option(help="Records after this audit id (0 = from the start) instead of the newest.")
    ] = None,
    limit: Annotated[int, typer.Option(help="At most this many records (the newest ones unless --after).")] = 100,
    json_: JsonOption = False,
) -> None:
    """The hub's audit log (refusals, registrations, channel ends, policy reloads, …): the newest records,
    or those after --after; --follow then prints each new one. Operator only."""

    async def work(settings: Settings) -> None:
        out = _out()
        if not 1 <= limit <= 10_000:
            raise InvalidArgument(f"--limit {limit} is out of range: ask for 1 to 10000 records.")
        async with _client(settings) as client:
            if after is not None and follow:
                records, start = [], after
            elif after is not None:
                records = await client.list_audit(kind=kind, subject_id=subject, after_id=after, limit=limit)
            else:  # the newest records (a follower prints them first, then each new one)
                records = await client.latest_audit(kind=kind, subject_id=subject, limit=limit)
                start = records[0].audit_id - 1 if records else 0
            if not follow:
                rows = (
                    [str(r.audit_id), render.when(r.created_at), r.kind, r.actor_id, r.subject_id, r.detail_json]
                    for r in records
                )
                columns = ["id", "at (UTC)", "kind", "actor", "subject", "detail"]
                _show(json_, records, lambda: render.table("audit", columns, rows))
                return
            async for r in client.follow_audit(kind=kind, subject_id=subject, after_id=start):
                _show_line(out, json_, r, partial(_audit_line, r))

    _run(ctx, work)


@app.command()
def calls(
    ctx: typer.Context,
    execution: Annotated[str, typer.Argument(help="An A2A execution id (its subtree) or a root session id.")],
    limit: Annotated[int, typer.Option(help="At most this many executions (0 = 100).")] = 0,
    json_: JsonOption = False,
) -> None:
    """An A2A call tree: who called whom, with each call's status (with an agent credential: calls it took
    part in)."""

    async def work(settings: Settings) -> None:
        async with _client(settings) as client:
            try:
                found = await client.list_executions(execution_id=execution, limit=limit)
            except NotFound:
                found = await client.list_executions(root_session_id=execution, limit=limit)
                if not found.executions:
                    raise NotFound(f"no A2A execution or root session is named {execution!r}.") from None
            names = await _agent_names(client, (a for e in found.executions for a in (e.caller_id, e.target_id)))
        title = f"A2A calls of {execution}" + (" (truncated)" if found.truncated else "")
        _show(json_, found, lambda: render.call_tree(list(found.executions), names, title))

    _run(ctx, work)
