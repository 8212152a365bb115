"""``ScriptedOpenAIServer``: a real local OpenAI-compatible HTTP server for tests and demos.

It serves ``POST /v1/chat/completions`` (plain, or ``stream: true`` as server-sent
``chat.completion.chunk`` events: :func:`completion_chunks`) and ``GET /v1/models`` on
``127.0.0.1`` (port 0 → a free port) from a background thread, so the real
``openai.AsyncOpenAI`` client can be pointed at :attr:`ScriptedOpenAIServer.base_url`.

Replies come from a script: a queue of replies (text, :class:`~agentsdk.events.ToolCall` s,
a :class:`~agentsdk.events.ModelMessage`, or a callable ``(request_json) -> reply``)
and/or a ``rule(request_json) -> reply | None`` consulted first (``None`` falls through
to the queue). Every request body is recorded in :attr:`requests`.

Errors (script exhausted, a rule raising, a bad request) answer ``400`` with an
OpenAI-style error body, so the client fails fast instead of retrying.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from agentsdk.config import estimate_tokens, reply_to_message
from agentsdk.events import ModelMessage, ToolCall

__all__ = [
    "Rule",
    "ScriptedOpenAIServer",
    "ServerError",
    "ServerReply",
    "completion_chunks",
    "completion_json",
    "text_pieces",
]


@dataclass(frozen=True)
class ServerError:
    """A scripted HTTP error answer (e.g. ``ServerError(500, "overloaded")``): the real client sees
    the status and an OpenAI-style error body, and retries 429 / 5xx as it is configured to."""

    status: int
    message: str
    kind: str = "server_error"


ServerReply = str | ModelMessage | ToolCall | list[ToolCall] | ServerError | Callable[[dict[str, Any]], Any]
"""A scripted reply: text, a message, tool call(s), an HTTP error, or a callable of the request JSON
returning one."""

Rule = Callable[[dict[str, Any]], Any]
"""``rule(request_json)`` → a reply, or ``None`` to use the queue."""


def completion_json(message: ModelMessage, request: dict[str, Any]) -> dict[str, Any]:
    """The ``chat.completion`` response body for ``message`` answering ``request``."""
    body: dict[str, Any] = {"role": "assistant", "content": message.text or None, "refusal": None}
    if message.tool_calls:
        body["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {
                    "name": call.name,
                    "arguments": call.raw_arguments
                    if call.raw_arguments is not None
                    else json.dumps(call.arguments, ensure_ascii=False),
                },
            }
            for call in message.tool_calls
        ]
    if message.usage is not None:
        prompt, completion = message.usage.prompt_tokens, message.usage.completion_tokens
    else:
        prompt = estimate_tokens(request.get("messages", [])) + estimate_tokens(request.get("tools", []))
        completion = estimate_tokens(message.text) + sum(estimate_tokens(body) for body in body.get("tool_calls", []))
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": message.model or str(request.get("model", "scripted")),
        "choices": [
            {
                "index": 0,
                "message": body,
                "finish_reason": message.finish_reason or ("tool_calls" if message.tool_calls else "stop"),
                "logprobs": None,
            }
        ],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
    }


def text_pieces(text: str) -> list[str]:
    """How a streamed reply's text is cut into deltas: one per word, with the whitespace after it."""
    return re.findall(r"\S+\s*|\s+", text)


