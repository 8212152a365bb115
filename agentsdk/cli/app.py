"""The ``agentnet`` commands (typer): status, agents, channels, tasks, describe, tail, wal, audit,
calls, knowledge and console (the web console: :mod:`agentsdk.console`). Every command has ``--json``;
a failure prints the reason and what to do and exits non-zero (:data:`EXIT_CODES`)."""

from __future__ import annotations

import asyncio
import sys
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from functools import partial
from pathlib import Path
from typing import Annotated, Any, TypeVar

import grpc
import typer
from agentnet.v1 import channel_pb2, hub_pb2, identity_pb2, knowledge_pb2, operator_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from rich.console import Console, RenderableType
from rich.markup import escape
from rich.progress import Progress
from rich.text import Text

from agentsdk.cli import render
from agentsdk.cli.anywhere import GlobalOptionsGroup
from agentsdk.cli.settings import DEFAULT_HUB, DEFAULT_KNOWLEDGE, Settings, SettingsError
from agentsdk.console.options import ConsoleOptions
from agentsdk.knowledge.rpc import KnowledgeRpc
from agentsdk.operator import AgentView, OperatorClient, OperatorOnly
from agentsdk.tls import open_channel
from netkernel.errors import (
    AgentNetError,
    InvalidArgument,
    NotFound,
    NotParticipant,
    PermissionDenied,
    Unauthenticated,
    Unavailable,
)
from netkernel.extras import MissingExtra

T = TypeVar("T")

EXIT_CODES: dict[type[AgentNetError], int] = {
    InvalidArgument: 2,
    Unavailable: 3,
    Unauthenticated: 4,
    PermissionDenied: 4,
    NotParticipant: 4,
    NotFound: 5,
}
"""Exit status by error class (anything else: 1; a bad setting: 2)."""
PROGRESS_AT = 500
"""A WAL dump of at least this many envelopes shows a progress bar (on stderr)."""

