"""The ``agentnet`` commands (typer): status, agents, channels, tasks, describe, tail, wal, audit,
calls, knowledge and console (the web console: :mod:`agentsdk.console`). Every command has ``--json``;
a failure prints the reason and what to do and exits non-zero (:data:`EXIT_CODES`)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Annotated, Any, TypeVar

import grpc
import typer
from agentnet.v1 import channel_pb2, envelope_pb2, identity_pb2, knowledge_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from rich.console import Console
from rich.markup import escape
from rich.progress import Progress
from rich.text import Text

from agentsdk.cli import render
from agentsdk.cli.settings import DEFAULT_HUB, DEFAULT_KNOWLEDGE, Settings, SettingsError
from agentsdk.console.options import ConsoleOptions
from agentsdk.knowledge.rpc import KnowledgeRpc
from agentsdk.operator import OperatorClient
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
    help="Look at a running agent network: the hub's agents, channels, WALs, tasks, audit log and A2A calls, "
    "and the knowledge service's files.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
knowledge_app = typer.Typer(help="Files of a knowledge-service namespace.", no_args_is_help=True)
app.add_typer(knowledge_app, name="knowledge")

JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON (one object, or JSON lines for streams).")]


def _out() -> Console:
    return Console(soft_wrap=True, highlight=False)


def _err() -> Console:
    return Console(stderr=True, highlight=False)


def _settings(ctx: typer.Context) -> Settings:
    settings: Settings = ctx.obj
    return settings


def _hint(error: AgentNetError, settings: Settings, service: str) -> str:
    """What to do about ``error``."""
    where = settings.hub if service == "hub" else settings.knowledge
    flag = "--hub / AGENTNET_HUB" if service == "hub" else "--knowledge / AGENTNET_KNOWLEDGE"
    if isinstance(error, Unavailable):
        return f"is the {service} running at {where}? Point {flag} at it (and check the TLS options)."
    if isinstance(error, Unauthenticated):
        if service == "knowledge":
            return "the knowledge service does not know this token: check --knowledge-token-file."
        return "the hub does not know this secret: check --token-file (the hub's hub-operator.token) or the credential."
    if isinstance(error, PermissionDenied | NotParticipant):
        return (
            "this needs the hub's operator token: drop --credential-file / AGENTNET_CREDENTIAL and use "
            "--token-file (or, for an agent's own view, a channel that agent is in)."
            if service == "hub"
            else "the token does not grant this namespace: use --namespace with one it grants."
        )
    if isinstance(error, NotFound):
        return "check the id (agentnet channels / agents / tasks list them)."
    return "see docs/errors.md for this reason."


def _run(ctx: typer.Context, work: Callable[[Settings], Coroutine[Any, Any, None]], service: str = "hub") -> None:
    """Run a command's coroutine; turn a failure into its message, a hint and an exit status."""
    settings = _settings(ctx)
    try:
        asyncio.run(work(settings))
    except SettingsError as err:
        _err().print(f"[red]error:[/red] {escape(str(err))}")
        raise typer.Exit(2) from None
    except AgentNetError as err:
        code = next((c for cls, c in EXIT_CODES.items() if isinstance(err, cls)), 1)
        _err().print(f"[red]error:[/red] {escape(err.reason)}: {escape(err.message)}")
        _err().print(f"[yellow]hint:[/yellow] {escape(_hint(err, settings, service))}")
        raise typer.Exit(code) from None
    except KeyboardInterrupt:
        raise typer.Exit(130) from None


def _client(settings: Settings) -> tuple[OperatorClient, bool]:
    secret, as_agent = settings.secret()
    return OperatorClient(settings.hub, secret, tls=settings.tls_setting(), timeout=settings.timeout), as_agent


async def _names(client: OperatorClient, as_agent: bool) -> dict[str, str]:
    """Agent id → name for rendering (empty for an agent's view: its names are the ids)."""
    if as_agent:
        return {}
    return {a.agent_id: a.name for a in await client.agents()}


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
    """Health of the hub and the knowledge service; the hub's version, store, uptime and counts."""

    async def work(settings: Settings) -> None:
        hub_health, knowledge_health = await asyncio.gather(
            _health(settings.hub, settings), _health(settings.knowledge, settings)
        )
        client, _ = _client(settings)
        async with client:
            st = await client.status()
        if json_:
            data = render.as_json(st)
            data["health"] = {"hub": hub_health, "knowledge": knowledge_health}
            _out().print_json(render.dumps(data))
            return
        live = ", ".join(f"{render.channel_state(c.state)} {c.count}" for c in st.live_channels) or "none"
        rows = [
            ["hub", f"{settings.hub}: {hub_health}"],
            ["knowledge", f"{settings.knowledge}: {knowledge_health}"],
            ["version", st.version],
            ["store", f"{st.store_kind} {st.store_address}"],
            *([["replica", st.replica_id]] if st.replica_id else []),
            ["uptime", f"{st.uptime_seconds:.0f} s (since {render.when(st.started_at)} UTC)"],
            ["identities", f"{st.identities} ({st.online} online)"],
            ["live channels", live],
            ["running tasks", str(st.running_tasks)],
            ["connected streams", f"{st.connected_streams} (this replica)"],
        ]
        _out().print(render.table("agentnet status", ["", ""], rows))

    _run(ctx, work)