def completion_chunks(message: ModelMessage, request: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``chat.completion.chunk`` bodies streaming ``message`` answering ``request``.

    The role first, then one chunk per piece of text (:func:`text_pieces`), each tool call in two
    pieces (its id and name, then its arguments), the finish reason, and, when the request asked
    for ``stream_options.include_usage``, a last chunk with no choices and the usage."""
    whole = completion_json(message, request)
    base = {"id": whole["id"], "object": "chat.completion.chunk", "created": whole["created"], "model": whole["model"]}

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}
        return {**base, "choices": [choice]}

    out = [chunk({"role": "assistant", "content": ""})]
    out.extend(chunk({"content": piece}) for piece in text_pieces(message.text))
    for index, call in enumerate(whole["choices"][0]["message"].get("tool_calls") or []):
        head = {"index": index, "id": call["id"], "type": "function", "function": {"name": call["function"]["name"]}}
        out.append(chunk({"tool_calls": [head]}))
        out.append(chunk({"tool_calls": [{"index": index, "function": {"arguments": call["function"]["arguments"]}}]}))
    out.append(chunk({}, whole["choices"][0]["finish_reason"]))
    options = request.get("stream_options")
    if isinstance(options, dict) and options.get("include_usage"):
        out.append({**base, "choices": [], "usage": whole["usage"]})
    return out


class _HttpServer(ThreadingHTTPServer):
    """A threading HTTP server whose listen backlog takes a burst of new connections (the default is 5)."""

    request_queue_size = 128
    daemon_threads = True


class _HttpError(Exception):
    def __init__(self, error: ServerError) -> None:
        super().__init__(error.message)
        self.error = error


class _ScriptError(Exception):
    """A request the script cannot answer."""


class ScriptedOpenAIServer:
    """A real OpenAI-compatible HTTP server answering from a script.

    Use as ``with ScriptedOpenAIServer([...]) as server:`` or ``async with``; then
    ``OpenAIConfig(model="any", base_url=server.base_url, api_key="test")``.
    """

    def __init__(
        self,
        replies: Iterable[ServerReply] = (),
        *,
        rule: Rule | None = None,
        api_key: str | None = None,
        models: Iterable[str] = ("scripted",),
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.rule = rule
        """Consulted before the queue for every completion request."""
        self.api_key = api_key
        """When set, requests must carry ``Authorization: Bearer <api_key>`` (else 401)."""
        self.models = list(models)
        """Model ids listed by ``GET /v1/models``."""
        self._host, self._port = host, port
        self._lock = threading.Lock()
        self._queue: list[ServerReply] = list(replies)
        self._requests: list[dict[str, Any]] = []
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ script and records

    def add(self, *replies: ServerReply) -> None:
        """Queue more replies."""
        with self._lock:
            self._queue.extend(replies)

    @property
    def pending(self) -> int:
        """Replies still queued."""
        with self._lock:
            return len(self._queue)

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Copies of every completion request body received, in order."""
        with self._lock:
            copied: list[dict[str, Any]] = json.loads(json.dumps(self._requests))
        return copied

    def _answer(self, request: dict[str, Any]) -> dict[str, Any]:
        return completion_json(self._reply(request), request)

    def _reply(self, request: dict[str, Any]) -> ModelMessage:
        with self._lock:
            self._requests.append(request)
            number = len(self._requests)
        reply: Any = None
        if self.rule is not None:
            try:
                reply = self.rule(request)
            except Exception as exc:
                raise _ScriptError(f"the rule raised {type(exc).__name__}: {exc}") from exc
        if reply is None:
            with self._lock:
                if not self._queue:
                    raise _ScriptError(
                        f"script exhausted: request #{number} arrived but no scripted reply is left "
                        f"(last message: {json.dumps((request.get('messages') or [None])[-1])[:300]})"
                    )
                reply = self._queue.pop(0)
            if callable(reply) and not isinstance(reply, ToolCall):
                try:
                    reply = reply(request)
                except Exception as exc:
                    raise _ScriptError(f"the scripted reply raised {type(exc).__name__}: {exc}") from exc
        if isinstance(reply, ServerError):
            raise _HttpError(reply)
        try:
            return reply_to_message(reply)
        except TypeError as exc:
            raise _ScriptError(str(exc)) from exc

    # ------------------------------------------------------------------ lifecycle

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1`` (only while running)."""
        if self._httpd is None:
            raise RuntimeError("ScriptedOpenAIServer is not running; use it as a context manager or call start()")
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def start(self) -> ScriptedOpenAIServer:
        """Bind and serve in a daemon thread (idempotent)."""
        if self._httpd is not None:
            return self
        httpd = _HttpServer((self._host, self._port), _make_handler(self))
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="scripted-openai", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and release the port (idempotent)."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        httpd.shutdown()
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> ScriptedOpenAIServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    async def __aenter__(self) -> ScriptedOpenAIServer:
        return self.start()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await asyncio.to_thread(self.stop)


def _make_handler(server: ScriptedOpenAIServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Buffer the writes (flushed once per request by handle_one_request) and send without Nagle's delay:
        # headers and body written separately would wait for the client's delayed ACK (~40 ms a call).
        wbufsize = 1 << 16
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
            return

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _error(self, status: int, message: str, kind: str) -> None:
            self._send(status, {"error": {"message": message, "type": kind, "param": None, "code": None}})

        def _authorized(self) -> bool:
            if server.api_key is None or self.headers.get("Authorization") == f"Bearer {server.api_key}":
                return True
            self._error(401, "invalid API key", "invalid_request_error")
            return False

        def do_GET(self) -> None:
            if not self._authorized():
                return
            if self.path.rstrip("/") == "/v1/models":
                data = [{"id": m, "object": "model", "created": 0, "owned_by": "scripted"} for m in server.models]
                self._send(200, {"object": "list", "data": data})
            else:
                self._error(404, f"no route for GET {self.path}", "not_found")

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            if not self._authorized():
                return
            if self.path.rstrip("/") != "/v1/chat/completions":
                self._error(404, f"no route for POST {self.path}", "not_found")
                return
            try:
                request = json.loads(raw or b"null")
            except ValueError:
                self._error(400, "the request body is not JSON", "invalid_request_error")
                return
            if not isinstance(request, dict) or not isinstance(request.get("messages"), list):
                self._error(400, "expected a JSON object with a 'messages' list", "invalid_request_error")
                return
            try:
                message = server._reply(request)
            except _ScriptError as exc:
                self._error(400, f"ScriptedOpenAIServer: {exc}", "scripted_server_error")
                return
            except _HttpError as exc:
                self._error(exc.error.status, exc.error.message, exc.error.kind)
                return
            if request.get("stream"):
                self._send_events(completion_chunks(message, request))
            else:
                self._send(200, completion_json(message, request))

        def _send_events(self, chunks: list[dict[str, Any]]) -> None:
            """A server-sent event stream of ``chunks`` ending in ``[DONE]`` (one body with its length)."""
            lines = [f"data: {json.dumps(c)}\n\n" for c in chunks] + ["data: [DONE]\n\n"]
            data = "".join(lines).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler
