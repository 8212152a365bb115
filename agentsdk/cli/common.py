"""The ``agentnet`` application itself: the Typer app and its ``knowledge`` group, the global options,
and what every command uses (settings, running a coroutine with errors turned into a reason, a hint and
an exit status (:data:`EXIT_CODES`), printing JSON or a table). The commands live in the modules
:mod:`agentsdk.cli.app` imports; they register on :data:`app` here."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Coroutine, Iterable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from agentnet.v1 import operator_pb2
from rich.console import Console, RenderableType
from rich.markup import escape

from agentsdk.cli import render
from agentsdk.cli.anywhere import GlobalOptionsGroup
from agentsdk.cli.settings import DEFAULT_HUB, DEFAULT_KNOWLEDGE, Settings, SettingsError
from agentsdk.operator import AgentView, OperatorClient, OperatorOnly
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