# -- lists ----------------------------------------------------------------------------------


@app.command()
def agents(
    ctx: typer.Context,
    online: Annotated[bool, typer.Option("--online", help="Only identities with a stream open.")] = False,
    limit: Annotated[int, typer.Option(help="At most this many (0 = all).")] = 0,
    json_: JsonOption = False,
) -> None:
    """Every registered identity, by name."""

    async def work(settings: Settings) -> None:
        client, _ = _client(settings)
        async with client:
            found = await client.agents(online_only=online, limit=limit)
        if json_:
            _out().print_json(render.dumps([render.as_json(a) for a in found]))
            return
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
        _out().print(render.table("agents", ["name", "agent", "kind", "online", "capabilities", "description"], rows))

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
    """Every channel, newest first."""

    async def work(settings: Settings) -> None:
        client, _ = _client(settings)
        async with client:
            found = await client.channels(states=_states(state or []), type=type_, limit=limit)
        if json_:
            _out().print_json(render.dumps([render.as_json(c) for c in found]))
            return
        _out().print(render.channels_table(found))

    _run(ctx, work)


@app.command()
def tasks(
    ctx: typer.Context,
    all_: Annotated[bool, typer.Option("--all", help="Ended tasks too.")] = False,
    limit: Annotated[int, typer.Option(help="At most this many (0 = all).")] = 0,
    json_: JsonOption = False,
) -> None:
    """Running tasks (every task with --all), newest first."""

    async def work(settings: Settings) -> None:
        client, _ = _client(settings)
        async with client:
            found = await client.tasks(include_ended=all_, limit=limit)
        if json_:
            _out().print_json(render.dumps([render.as_json(t) for t in found]))
            return
        _out().print(render.tasks_table(found))

    _run(ctx, work)


@app.command()
def describe(
    ctx: typer.Context,
    what: Annotated[str, typer.Argument(help="A channel id, a task id, or an agent id or name.")],
    json_: JsonOption = False,
) -> None:
    """One channel (metadata, participants, whose turn), task or agent."""

    async def work(settings: Settings) -> None:
        client, _ = _client(settings)
        async with client:
            found = await _describe(client, what)
        kind, message = found
        if json_:
            _out().print_json(render.dumps({"kind": kind, kind: render.as_json(message)}))
            return
        rows = render.channel_rows(message) if kind == "channel" else render.field_rows(message)
        _out().print(render.table(f"{kind} {what}", ["field", "value"], rows))

    _run(ctx, work)


async def _describe(client: OperatorClient, what: str) -> tuple[str, Any]:
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
        client, as_agent = _client(settings)
        async with client:
            names = await _names(client, as_agent)
            out = _out()
            async for env in client.read_wal(channel, from_seq=from_seq, follow=True, as_agent=as_agent):
                _print_envelope(out, env, names, json_)

    _run(ctx, work)


def _print_envelope(out: Console, env: envelope_pb2.Envelope, names: dict[str, str], json_: bool) -> None:
    if json_:
        out.print(render.dumps(render.as_json(env)), markup=False, highlight=False, soft_wrap=True)
    else:
        out.print(render.envelope_line(env, names))


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
        client, as_agent = _client(settings)
        async with client:
            names = await _names(client, as_agent)
            total = 0
            if not as_agent:
                last = (await client.describe_channel(channel)).channel.last_seq
                total = max(0, (until_seq or last) - max(from_seq, 1) + 1)
            out = _out()
            stream = client.read_wal(channel, from_seq=from_seq, until_seq=until_seq, as_agent=as_agent)
            if total < PROGRESS_AT:
                async for env in stream:
                    _print_envelope(out, env, names, json_)
                return
            with Progress(console=_err(), transient=True) as progress:
                bar = progress.add_task(f"reading {channel}", total=total)
                async for env in stream:
                    _print_envelope(out, env, names, json_)
                    progress.advance(bar)

    _run(ctx, work)


# -- audit and calls ------------------------------------------------------------------------


@app.command()
def audit(
    ctx: typer.Context,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep printing new records (Ctrl-C stops).")] = False,
    kind: Annotated[str, typer.Option(help="Only this kind, e.g. post_refused.")] = "",
    subject: Annotated[str, typer.Option(help="Only records about this agent, channel or task id.")] = "",
    after: Annotated[int, typer.Option(help="Only records after this audit id.")] = 0,
    limit: Annotated[int, typer.Option(help="Without --follow: at most this many (0 = 100).")] = 0,
    json_: JsonOption = False,
) -> None:
    """The hub's audit log (refusals, registrations, channel ends, policy reloads, …)."""

    async def work(settings: Settings) -> None:
        client, _ = _client(settings)
        out = _out()
        async with client:
            if not follow:
                records = await client.list_audit(kind=kind, subject_id=subject, after_id=after, limit=limit)
                if json_:
                    out.print_json(render.dumps([render.as_json(r) for r in records]))
                    return
                rows = (
                    [str(r.audit_id), render.when(r.created_at), r.kind, r.actor_id, r.subject_id, r.detail_json]
                    for r in records
                )
                out.print(render.table("audit", ["id", "at (UTC)", "kind", "actor", "subject", "detail"], rows))
                return
            async for r in client.follow_audit(kind=kind, subject_id=subject, after_id=after):
                if json_:
                    out.print(render.dumps(render.as_json(r)), markup=False, highlight=False, soft_wrap=True)
                else:
                    line = Text(f"{r.audit_id:>6} {render.when(r.created_at)} ", style="dim")
                    line.append(r.kind, style="bold")
                    line.append(f" actor={r.actor_id or 'hub'} subject={r.subject_id} {r.detail_json}")
                    out.print(line)

    _run(ctx, work)


@app.command()
def calls(
    ctx: typer.Context,
    execution: Annotated[str, typer.Argument(help="An A2A execution id (its subtree) or a root session id.")],
    limit: Annotated[int, typer.Option(help="At most this many executions (0 = 100).")] = 0,
    json_: JsonOption = False,
) -> None:
    """An A2A call tree: who called whom, with each call's status."""

    async def work(settings: Settings) -> None:
        client, as_agent = _client(settings)
        async with client:
            try:
                found = await client.list_executions(execution_id=execution, limit=limit)
            except NotFound:
                found = await client.list_executions(root_session_id=execution, limit=limit)
                if not found.executions:
                    raise NotFound(f"no A2A execution or root session is named {execution!r}.") from None
            names = await _names(client, as_agent)
        if json_:
            _out().print_json(render.dumps(render.as_json(found)))
            return
        title = f"A2A calls of {execution}" + (" (truncated)" if found.truncated else "")
        _out().print(render.call_tree(list(found.executions), names, title))

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
) -> None:
    """Serve the live web console for operators (log in with the hub's operator token)."""
    from agentsdk.console.app import Console
    from agentsdk.console.server import ConsoleAddressError, bind, serve

    settings = _settings(ctx)
    try:
        options = ConsoleOptions(
            page_size=page_size,
            session_idle_seconds=session_idle,
            max_sessions=max_sessions,
            max_live_streams=max_live_streams,
            live_rows=live_rows,
            max_event_text_bytes=event_text_bytes,
        )
        tls = settings.tls_setting()
        sock = bind(host, port, insecure=insecure)
    except (ValueError, SettingsError, ConsoleAddressError) as err:
        _err().print(f"[red]error:[/red] {escape(str(err))}")
        raise typer.Exit(2) from None
    serve(Console(settings.hub, tls=tls, timeout=settings.timeout, options=options), sock)


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
        if json_:
            _out().print_json(render.dumps(list(response.entries)))
            return
        for entry in response.entries:
            _out().print(entry, markup=False)

    _run(ctx, work, "knowledge")


@knowledge_app.command("cat")
def knowledge_cat(ctx: typer.Context, path: Annotated[str, typer.Argument()], json_: JsonOption = False) -> None:
    """Print a file."""

    async def work(settings: Settings) -> None:
        request = knowledge_pb2.ReadRequest(namespace=settings.namespace, path=path)
        response = await _with_knowledge(settings, lambda rpc: rpc.read(request))
        if json_:
            _out().print_json(render.dumps({"path": path, **render.as_json(response)}))
            return
        sys.stdout.write(response.content)
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
        content = source.read_text(encoding="utf-8") if source is not None else sys.stdin.read()
        request = knowledge_pb2.WriteRequest(namespace=settings.namespace, path=path, content=content)
        response = await _with_knowledge(settings, lambda rpc: rpc.write(request))
        if json_:
            _out().print_json(render.dumps({"path": path, **render.as_json(response)}))
            return
        _out().print(f"wrote {path} ({response.size} bytes, version {response.version})", markup=False)

    _run(ctx, work, "knowledge")


@knowledge_app.command("rm")
def knowledge_rm(ctx: typer.Context, path: Annotated[str, typer.Argument()], json_: JsonOption = False) -> None:
    """Delete a file."""

    async def work(settings: Settings) -> None:
        request = knowledge_pb2.DeleteRequest(namespace=settings.namespace, path=path)
        await _with_knowledge(settings, lambda rpc: rpc.delete(request))
        if json_:
            _out().print_json(render.dumps({"path": path, "deleted": True}))
            return
        _out().print(f"deleted {path}", markup=False)

    _run(ctx, work, "knowledge")


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
                    change = frame.change
                    if json_:
                        out.print(render.dumps(render.as_json(change)), markup=False, soft_wrap=True)
                    else:
                        kind = render.enum_name(knowledge_pb2.ChangeKind, change.kind, "CHANGE_KIND_")
                        out.print(f"{kind:<8} {change.path}  v{change.version} {change.size} bytes", markup=False)
            finally:
                stream.cancel()

        await _with_knowledge(settings, watch)

    _run(ctx, work, "knowledge")


def main() -> None:
    """The ``agentnet`` entry point."""
    app()


if __name__ == "__main__":
    main()
