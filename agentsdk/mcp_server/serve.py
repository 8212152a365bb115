"""Run ``agentnet mcp``: connect to the hub as the identity of a credential file and serve it over
stdio, or over streamable HTTP (loopback, unless served with TLS and a bearer token)."""

from __future__ import annotations

import hmac
import ipaddress
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentsdk.mcp_server.server import NetworkMCPServer, log
from agentsdk.network.clients import HumanClient
from agentsdk.network.credentials import CredentialFile
from agentsdk.network.hub_client import HubClient
from agentsdk.tls import TlsSetting
from netkernel.errors import FailedPrecondition, InvalidArgument
from netkernel.identity import Passport

MAX_HTTP_SESSIONS = 16
"""Streamable HTTP sessions at once (the ``mcp`` package refuses more until one ends or idles out)."""

MAX_QUEUED_ENVELOPES = 1000
"""Envelopes the identity holds for its waiting ``ask`` calls (beyond it the oldest are dropped; each
``ask`` takes its reply as it arrives, and the WAL keeps everything)."""
MAX_QUEUED_BYTES = 16 * 1024 * 1024
"""Bytes of those envelopes."""


@dataclass(frozen=True)
class ServeOptions:
    """What ``agentnet mcp`` was told."""

    hub: str
    """The hub's ``host:port`` (or several replicas)."""
    credential_file: Path
    """The identity's credential file."""
    tls: TlsSetting = None
    """TLS to the hub."""
    register: str | None = None
    """Register a new person-kind identity of this name when the file holds none."""
    http_port: int | None = None
    """Serve streamable HTTP on this port (0: any free one) instead of stdio."""
    http_host: str = "127.0.0.1"
    """Where the HTTP server listens."""
    http_cert: Path | None = None
    """PEM certificate chain to serve HTTPS with (with :attr:`http_key`)."""
    http_key: Path | None = None
    """The private key of :attr:`http_cert`."""
    http_token_file: Path | None = None
    """A file whose first line is the bearer token every HTTP request must carry."""


def is_loopback(host: str) -> bool:
    """Whether ``host`` only accepts connections from this machine (``localhost``, 127.0.0.0/8, ::1)."""
    name = host.strip().strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def check_http(options: ServeOptions) -> str:
    """The HTTP bearer token ("" for none); InvalidArgument when the options do not fit together."""
    if bool(options.http_cert) != bool(options.http_key):
        raise InvalidArgument("--http-cert and --http-key go together: give both to serve HTTPS, or neither.")
    token = ""
    if options.http_token_file is not None:
        try:
            token = (options.http_token_file.read_text(encoding="utf-8").split() or [""])[0]
        except OSError as err:
            raise InvalidArgument(f"cannot read --http-token-file {options.http_token_file}: {err.strerror}") from None
        if not token:
            raise InvalidArgument(f"--http-token-file {options.http_token_file} is empty: put a bearer token in it.")
    if not is_loopback(options.http_host) and not (options.http_cert and token):
        raise InvalidArgument(
            f"{options.http_host!r} is not a loopback address: whoever reaches the endpoint acts as this identity, "
            "so listen on 127.0.0.1 (the default), or serve HTTPS (--http-cert, --http-key) with a bearer token "
            "(--http-token-file)."
        )
    return token


async def open_identity(hub: HubClient, options: ServeOptions) -> HumanClient:
    """Resume the person-kind identity of the credential file, or register it (``register``) and keep
    its credential there (0600). A file holding another name than ``register`` is refused."""
    file = CredentialFile(options.credential_file)
    saved = file.load()
    if saved is None and options.register is None:
        raise FailedPrecondition(
            f"no credential in {file.path}: pass --register NAME to register a new person-kind identity and keep "
            "its credential there, or point --credential-file at the file of an existing one."
        )
    if saved is not None and saved.kind != "human":
        raise FailedPrecondition(
            f"{file.path} holds {saved.name!r}, an identity of kind {saved.kind}: agentnet mcp serves a person-kind "
            "identity (an agent is served by its own program). Use --register NAME with a new file."
        )
    name = options.register if options.register is not None else saved.name if saved is not None else ""
    return await hub.register_human(
        Passport(name=name, kind="human"),
        credential_file=file.path,
        max_queued_envelopes=MAX_QUEUED_ENVELOPES,
        max_queued_bytes=MAX_QUEUED_BYTES,
    )


async def serve(options: ServeOptions) -> None:
    """Serve the identity until the host ends the session (stdio) or the process is stopped (HTTP)."""
    token = check_http(options) if options.http_port is not None else ""
    async with HubClient.connect(options.hub, tls=options.tls) as hub:
        client = await open_identity(hub, options)
        server = NetworkMCPServer(client)
        log(f"agentnet mcp: serving {client.name} ({client.agent_id}) from hub {options.hub}")
        if options.http_port is None:
            await server.run_stdio()
        else:
            await _serve_http(server, options, token)


async def _serve_http(server: NetworkMCPServer, options: ServeOptions, token: str) -> None:
    import uvicorn

    host = options.http_host.strip("[]")
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, options.http_port or 0))
    except OSError as err:
        sock.close()
        raise InvalidArgument(f"cannot listen on {options.http_host}:{options.http_port} ({err.strerror}).") from None
    sock.listen(128)
    app: Any = server.http_app(host=host, max_sessions=MAX_HTTP_SESSIONS)
    if token:
        app = BearerToken(app, token)
    config = uvicorn.Config(
        app,
        log_level="warning",
        ssl_certfile=str(options.http_cert) if options.http_cert else None,
        ssl_keyfile=str(options.http_key) if options.http_key else None,
    )
    scheme = "https" if options.http_cert else "http"
    port = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    log(f"agentnet mcp listening on {scheme}://{shown}:{port}/mcp")
    try:
        await uvicorn.Server(config).serve(sockets=[sock])
    finally:
        await server.subscriptions.close()


class BearerToken:
    """ASGI middleware: HTTP requests without ``Authorization: Bearer <token>`` get 401."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """Pass an authorised request (and any non-HTTP event) on; answer any other 401."""
        if scope["type"] == "http":
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(given, self._expected):
                await send(
                    {"type": "http.response.start", "status": 401, "headers": [(b"content-type", b"text/plain")]}
                )
                await send(
                    {"type": "http.response.body", "body": b"a bearer token is required (Authorization header)\n"}
                )
                return
        await self.app(scope, receive, send)
