"""``agentnet mcp``: serve one person-kind hub identity to an MCP host (:mod:`agentsdk.mcp_server`),
on stdio (what hosts launch) or streamable HTTP (``--http PORT``). docs/mcp.md shows the host
configuration."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from agentsdk.cli.common import _err, _run, _settings, app
from agentsdk.cli.settings import Settings
from netkernel.extras import MissingExtra


@app.command("mcp")
def mcp_command(
    ctx: typer.Context,
    register: Annotated[
        str | None,
        typer.Option(
            help="Register a new person-kind identity of this name and keep its credential in the global "
            "--credential-file (0600); an existing file is resumed instead."
        ),
    ] = None,
    http: Annotated[
        int | None,
        typer.Option("--http", help="Serve streamable HTTP on this port (0: any free one) at /mcp instead of stdio."),
    ] = None,
    http_host: Annotated[
        str, typer.Option(help="Where --http listens: loopback unless --http-cert/--http-key and --http-token-file.")
    ] = "127.0.0.1",
    http_cert: Annotated[Path | None, typer.Option(help="PEM certificate chain: serve HTTPS.")] = None,
    http_key: Annotated[Path | None, typer.Option(help="PEM private key of --http-cert.")] = None,
    http_token_file: Annotated[
        Path | None, typer.Option(help="A file holding the bearer token every HTTP request must carry.")
    ] = None,
) -> None:
    """Serve one hub identity over MCP (stdio by default): its network tools and ask(agent, question),
    its channels and transcripts as resources. The identity is the global --credential-file's (a
    person-kind identity's; given after ``mcp`` too, like every global option)."""
    try:
        from agentsdk.mcp_server import ServeOptions, serve
    except MissingExtra as err:
        _err().print(f"[red]error:[/red] {escape(str(err))}")
        raise typer.Exit(2) from None
    path = _settings(ctx).credential_file
    if path is None:
        _err().print(
            "[red]error:[/red] agentnet mcp needs --credential-file FILE (with --register NAME to register a new "
            "person-kind identity there)."
        )
        raise typer.Exit(2)

    async def work(settings: Settings) -> None:
        await serve(
            ServeOptions(
                hub=settings.hub,
                credential_file=path,
                tls=settings.tls_setting(),
                register=register,
                http_port=http,
                http_host=http_host,
                http_cert=http_cert,
                http_key=http_key,
                http_token_file=http_token_file,
            )
        )

    _run(ctx, work)
