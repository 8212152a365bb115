"""The console's live streams (server-sent events): a channel's envelopes and head as they change, the
audit log as it is written, and a list page's rows read again at an interval. :class:`LiveStreams`
produces the events; :class:`~agentsdk.console.app.Console` guards and counts the streams."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

from agentnet.v1 import envelope_pb2, hub_pb2

from netkernel.extras import missing_extra

try:
    import jinja2
    from starlette.requests import Request
except ImportError as exc:
    raise missing_extra("console", exc) from exc

from agentsdk.console import views
from agentsdk.console.options import ConsoleOptions
from agentsdk.console.sessions import Session
from netkernel.errors import (
    AgentNetError,
    InvalidArgument,
    NotFound,
)

T = TypeVar("T")

KEEPALIVE_SECONDS = 15.0
"""A quiet live stream sends a comment this often (so a closed browser tab is noticed)."""
_END = object()

ListReader = Callable[[str], Callable[[Request, Session], Awaitable[dict[str, Any]]]]
"""What a list page shows (its template's context) by list name, read from the hub."""


def sse(event: str, data: dict[str, Any], event_id: int | None = None) -> str:
    """One server-sent event (JSON data on one line)."""
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"


def digest(html: str) -> str:
    """A short fingerprint of rendered rows: the live stream sends them only when the page shows others."""
    return hashlib.sha256(html.encode()).hexdigest()[:16]


def int_param(request: Request, name: str) -> int:
    """A non-negative integer query parameter (0 when absent)."""
    raw = request.query_params.get(name, "")
    if not raw:
        return 0
    if not raw.isdigit() or len(raw) > 19:
        raise InvalidArgument(f"{name} must be a whole number of at most 19 digits, not {raw[:40]!r}.")
    return int(raw)


class LiveStreams:
    """The console's live streams, on its options and templates; ``list_reader`` reads a list page's rows."""

    def __init__(self, options: ConsoleOptions, templates: jinja2.Environment, list_reader: ListReader) -> None:
        self.options = options
        self.templates = templates
        self._list_reader = list_reader

    async def _follow(
        self,
        session: Session,
        stream: AsyncIterator[T],
        on_item: Callable[[T], Awaitable[list[str]]],
        on_idle: Callable[[], Awaitable[list[str]]],
        end_message: str,
    ) -> AsyncIterator[str]:
        """Server-sent events from a hub stream until it ends, the session ends or the browser leaves:
        ``on_item`` for each item, ``on_idle`` once the items that arrived together are sent."""
        queue: asyncio.Queue[object] = asyncio.Queue(maxsize=self.options.page_size)

        async def pump() -> None:
            try:
                async for item in stream:
                    await queue.put(item)
                await queue.put(_END)
            except AgentNetError as err:
                await queue.put(err)

        reader = asyncio.create_task(pump())
        ended = asyncio.create_task(session.ended.wait())
        try:
            while True:
                getter = asyncio.create_task(queue.get())
                done, _ = await asyncio.wait({getter, ended}, timeout=KEEPALIVE_SECONDS, return_when="FIRST_COMPLETED")
                if getter not in done:
                    getter.cancel()
                    if ended in done:
                        yield sse("end", {"message": "logged out"})
                        return
                    yield ": keepalive\n\n"
                    continue
                item = getter.result()
                if item is _END:
                    yield sse("end", {"message": end_message})
                    return
                if isinstance(item, AgentNetError):
                    yield sse("end", {"message": f"stopped: {item.reason}: {item.message}"})
                    return
                # A logout closes the session's hub connection, which cancels a read on_item is
                # waiting for: the logout, not the read's error, is what the stream reports.
                handler = asyncio.ensure_future(on_item(item))  # type: ignore[arg-type]
                try:
                    await asyncio.wait({handler, ended}, return_when="FIRST_COMPLETED")
                finally:
                    handler.cancel()  # nothing once it is done
                if session.ended.is_set():
                    if handler.done() and not handler.cancelled():
                        handler.exception()  # retrieved: a read the logout cut short is no error
                    yield sse("end", {"message": "logged out"})
                    return
                events = handler.result()
                for event in events:
                    yield event
                if queue.empty():
                    for event in await on_idle():
                        yield event
        finally:
            reader.cancel()
            ended.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader

    def _last_event_id(self, request: Request, after: int) -> int:
        """Where a reconnecting browser resumes: after the last event it got (Last-Event-ID), else ``after``."""
        raw = request.headers.get("last-event-id", "")
        return max(after, int(raw)) if raw.isdigit() and len(raw) <= 19 else after

    async def channel_live(self, request: Request, session: Session) -> AsyncIterator[str]:
        """A channel's envelopes after ``after`` as they are committed, and whose turn it is after each burst."""
        channel_id = request.path_params["channel_id"]
        after = self._last_event_id(request, int_param(request, "after"))
        first = max(1, int_param(request, "first"))
        described = await session.client.describe_channel(channel_id)
        names = views.participant_names(described.channel)
        shown = {"last": after}
        """The newest seq the page shows (its first is ``first`` until the browser drops rows)."""
        template = self.templates.get_template

        async def on_envelope(env: envelope_pb2.Envelope) -> list[str]:
            nonlocal names
            if env.sender_id and env.sender_id not in names:
                names = views.participant_names((await session.client.describe_channel(channel_id)).channel)
            shown["last"] = max(shown["last"], env.seq)
            row = views.envelope_row(env, names, self.options.max_event_text_bytes)
            return [sse("row", {"html": template("_envelope.html").render(row=row)}, env.seq)]

        async def on_idle() -> list[str]:
            """The page's head as it is now: whose turn, participants, adapter state, envelope counts."""
            nonlocal names
            now = await session.client.describe_channel(channel_id)
            meta, names = now.channel, views.participant_names(now.channel)
            page = {
                "meta": meta,
                "turn": views.turn_text(meta, now.expected_next),
                "adapter_state": views.adapter_state_text(
                    now.adapter_state_json, names, self.options.max_event_text_bytes
                ),
                # the browser keeps the newest live_rows rows of first..last
                "first": max(first, shown["last"] - self.options.live_rows + 1),
                "last": shown["last"],
            }
            return [
                sse("replace", {"id": element, "html": template(name).render(**page)})
                for element, name in (
                    ("channel-turn", "_turn.html"),
                    ("channel-fields", "_channel_fields.html"),
                    ("envelope-range", "_envelope_range.html"),
                )
            ]

        stream = session.client.read_wal(channel_id, from_seq=after + 1, follow=True)
        return self._follow(session, stream, on_envelope, on_idle, "the channel ended")

    async def list_live(self, request: Request, session: Session) -> AsyncIterator[str]:
        """A list page's rows, read again every ``list_refresh_seconds`` and sent when they changed (the
        hub has no change stream for its lists: one page read per interval and open page)."""
        name = request.path_params["name"]
        if name not in ("agents", "channels", "tasks"):
            raise NotFound(f"no live list {name[:40]!r}: agents, channels or tasks.")
        read = self._list_reader(name)
        rows = self.templates.get_template(f"_{name}_rows.html")
        first = rows.render(**await read(request, session))  # bad filters fail here, before the stream starts
        shown = request.query_params.get("shown", "")
        return self._refresh(
            session, first, first if digest(first) == shown else "", lambda: read(request, session), rows
        )

    async def _refresh(
        self,
        session: Session,
        first: str,
        shown: str,
        read: Callable[[], Awaitable[dict[str, Any]]],
        rows: jinja2.Template,
    ) -> AsyncIterator[str]:
        """``first`` (the rows now) unless the page already shows them (``shown``), then each change."""
        if first != shown:
            shown = first
            yield sse("replace", {"id": "list-rows", "html": shown})
        else:
            yield ": the page is current\n\n"
        ended = asyncio.create_task(session.ended.wait())
        quiet = 0.0
        try:
            while True:
                done, _ = await asyncio.wait({ended}, timeout=self.options.list_refresh_seconds)
                if done:
                    yield sse("end", {"message": "logged out"})
                    return
                try:
                    html = rows.render(**await read())
                except AgentNetError as err:
                    yield sse("end", {"message": f"stopped: {err.reason}: {err.message}"})
                    return
                if html != shown:
                    shown, quiet = html, 0.0
                    yield sse("replace", {"id": "list-rows", "html": html})
                    continue
                quiet += self.options.list_refresh_seconds
                if quiet >= KEEPALIVE_SECONDS:
                    quiet = 0.0
                    yield ": keepalive\n\n"
        finally:
            ended.cancel()

    async def audit_live(self, request: Request, session: Session) -> AsyncIterator[str]:
        """Audit records after ``after`` (matching ``kind`` and ``subject``) as they are written."""
        after = self._last_event_id(request, int_param(request, "after"))
        template = self.templates.get_template("_audit.html")
        # The stream's actors' names: a lookup only for an actor it has not named yet (at most
        # ``live_rows`` remembered, as many rows as the page keeps).
        names: dict[str, str] = {}

        async def on_record(record: hub_pb2.AuditRecord) -> list[str]:
            if record.actor_id and record.actor_id not in names:
                if len(names) >= self.options.live_rows:
                    names.clear()
                names.update(await views.agent_names(session.client, [record.actor_id]))
            row = views.audit_row(record, self.options.max_event_text_bytes, names)
            return [sse("row", {"html": template.render(row=row)}, record.audit_id)]

        async def nothing() -> list[str]:
            return []

        stream = session.client.follow_audit(
            kind=request.query_params.get("kind", ""),
            subject_id=request.query_params.get("subject", ""),
            after_id=after,
        )
        return self._follow(session, stream, on_record, nothing, "the audit stream ended")