app = typer.Typer(
    name="agentnet",
    cls=GlobalOptionsGroup,
    help="Look at a running agent network: the hub's agents, channels, WALs, tasks, audit log and A2A calls, "
    "and the knowledge service's files. The options below may also follow the command "
    "(`agentnet knowledge ls / --namespace x`).",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
knowledge_app = typer.Typer(help="Files of a knowledge-service namespace.", no_args_is_help=True)
app.add_typer(knowledge_app, name="knowledge")

JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON (one object, or JSON lines for streams).")]


PIPED_WIDTH = 100_000
"""Output that is not a terminal is drawn this wide: ids and other cells are never wrapped or cut."""


def _out() -> Console:
    """Standard output: the terminal's width, or (piped, redirected) wide enough never to wrap a cell."""
    if sys.stdout.isatty():
        return Console(soft_wrap=True, highlight=False)
    return Console(soft_wrap=True, highlight=False, width=PIPED_WIDTH)


def _err() -> Console:
    return Console(stderr=True, highlight=False)


def _settings(ctx: typer.Context) -> Settings:
    settings: Settings = ctx.obj
    return settings


Reader = OperatorClient | AgentView
"""What a command reads through: the operator's view, or one agent's (``--credential-file``)."""


def _hint(error: AgentNetError, settings: Settings, service: str) -> str:
    """What to do about ``error``."""
    where = settings.hub if service == "hub" else settings.knowledge
    flag = "--hub / AGENTNET_HUB" if service == "hub" else "--knowledge / AGENTNET_KNOWLEDGE"
    if isinstance(error, Unavailable):
        return f"is the {service} running at {where}? Point {flag} at it (and check the TLS options)."
    if service == "knowledge":
        if isinstance(error, Unauthenticated):
            return "the knowledge service does not know this token: check --knowledge-token-file."
        if isinstance(error, PermissionDenied):
            return "the token does not grant this namespace: use --namespace with one it grants."
        if isinstance(error, NotFound):
            return "check the path: `agentnet knowledge ls DIR` lists a directory."
        return "see docs/errors.md for this reason."
    if isinstance(error, Unauthenticated):
        return "the hub does not know this secret: check --token-file (the hub's hub-operator.token) or the credential."
    if isinstance(error, PermissionDenied | NotParticipant):
        if settings.as_agent():
            return (
                "an agent sees only its own channels, tasks and calls: pick one of `agentnet channels` / `tasks`, "
                "or use the operator token (--token-file) instead of the agent credential."
            )
        return "this needs the hub's operator token: check --token-file (the hub's hub-operator.token)."
    if isinstance(error, NotFound):
        return "check the id: `agentnet channels`, `agents`, `tasks` and `calls` list them."
    if isinstance(error, InvalidArgument):
        return "check the command's arguments (`agentnet COMMAND --help`)."
    return "see docs/errors.md for this reason."


def _run(ctx: typer.Context, work: Callable[[Settings], Coroutine[Any, Any, None]], service: str = "hub") -> None:
    """Run a command's coroutine; turn a failure into its message, a hint and an exit status."""
    settings = _settings(ctx)
    try:
        asyncio.run(work(settings))
    except SettingsError as err:
        _err().print(f"[red]error:[/red] {escape(str(err))}")
        raise typer.Exit(2) from None
    except OperatorOnly as err:
        _err().print(f"[red]error:[/red] operator only: {escape(str(err))}")
        raise typer.Exit(4) from None
    except AgentNetError as err:
        code = next((c for cls, c in EXIT_CODES.items() if isinstance(err, cls)), 1)
        _err().print(f"[red]error:[/red] {escape(err.reason)}: {escape(err.message)}")
        _err().print(f"[yellow]hint:[/yellow] {escape(_hint(err, settings, service))}")
        raise typer.Exit(code) from None
    except KeyboardInterrupt:
        raise typer.Exit(130) from None


def _client(settings: Settings) -> Reader:
    """The operator's view with the operator token, or the agent's with an agent credential."""
    secret, as_agent = settings.secret()
    if as_agent:
        return AgentView(settings.hub, secret, tls=settings.tls_setting(), timeout=settings.timeout)
    return OperatorClient(settings.hub, secret, tls=settings.tls_setting(), timeout=settings.timeout)


def _channel_names(described: operator_pb2.OperatorServiceDescribeChannelResponse) -> dict[str, str]:
    """Agent id → name of a channel's participants (the senders of its envelopes)."""
    return {p.agent_id: p.name for p in described.channel.participants if p.name}


async def _agent_names(client: Reader, agent_ids: Iterable[str]) -> dict[str, str]:
    """Agent id → name of these identities (one DescribeAgent each; an unknown one keeps its id)."""

    async def name(agent_id: str) -> tuple[str, str]:
        try:
            return agent_id, (await client.describe_agent(agent_id)).passport.name or agent_id
        except NotFound:
            return agent_id, agent_id

    return dict(await asyncio.gather(*(name(a) for a in set(agent_ids) if a)))


def _show(json_: bool, value: Any, human: Callable[[], RenderableType]) -> None:
    """Print ``value`` as one JSON document with ``--json``, else what ``human`` draws."""
    if json_:
        _out().print_json(render.dumps(render.to_json(value)))
    else:
        _out().print(human())


def _show_line(out: Console, json_: bool, value: Any, human: Callable[[], RenderableType]) -> None:
    """One item of a stream: a JSON line with ``--json``, else what ``human`` draws."""
    if json_:
        out.print(render.dumps(render.to_json(value)), markup=False, highlight=False, soft_wrap=True)
    else:
        out.print(human())


@app.callback()
def main_options(
    ctx: typer.Context,
    hub: Annotated[
        str, typer.Option(envvar="AGENTNET_HUB", help="Hub host:port, or several replicas 'a:p,b:q'.")
    ] = DEFAULT_HUB,
    knowledge: Annotated[
        str, typer.Option(envvar="AGENTNET_KNOWLEDGE", help="Knowledge service host:port.")
    ] = DEFAULT_KNOWLEDGE,
    data_dir: Annotated[
        Path, typer.Option(envvar="AGENTNET_DATA_DIR", help="The services' data directory (default token files).")
    ] = Path("data"),
    token_file: Annotated[
        Path | None,
        typer.Option(
            envvar="AGENTNET_OPERATOR_TOKEN_FILE",
            help="The hub's operator token file [default: <data-dir>/hub-operator.token; or AGENTNET_OPERATOR_TOKEN].",
        ),
    ] = None,
    credential_file: Annotated[
        Path | None,
        typer.Option(
            envvar="AGENTNET_CREDENTIAL_FILE", help="An agent's SDK credential file: that agent's view instead."
        ),
    ] = None,
    knowledge_token_file: Annotated[
        Path | None,
        typer.Option(
            envvar="AGENTNET_KNOWLEDGE_TOKEN_FILE",
            help="Knowledge token file [default: <data-dir>/knowledge.token; or AGENTNET_KNOWLEDGE_TOKEN].",
        ),
    ] = None,
    namespace: Annotated[
        str, typer.Option(envvar="AGENTNET_KNOWLEDGE_NAMESPACE", help="Knowledge namespace.")
    ] = "default",
    tls: Annotated[bool, typer.Option("--tls", envvar="AGENTNET_TLS", help="TLS with the default roots.")] = False,
    tls_ca: Annotated[Path | None, typer.Option(envvar="AGENTNET_TLS_CA", help="PEM CA of the servers.")] = None,
    tls_cert: Annotated[
        Path | None, typer.Option(envvar="AGENTNET_TLS_CERT", help="Client certificate (mTLS).")
    ] = None,
    tls_key: Annotated[Path | None, typer.Option(envvar="AGENTNET_TLS_KEY", help="Client key (mTLS).")] = None,
    tls_server_name: Annotated[
        str, typer.Option(envvar="AGENTNET_TLS_SERVER_NAME", help="Verify the servers' certificates for this name.")
    ] = "",
    timeout: Annotated[float, typer.Option(envvar="AGENTNET_TIMEOUT", help="Seconds per call.")] = 30.0,
) -> None:
    """Where the services are and which secret to send (options win over environment variables)."""
    ctx.obj = Settings(
        hub=hub,
        knowledge=knowledge,
        data_dir=data_dir,
        token_file=token_file,
        credential_file=credential_file,
        knowledge_token_file=knowledge_token_file,
        namespace=namespace,
        tls=tls,
        tls_ca=tls_ca,
        tls_cert=tls_cert,
        tls_key=tls_key,
        tls_server_name=tls_server_name,
        timeout=timeout,
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


# -- console --------------------------------------------------------------------------------


@app.command()
def console(
    ctx: typer.Context,
    host: Annotated[
        str, typer.Option(envvar="AGENTNET_CONSOLE_HOST", help="Listen on this address (loopback unless --insecure).")
    ] = "127.0.0.1",
    port: Annotated[
        int, typer.Option(envvar="AGENTNET_CONSOLE_PORT", help="Listen on this port (0 = any free one).")
    ] = 8080,
    insecure: Annotated[
        bool,
        typer.Option(
            "--insecure",
            envvar="AGENTNET_CONSOLE_INSECURE",
            help="Allow a non-loopback address (plain HTTP: only behind a TLS-terminating proxy).",
        ),
    ] = False,
    page_size: Annotated[
        int, typer.Option(envvar="AGENTNET_CONSOLE_PAGE_SIZE", help="Rows per page (1 to 1000).")
    ] = ConsoleOptions.page_size,
    session_idle: Annotated[
        float,
        typer.Option(envvar="AGENTNET_CONSOLE_SESSION_IDLE", help="Seconds a session may stay unused before it ends."),
    ] = ConsoleOptions.session_idle_seconds,
    max_sessions: Annotated[
        int,
        typer.Option(envvar="AGENTNET_CONSOLE_MAX_SESSIONS", help="Sessions at once (a new one ends the oldest)."),
    ] = ConsoleOptions.max_sessions,
    max_live_streams: Annotated[
        int, typer.Option(envvar="AGENTNET_CONSOLE_MAX_LIVE_STREAMS", help="Live streams open at once (more: 503).")
    ] = ConsoleOptions.max_live_streams,
    live_rows: Annotated[
        int, typer.Option(envvar="AGENTNET_CONSOLE_LIVE_ROWS", help="Rows a live page keeps (the oldest go).")
    ] = ConsoleOptions.live_rows,
    event_text_bytes: Annotated[
        int,
        typer.Option(envvar="AGENTNET_CONSOLE_EVENT_TEXT_BYTES", help="Bytes of an envelope's event data shown."),
    ] = ConsoleOptions.max_event_text_bytes,
    list_refresh: Annotated[
        float,
        typer.Option(
            envvar="AGENTNET_CONSOLE_LIST_REFRESH",
            help="Seconds between an open list page's reads of the hub (its rows update live).",
        ),
    ] = ConsoleOptions.list_refresh_seconds,
    login_link: Annotated[
        bool,
        typer.Option(
            "--login-link/--no-login-link",
            envvar="AGENTNET_CONSOLE_LOGIN_LINK",
            help="Print a one-time login URL that logs in with the operator token (--token-file, "
            "<data-dir>/hub-operator.token or AGENTNET_OPERATOR_TOKEN) when it can be read.",
        ),
    ] = True,
) -> None:
    """Serve the live web console for operators: open the one-time login link it prints, or log in with
    the hub's operator token."""
    try:
        from agentsdk.console.app import Console
        from agentsdk.console.server import ConsoleAddressError, bind, serve
    except MissingExtra as err:  # starlette, uvicorn or jinja2 not installed
        _err().print(f"[red]error:[/red] {escape(str(err))}")
        raise typer.Exit(2) from None

    settings = _settings(ctx)
    try:
        options = ConsoleOptions(
            page_size=page_size,
            session_idle_seconds=session_idle,
            max_sessions=max_sessions,
            max_live_streams=max_live_streams,
            live_rows=live_rows,
            max_event_text_bytes=event_text_bytes,
            list_refresh_seconds=list_refresh,
        )
        tls = settings.tls_setting()
        sock = bind(host, port, insecure=insecure)
    except (ValueError, SettingsError, ConsoleAddressError) as err:
        _err().print(f"[red]error:[/red] {escape(str(err))}")
        raise typer.Exit(2) from None
    app_ = Console(settings.hub, tls=tls, timeout=settings.timeout, options=options)
    login_path = ""
    if login_link:
        try:
            login_path = app_.login_link(settings.operator_token())
        except SettingsError as err:
            if settings.token_file is not None:  # asked for this file: say it cannot be read
                sock.close()
                _err().print(f"[red]error:[/red] {escape(str(err))}")
                raise typer.Exit(2) from None
            _err().print(f"no login link ({err}); log in by pasting the operator token.", markup=False)
    serve(app_, sock, login_path)


# -- knowledge ------------------------------------------------------------------------------


async def _with_knowledge(settings: Settings, work: Callable[[KnowledgeRpc], Awaitable[T]]) -> T:
    channel = open_channel(settings.knowledge, settings.tls_setting())
    try:
        return await work(KnowledgeRpc(channel, settings.knowledge_token(), timeout=settings.timeout))
    finally:
        await channel.close()


@knowledge_app.command("ls")
def knowledge_ls(
    ctx: typer.Context, path: Annotated[str, typer.Argument(help="A directory.")] = "", json_: JsonOption = False
) -> None:
    """List a directory."""

    async def work(settings: Settings) -> None:
        request = knowledge_pb2.ListRequest(namespace=settings.namespace, path=path)
        response = await _with_knowledge(settings, lambda rpc: rpc.list(request))
        _show(json_, list(response.entries), lambda: Text("\n".join(response.entries)))

    _run(ctx, work, "knowledge")


@knowledge_app.command("cat")
def knowledge_cat(ctx: typer.Context, path: Annotated[str, typer.Argument()], json_: JsonOption = False) -> None:
    """Print a file."""

    async def work(settings: Settings) -> None:
        request = knowledge_pb2.ReadRequest(namespace=settings.namespace, path=path)
        response = await _with_knowledge(settings, lambda rpc: rpc.read(request))
        if json_:
            _show(json_, {"path": path, **render.as_json(response)}, Text)
            return
        sys.stdout.write(response.content)  # the file as it is, not drawn
        sys.stdout.flush()

    _run(ctx, work, "knowledge")


@knowledge_app.command("put")
def knowledge_put(
    ctx: typer.Context,
    path: Annotated[str, typer.Argument()],
    source: Annotated[Path | None, typer.Argument(help="A local file (default: read stdin).")] = None,
    json_: JsonOption = False,
) -> None:
    """Write a file from a local file or stdin."""

    async def work(settings: Settings) -> None:
        try:
            content = source.read_text(encoding="utf-8") if source is not None else sys.stdin.read()
        except (OSError, UnicodeDecodeError) as err:
            raise SettingsError(
                f"cannot read {source or 'stdin'}: {getattr(err, 'strerror', None) or err}. Give a readable UTF-8 "
                "text file, or pipe the content on stdin."
            ) from None
        request = knowledge_pb2.WriteRequest(namespace=settings.namespace, path=path, content=content)
        response = await _with_knowledge(settings, lambda rpc: rpc.write(request))
        wrote = Text(f"wrote {path} ({response.size} bytes, version {response.version})")
        _show(json_, {"path": path, **render.as_json(response)}, lambda: wrote)

    _run(ctx, work, "knowledge")


@knowledge_app.command("rm")
def knowledge_rm(ctx: typer.Context, path: Annotated[str, typer.Argument()], json_: JsonOption = False) -> None:
    """Delete a file."""

    async def work(settings: Settings) -> None:
        request = knowledge_pb2.DeleteRequest(namespace=settings.namespace, path=path)
        await _with_knowledge(settings, lambda rpc: rpc.delete(request))
        _show(json_, {"path": path, "deleted": True}, lambda: Text(f"deleted {path}"))

    _run(ctx, work, "knowledge")


def _change_line(change: knowledge_pb2.ChangeEvent) -> Text:
    kind = render.enum_name(knowledge_pb2.ChangeKind, change.kind, "CHANGE_KIND_")
    return Text(f"{kind:<8} {change.path}  v{change.version} {change.size} bytes")


@knowledge_app.command("watch")
def knowledge_watch(
    ctx: typer.Context,
    prefix: Annotated[str, typer.Argument(help='A path prefix ("" = the whole namespace).')] = "",
    json_: JsonOption = False,
) -> None:
    """Print each change at or under a path as it happens (Ctrl-C stops)."""

    async def work(settings: Settings) -> None:
        async def watch(rpc: KnowledgeRpc) -> None:
            stream = rpc.watch(knowledge_pb2.WatchRequest(namespace=settings.namespace, prefix=prefix))
            out = _out()
            try:
                while (frame := await stream.read()) is not None:
                    if frame.WhichOneof("frame") == "subscribed":
                        _err().print(f"watching {prefix or '/'} in {settings.namespace}", markup=False)
                        continue
                    _show_line(out, json_, frame.change, partial(_change_line, frame.change))
            finally:
                stream.cancel()

        await _with_knowledge(settings, watch)

    _run(ctx, work, "knowledge")


# Modules that register more commands on the app above: backup and export, mcp.
from agentsdk.cli import data, mcp_command  # noqa: E402, F401


def main() -> None:
    """The ``agentnet`` entry point."""
    app()


if __name__ == "__main__":
    # Run as ``python -m agentsdk.cli.app`` this file is ``__main__``, while the modules above register
    # their commands on ``agentsdk.cli.app``: run that copy, which has every command.
    from agentsdk.cli import app as registered

    registered.main()
