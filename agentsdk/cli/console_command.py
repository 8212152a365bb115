"""The ``agentnet console`` command: serves the web console (:mod:`agentsdk.console`)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape

from agentsdk.cli.common import (
    _err,
    _settings,
    app,
)
from agentsdk.cli.settings import SettingsError
from agentsdk.console.options import ConsoleOptions
from netkernel.extras import MissingExtra

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
