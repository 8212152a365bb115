"""The console's ASGI app: the login guard, the pages, and the routes of the live streams (server-sent
events, produced by :mod:`agentsdk.console.live`).

Every page and stream needs a session: a page without one redirects to ``/login``, a stream or any
other data endpoint answers 401. A session is made by POSTing the operator token to ``/login`` (or by
opening a one-time login link, ``/login?once=…``: :mod:`agentsdk.console.login_links`); the hub checks
the token (``GetStatus``), and the session keeps it server-side. Forms carry a CSRF token
and POSTs from another origin are refused. Everything shown is escaped by the templates; the pages
allow no inline script (Content-Security-Policy)."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote

from agentnet.v1 import channel_pb2, envelope_pb2, hub_pb2, identity_pb2

from netkernel.extras import missing_extra

try:
    import jinja2
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response, StreamingResponse
    from starlette.routing import Mount, Route
    from starlette.staticfiles import StaticFiles
    from starlette.types import ASGIApp, Message, Receive, Scope, Send
except ImportError as exc:
    raise missing_extra("console", exc) from exc

from agentsdk.cli.render import channel_state, enum_name, task_state, when
from agentsdk.console import views
from agentsdk.console.live import KEEPALIVE_SECONDS, LiveStreams, digest, int_param
from agentsdk.console.login_links import LoginLinks
from agentsdk.console.options import ConsoleOptions
from agentsdk.console.sessions import Session, SessionStore
from agentsdk.operator import OperatorClient
from agentsdk.tls import TlsSetting
from netkernel.errors import (
    AgentNetError,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    Unauthenticated,
    http_status,
)

COOKIE = "agentnet_console"
"""The session cookie: a random id (the token stays on the server)."""
LOGIN_COOKIE = "agentnet_console_login"
"""The login form's nonce (its CSRF token is derived from it)."""
MAX_FORM_BYTES = 16 * 1024
"""A form body larger than this is refused (413)."""
MAX_TOKEN_BYTES = 4096
"""A token longer than this is refused at the login form."""
SECURITY_HEADERS = [
    (
        b"content-security-policy",
        b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
        b"form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"same-origin"),  # no-referrer would make form POSTs "Origin: null"
    (b"cache-control", b"no-store"),
]
HERE = Path(__file__).parent


class SecurityHeaders:
    """ASGI middleware: every response gets :data:`SECURITY_HEADERS`."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *SECURITY_HEADERS]
            await send(message)

        await self.app(scope, receive, send_with_headers)


def _safe_next(value: str) -> str:
    """Where to go after logging in: a path of this console only (never another site)."""
    if value.startswith("/") and not value.startswith("//") and "\\" not in value:
        return value
    return "/"


class Console:
    """The console's state (sessions, live streams) and its routes."""

    def __init__(
        self, hub: str, *, tls: TlsSetting = None, timeout: float = 30.0, options: ConsoleOptions | None = None
    ) -> None:
        self.hub = hub
        self.tls = tls
        self.timeout = timeout
        self.options = options or ConsoleOptions()
        self.sessions = SessionStore(self.options)
        self.login_links = LoginLinks()
        self.live_streams = 0
        self.templates = jinja2.Environment(
            loader=jinja2.FileSystemLoader(HERE / "templates"),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
        )
        self.templates.globals.update(
            when=when,
            channel_state=channel_state,
            task_state=task_state,
            enum_name=enum_name,
            passport_kind=lambda kind: enum_name(identity_pb2.PassportKind, kind, "PASSPORT_KIND_"),
            ParticipantRole=channel_pb2.ParticipantRole,
        )
        self.live = LiveStreams(self.options, self.templates, self._list_reader)
        """The live streams' events (:mod:`agentsdk.console.live`)."""

    # -- the app -------------------------------------------------------------------------

    def app(self) -> Starlette:
        """The ASGI app."""

        @asynccontextmanager
        async def lifespan(_app: Starlette) -> AsyncIterator[None]:
            yield
            await self.sessions.close()

        routes = [
            Route("/login", self.login_form, methods=["GET"]),
            Route("/login", self.login, methods=["POST"]),
            Route("/logout", self.logout, methods=["POST"]),
            Route("/", self._page(self.overview)),
            Route("/agents", self._page(self.agents)),
            Route("/agents/{agent:path}", self._page(self.agent)),
            Route("/channels", self._page(self.channels)),
            Route("/channels/{channel_id}/live", self._live(self.live.channel_live)),
            Route("/channels/{channel_id}", self._page(self.channel)),
            Route("/tasks", self._page(self.tasks)),
            Route("/audit", self._page(self.audit)),
            Route("/audit/live", self._live(self.live.audit_live)),
            Route("/live/{name}", self._live(self.live.list_live)),
            Route("/calls", self._page(self.calls)),
            Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
        ]
        app = Starlette(routes=routes, lifespan=lifespan)
        app.add_middleware(SecurityHeaders)
        return app

    def render(self, name: str, status_code: int = 200, **context: Any) -> HTMLResponse:
        """A page from its template (escaped)."""
        return HTMLResponse(self.templates.get_template(name).render(**context), status_code=status_code)

    async def _session(self, request: Request) -> Session | None:
        return await self.sessions.get(request.cookies.get(COOKIE))

    def _page(
        self, handler: Callable[[Request, Session], Awaitable[Response]]
    ) -> Callable[[Request], Awaitable[Response]]:
        """A page: redirect to the login form without a session; the hub's refusals as error pages."""

        async def endpoint(request: Request) -> Response:
            session = await self._session(request)
            if session is None:
                target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
                return RedirectResponse(f"/login?next={quote(target, safe='')}", status_code=303)
            try:
                return await handler(request, session)
            except (Unauthenticated, PermissionDenied):
                await self.sessions.end(session.sid)  # the hub no longer takes this token
                return RedirectResponse("/login", status_code=303)
            except AgentNetError as err:
                status = http_status(err)
                return self.render("error.html", status, session=session, error=err, hub=self.hub, active="")

        return endpoint

    def _live(
        self, handler: Callable[[Request, Session], Awaitable[AsyncIterator[str]]]
    ) -> Callable[[Request], Awaitable[Response]]:
        """A live stream (server-sent events): 401 without a session, 503 beyond the stream limit."""

        async def endpoint(request: Request) -> Response:
            session = await self._session(request)
            if session is None:
                return PlainTextResponse("log in first: no session.", status_code=401)
            if self.live_streams >= self.options.max_live_streams:
                return PlainTextResponse(
                    f"too many live streams open ({self.options.max_live_streams}): close a console tab, "
                    "or start the console with a larger --max-live-streams.",
                    status_code=503,
                )
            try:
                events = await handler(request, session)
            except AgentNetError as err:
                return PlainTextResponse(f"{err.reason}: {err.message}", status_code=400)
            return StreamingResponse(
                self._counted(events), media_type="text/event-stream", headers={"x-accel-buffering": "no"}
            )

        return endpoint

    async def _counted(self, events: AsyncIterator[str]) -> AsyncIterator[str]:
        self.live_streams += 1
        try:
            async for event in events:
                yield event
        finally:
            self.live_streams -= 1

    # -- login ---------------------------------------------------------------------------

    def _login_page(self, request: Request, status: int = 200, error: str = "", next_: str = "/") -> Response:
        nonce = secrets.token_urlsafe(16)
        response = self.render(
            "login.html",
            status,
            csrf=self.sessions.login_csrf(nonce),
            error=error,
            next=_safe_next(next_),
            hub=self.hub,
            session=None,
            active="",
        )
        response.set_cookie(LOGIN_COOKIE, nonce, max_age=3600, path="/login", httponly=True, samesite="strict")
        return response

    def login_link(self, operator_token: str) -> str:
        """The path of a one-time login link (``/login?once=…``) that logs in with ``operator_token``."""
        return f"/login?once={self.login_links.issue(operator_token)}"

    async def login_form(self, request: Request) -> Response:
        """The login form (a logged-in operator goes on to the overview); ``?once=LINK`` logs in with a
        one-time login link instead."""
        next_ = request.query_params.get("next", "/")
        if "once" in request.query_params:
            token = self.login_links.redeem(request.query_params["once"])
            if token is None:
                return self._login_page(
                    request,
                    401,
                    "This login link was used already or expired: paste the operator token, or restart "
                    "`agentnet console` for a new link.",
                    next_,
                )
            return await self._start_session(request, token, next_)
        if await self._session(request) is not None:
            return RedirectResponse(_safe_next(next_), status_code=303)
        return self._login_page(request, next_=next_)

    async def _form(self, request: Request) -> dict[str, str] | Response:
        """The POSTed form fields, or the refusal (another origin, too big)."""
        origin = request.headers.get("origin")
        if origin is not None and origin != f"{request.url.scheme}://{request.url.netloc}":
            return PlainTextResponse("refused: the form was sent from another site.", status_code=403)
        body = b""
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_FORM_BYTES:
                return PlainTextResponse(f"refused: a form is at most {MAX_FORM_BYTES} bytes.", status_code=413)
        fields = parse_qs(body.decode(errors="replace"), keep_blank_values=True, max_num_fields=8)
        return {key: values[0] for key, values in fields.items()}

    async def login(self, request: Request) -> Response:
        """Check the POSTed token with the hub; on success start a session (cookie: its random id)."""
        form = await self._form(request)
        if isinstance(form, Response):
            return form
        next_ = form.get("next", "/")
        if not self.sessions.login_csrf_ok(request.cookies.get(LOGIN_COOKIE), form.get("csrf", "")):
            return self._login_page(request, 403, "The form expired: log in again.", next_)
        token = form.get("token", "").strip()
        if not token or len(token.encode()) > MAX_TOKEN_BYTES or not token.isascii() or not token.isprintable():
            return self._login_page(request, 400, "Enter the hub's operator token (hub-operator.token).", next_)
        return await self._start_session(request, token, next_)

    async def _start_session(self, request: Request, token: str, next_: str) -> Response:
        """Check ``token`` with the hub; on success start a session (cookie: its random id) and go on."""
        client = OperatorClient(self.hub, token, tls=self.tls, timeout=self.timeout)
        try:
            await client.status()
        except AgentNetError as err:
            await client.close()
            if isinstance(err, Unauthenticated):
                return self._login_page(request, 401, "The hub does not accept this token.", next_)
            if isinstance(err, PermissionDenied):
                return self._login_page(
                    request, 403, "This is an agent's credential: log in with the hub's operator token.", next_
                )
            return self._login_page(request, 503, f"The hub at {self.hub} did not answer ({err.reason}).", next_)
        session = await self.sessions.create(client)
        response = RedirectResponse(_safe_next(next_), status_code=303)
        response.set_cookie(COOKIE, session.sid, path="/", httponly=True, samesite="strict")
        response.delete_cookie(LOGIN_COOKIE, path="/login")
        return response

    async def logout(self, request: Request) -> Response:
        """End the session (its live streams stop)."""
        session = await self._session(request)
        form = await self._form(request)
        if isinstance(form, Response):
            return form
        if session is not None:
            if not secrets.compare_digest(form.get("csrf", ""), session.csrf):
                return PlainTextResponse("refused: the logout form is not this session's.", status_code=403)
            await self.sessions.end(session.sid)
        response = RedirectResponse("/login", status_code=303)
        response.delete_cookie(COOKIE, path="/")
        return response

    # -- pages ---------------------------------------------------------------------------

    def _view(self, name: str, session: Session, active: str, **context: Any) -> Response:
        return self.render(name, session=session, hub=self.hub, active=active, **context)

    async def overview(self, request: Request, session: Session) -> Response:
        """The hub's status and counts."""
        status = await session.client.status()
        return self._view("overview.html", session, "overview", status=status)

    async def agents(self, request: Request, session: Session) -> Response:
        """One page of identities by name: online state, kind, capabilities and domains (kept current live)."""
        return await self._list_page("agents", request, session)

    async def _agents(self, request: Request, session: Session) -> dict[str, Any]:
        online = request.query_params.get("online") == "1"
        page = await session.client.list_agents(
            online_only=online, page_size=self.options.page_size, page_token=request.query_params.get("page_token", "")
        )
        return {"page": page, "online": online, "token": request.query_params.get("page_token", "")}

    async def agent(self, request: Request, session: Session) -> Response:
        """One identity's record: passport, resume, skill, A2A settings, presence."""
        record = await session.client.describe_agent(request.path_params["agent"])
        return self._view("agent.html", session, "agents", record=record)

    async def channels(self, request: Request, session: Session) -> Response:
        """One page of channels (newest first) by state and type, with participants and whose turn it is
        (kept current live)."""
        return await self._list_page("channels", request, session)

    async def _channels(self, request: Request, session: Session) -> dict[str, Any]:
        state = request.query_params.get("state", "")
        if state and state not in views.CHANNEL_STATES:
            raise InvalidArgument(
                f"unknown channel state {state[:40]!r}: use one of {', '.join(views.CHANNEL_STATES)}."
            )
        type_ = request.query_params.get("type", "")
        page = await session.client.list_channels(
            states=[views.CHANNEL_STATES[state]] if state else [],
            type=type_,
            page_size=self.options.page_size,
            page_token=request.query_params.get("page_token", ""),
        )
        turns = views.channel_turns(page)
        return {
            "page": page,
            "turns": turns,
            "state": state,
            "type": type_,
            "states": list(views.CHANNEL_STATES),
            "token": request.query_params.get("page_token", ""),
        }

    async def channel(self, request: Request, session: Session) -> Response:
        """A channel: who is in it and whose turn it is, and one page of its envelopes (the newest page
        follows new ones live)."""
        channel_id = request.path_params["channel_id"]
        before = int_param(request, "before")
        described = await session.client.describe_channel(channel_id)
        meta = described.channel
        first, last = views.wal_window(meta.last_seq, before, self.options.page_size)
        envelopes: list[envelope_pb2.Envelope] = []
        if last >= first:
            envelopes = [e async for e in session.client.read_wal(channel_id, from_seq=first, until_seq=last)]
        names = views.participant_names(meta)
        rows = [views.envelope_row(e, names, self.options.max_event_text_bytes) for e in envelopes]
        live = not before and views.is_live(meta)
        return self._view(
            "channel.html",
            session,
            "channels",
            described=described,
            meta=meta,
            names=names,
            turn=views.turn_text(meta, described.expected_next),
            adapter_state=views.adapter_state_text(
                described.adapter_state_json, names, self.options.max_event_text_bytes
            ),
            rows=rows,
            first=first,
            last=last,
            newest=not before or last >= meta.last_seq,
            live=live,
            live_rows=self.options.live_rows,
        )

    async def tasks(self, request: Request, session: Session) -> Response:
        """One page of tasks, newest first (running only unless ``all=1``; kept current live)."""
        return await self._list_page("tasks", request, session)

    async def _tasks(self, request: Request, session: Session) -> dict[str, Any]:
        include_ended = request.query_params.get("all") == "1"
        page = await session.client.list_tasks(
            include_ended=include_ended,
            page_size=self.options.page_size,
            page_token=request.query_params.get("page_token", ""),
        )
        return {"page": page, "include_ended": include_ended, "token": request.query_params.get("page_token", "")}

    def _list_reader(self, name: str) -> Callable[[Request, Session], Awaitable[dict[str, Any]]]:
        """What a list page shows (its template's context), read from the hub."""
        readers: dict[str, Callable[[Request, Session], Awaitable[dict[str, Any]]]] = {
            "agents": self._agents,
            "channels": self._channels,
            "tasks": self._tasks,
        }
        return readers[name]

    async def _list_page(self, name: str, request: Request, session: Session) -> Response:
        """A list page (agents, channels, tasks) whose rows its live stream keeps current."""
        context = await self._list_reader(name)(request, session)
        shown = digest(self.templates.get_template(f"_{name}_rows.html").render(**context))
        query = "&".join(f"{k}={quote(v, safe='')}" for k, v in request.query_params.items() if k != "shown")
        live_url = f"/live/{name}?{query}&shown={shown}" if query else f"/live/{name}?shown={shown}"
        return self._view(f"{name}.html", session, name, live_url=live_url, **context)

    async def audit(self, request: Request, session: Session) -> Response:
        """A page of the audit log: the newest records (followed live), or those after ``after``."""
        kind = request.query_params.get("kind", "")
        subject = request.query_params.get("subject", "")
        newest = "after" not in request.query_params
        if newest:
            after = max(
                0, await views.newest_audit_id(session.client, kind=kind, subject_id=subject) - self.options.page_size
            )
        else:
            after = int_param(request, "after")
        records: list[hub_pb2.AuditRecord] = await session.client.list_audit(
            kind=kind, subject_id=subject, after_id=after, limit=self.options.page_size
        )
        names = await views.agent_names(session.client, (r.actor_id for r in records))
        rows = [views.audit_row(r, self.options.max_event_text_bytes, names) for r in records]
        last_id = records[-1].audit_id if records else after
        return self._view(
            "audit.html",
            session,
            "audit",
            rows=rows,
            kind=kind,
            subject=subject,
            after=after,
            older=max(0, after - self.options.page_size) if after else None,
            next_after=last_id if len(records) == self.options.page_size else None,
            live=newest,
            last_id=last_id,
            live_rows=self.options.live_rows,
        )

    async def calls(self, request: Request, session: Session) -> Response:
        """The A2A call tree of an execution (its subtree) or of a root session; without one, the
        latest calls (from the audit log) to pick from."""
        wanted = request.query_params.get("id", "").strip()
        tree: list[views.CallNode] = []
        truncated = False
        if wanted:
            try:
                found = await session.client.list_executions(execution_id=wanted, limit=self.options.page_size)
            except NotFound:
                found = await session.client.list_executions(root_session_id=wanted, limit=self.options.page_size)
                if not found.executions:
                    raise NotFound(f"no A2A execution or root session is named {wanted!r}.") from None
            names = await views.agent_names(
                session.client, [a for e in found.executions for a in (e.caller_id, e.target_id)]
            )
            tree, truncated = views.call_tree(list(found.executions), names), found.truncated
        recent = [] if wanted else await views.recent_calls(session.client, self.options.page_size)
        return self._view("calls.html", session, "calls", wanted=wanted, tree=tree, truncated=truncated, recent=recent)


__all__ = ["COOKIE", "KEEPALIVE_SECONDS", "LOGIN_COOKIE", "Console", "SecurityHeaders"]
