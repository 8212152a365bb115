"""Outbound A2A: the hub calls outside A2A agents (served by any A2A v1.0 server) for hub agents.

Three jobs, each bounded so the hub never becomes an open proxy:

* :class:`OutboundPolicy` — which destinations the operator allows (``--a2a-outbound-allow``:
  ``host`` or ``host:port`` glob patterns; empty = no outbound call at all). Every URL the hub
  would contact is checked before a byte is sent: the card URL *and* the interface the card names.
* :meth:`RemoteA2A.fetch_card` — the Agent Card, read over http(s) without following redirects,
  at most ``--a2a-outbound-max-bytes`` and within ``--a2a-outbound-connect-timeout``, parsed with the
  released ``a2a-sdk``'s card parser.
* :meth:`RemoteA2A.send` — one ``SendMessage`` (blocking, not streaming) over the interface the
  card prefers among JSON-RPC and gRPC, through the ``a2a-sdk`` client; the answer is bounded in
  bytes too, and the remote task's final state is mapped to an :class:`Outcome`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import grpc
from agentnet.v1 import a2a_pb2

from hubsvc.core.options import HubOptions
from hubsvc.core.util import new_id
from netkernel.errors import FailedPrecondition, InvalidArgument, PayloadTooLarge, PermissionDenied, Unavailable

if TYPE_CHECKING:
    import httpx
    from a2a.types import a2a_pb2 as a2a

WELL_KNOWN_CARD_PATH = "/.well-known/agent-card.json"
"""Where a base URL's card is read from (A2A's well-known path)."""
BINDINGS = ("JSONRPC", "GRPC")
"""The protocol bindings the hub calls over, as the card names them (a2a-sdk's ``TransportProtocol``
values; a2a-sdk is loaded on the first call, not at hub startup)."""
SKILL_KEY = "skill"
"""The key of ``SendMessageRequest.metadata`` that carries InvokeAgent's skill, when one is given.
InvokeAgent's custom headers are the message's ``metadata``, one string value per header (the hub's
A2A gateway reads them back the same way)."""
_NAME_CHARS = re.compile(r"[^A-Za-z0-9._-]+")

COMPLETED = a2a_pb2.INVOCATION_STATUS_COMPLETED
INPUT_REQUIRED = a2a_pb2.INVOCATION_STATUS_INPUT_REQUIRED
FAILED = a2a_pb2.INVOCATION_STATUS_FAILED


def is_url(ref: str) -> bool:
    """Whether an InvokeAgent target names an outside agent by URL rather than a hub identity."""
    return ref.startswith(("http://", "https://"))


def card_location(url: str) -> str:
    """The card URL a reference names: itself when its path ends in ``.json``, else the base URL's
    well-known card path."""
    if urlsplit(url).path.endswith(".json"):
        return url
    return url.rstrip("/") + WELL_KNOWN_CARD_PATH


def name_from_card(card_name: str) -> str:
    """A passport name made from a card's name (1-64 letters, digits, '.', '_', '-')."""
    return _NAME_CHARS.sub("-", card_name).strip("-")[:64] or "remote-agent"


class OutboundPolicy:
    """The destinations the operator allows outbound A2A calls to."""

    def __init__(self, allow: tuple[str, ...]) -> None:
        self.allow = tuple(p.lower() for p in allow)

    def check(self, url: str, what: str) -> None:
        """Refuse ``url`` unless outbound calls are on and its host[:port] matches an allowed pattern.

        FAILED_PRECONDITION when outbound calls are off; PERMISSION_DENIED for a destination not
        allowed; INVALID_ARGUMENT for a URL without a host (``what`` says which URL it is)."""
        if not self.allow:
            raise FailedPrecondition(
                "outbound A2A calls are off on this hub: its operator allows destinations with "
                "--a2a-outbound-allow (AGENTNET_HUB_A2A_OUTBOUND_ALLOW), e.g. 'agents.example.com'.",
                metadata={"flag": "--a2a-outbound-allow"},
            )
        host, port = _host_port(url, what)
        if not any(_matches(p, host, port) for p in self.allow):
            raise PermissionDenied(
                f"{what} {host}:{port} is not among the destinations the hub may call "
                "(--a2a-outbound-allow); ask the hub's operator to add it.",
                metadata={"flag": "--a2a-outbound-allow", "destination": f"{host}:{port}"},
            )


def _host_port(url: str, what: str) -> tuple[str, int]:
    parts = urlsplit(url if "://" in url else "//" + url)
    try:
        port = parts.port
    except ValueError:
        port = None
        parts = urlsplit("")
    if not parts.hostname:
        raise InvalidArgument(f"{what} {url!r} names no host; give an http(s) URL such as https://host/path.")
    default = 80 if parts.scheme == "http" else 443
    return parts.hostname.lower(), port if port is not None else default


def _matches(pattern: str, host: str, port: int) -> bool:
    """Whether ``host``:``port`` matches ``host``, ``host:port`` or (IPv6) ``[addr]`` / ``[addr]:port``."""
    if pattern.startswith("["):
        want_host, _, rest = pattern[1:].partition("]")
        want_port = rest.removeprefix(":") or "*"
    elif ":" in pattern:
        want_host, _, want_port = pattern.rpartition(":")
    else:
        want_host, want_port = pattern, "*"
    return fnmatchcase(host, want_host) and fnmatchcase(str(port), want_port)


@dataclass(frozen=True)
class RemoteCard:
    """A fetched Agent Card and the interface the hub calls."""

    card: a2a.AgentCard
    endpoint: a2a_pb2.RemoteA2AAgent

    def settings(self, base: a2a_pb2.A2ASettings | None) -> a2a_pb2.A2ASettings:
        """The identity's A2A settings: ``enabled`` and ``allowed_callers`` from ``base`` (absent =
        enabled, anyone of the project), the rest from the card."""
        card = self.card
        settings = a2a_pb2.A2ASettings(enabled=True if base is None else base.enabled)
        if base is not None:
            settings.allowed_callers.extend(base.allowed_callers)
        settings.description = card.description
        settings.skills.extend(s.id or s.name for s in card.skills if s.id or s.name)
        if card.capabilities.streaming:
            settings.capabilities.append("streaming")
        if card.capabilities.push_notifications:
            settings.capabilities.append("push-notifications")
        settings.input_modes.extend(card.default_input_modes)
        return settings


@dataclass(frozen=True)
class Outcome:
    """How a remote call ended, in InvokeAgent's terms, and the remote task it ran as."""

    status: a2a_pb2.InvocationStatus.ValueType
    result: str = ""
    error: str = ""
    task_id: str = ""
    context_id: str = ""


class RemoteA2A:
    """Fetches cards of, and sends messages to, outside A2A agents within the operator's bounds."""

    def __init__(self, options: HubOptions) -> None:
        self.policy = OutboundPolicy(options.a2a_outbound_allow)
        self.max_bytes = options.a2a_outbound_max_bytes
        self.connect_timeout = options.a2a_outbound_connect_timeout

    def _http(self, read_timeout: float) -> httpx.AsyncClient:
        from hubsvc.core.bounded_http import bounded_client  # httpx loads on the first outbound call

        return bounded_client(self.max_bytes, read_timeout, self.connect_timeout)

    async def fetch_card(self, ref: str) -> RemoteCard:
        """The card at ``ref`` (a card URL or an agent's base URL) and the interface to call.

        Refusals: the policy's; INVALID_ARGUMENT (not http(s), not a card, no JSON-RPC or gRPC
        interface); PAYLOAD_TOO_LARGE (over the byte limit); UNAVAILABLE (unreachable, an HTTP error)."""
        if not is_url(ref):
            raise InvalidArgument(
                f"card_url {ref!r} is not an http(s) URL; give the agent's card URL or base URL.",
                metadata={"field": "card_url"},
            )
        url = card_location(ref)
        self.policy.check(url, "card URL")
        import httpx

        from hubsvc.core.bounded_http import TooLarge

        async with self._http(self.connect_timeout) as http:
            try:
                response = await http.get(url, headers={"accept": "application/json"})
            except TooLarge:
                raise PayloadTooLarge(
                    f"the Agent Card at {url} is larger than {self.max_bytes} bytes (--a2a-outbound-max-bytes).",
                    metadata={"card_url": url},
                ) from None
            except httpx.HTTPError as err:
                raise Unavailable(
                    f"could not fetch the Agent Card at {url}: {type(err).__name__}: {err}",
                    metadata={"card_url": url},
                ) from None
        if response.status_code != 200:
            raise Unavailable(
                f"fetching the Agent Card at {url} answered HTTP {response.status_code}; "
                "check the URL (redirects are not followed).",
                metadata={"card_url": url},
            )
        from a2a.client.card_resolver import parse_agent_card  # a2a.client is loaded on first use: hub startup skips it

        try:
            card = parse_agent_card(json.loads(response.content))
        except Exception as err:
            raise InvalidArgument(
                f"{url} did not return a valid A2A Agent Card: {err}", metadata={"card_url": url}
            ) from None
        return RemoteCard(card, self._endpoint(card, url))

    def _endpoint(self, card: a2a.AgentCard, card_url: str) -> a2a_pb2.RemoteA2AAgent:
        """The first interface of the card (its preference order) the hub speaks, checked by the policy."""
        for interface in card.supported_interfaces:
            if interface.protocol_binding in BINDINGS and interface.url:
                self.policy.check(interface.url, "the card's interface")
                return a2a_pb2.RemoteA2AAgent(
                    card_url=card_url,
                    url=interface.url,
                    protocol_binding=interface.protocol_binding,
                    protocol_version=interface.protocol_version,
                    card_name=card.name,
                )
        offered = sorted({i.protocol_binding for i in card.supported_interfaces})
        raise InvalidArgument(
            f"the Agent Card at {card_url} offers no interface the hub can call (JSON-RPC or gRPC); "
            f"it offers {offered}.",
            metadata={"card_url": card_url},
        )

    async def send(
        self,
        endpoint: a2a_pb2.RemoteA2AAgent,
        text: str,
        *,
        skill: str,
        headers: Mapping[str, str],
        timeout: float,
        task_id: str = "",
        context_id: str = "",
    ) -> Outcome:
        """Send one message and wait (at most ``timeout`` seconds) for the remote task to end or ask
        for input. Transport failures, remote errors and timeouts are FAILED outcomes, not raised."""
        self.policy.check(endpoint.url, "the agent's interface")
        from a2a.types import a2a_pb2 as a2a

        message = a2a.Message(message_id=new_id(), role=a2a.ROLE_USER, parts=[a2a.Part(text=text)])
        if task_id:
            message.task_id = task_id
            message.context_id = context_id
        message.metadata.update(dict(headers))
        request = a2a.SendMessageRequest(message=message)
        if skill:
            request.metadata.update({SKILL_KEY: skill})
        card = a2a.AgentCard(
            name=endpoint.card_name,
            supported_interfaces=[
                a2a.AgentInterface(
                    url=endpoint.url,
                    protocol_binding=endpoint.protocol_binding,
                    protocol_version=endpoint.protocol_version,
                )
            ],
        )
        from a2a.client import ClientCallContext, ClientConfig, ClientFactory  # on first use, as above

        http = self._http(timeout)
        config = ClientConfig(
            streaming=False,
            httpx_client=http,
            grpc_channel_factory=self._grpc_channel,
            supported_protocol_bindings=list(BINDINGS),
        )
        client = ClientFactory(config).create(card)
        try:
            answer: a2a.StreamResponse | None = None
            async for event in client.send_message(request, context=ClientCallContext(timeout=timeout)):
                answer = event
            return _outcome(answer)
        except Exception as err:
            return Outcome(FAILED, error=_failure(endpoint, err, timeout, self.max_bytes))
        finally:
            await client.close()
            await http.aclose()

    def _grpc_channel(self, url: str) -> grpc.aio.Channel:
        parts = urlsplit(url if "://" in url else "//" + url)
        target = parts.netloc or url
        options = [("grpc.max_receive_message_length", self.max_bytes)]
        if parts.scheme in ("https", "grpcs"):
            return grpc.aio.secure_channel(target, grpc.ssl_channel_credentials(), options=options)
        return grpc.aio.insecure_channel(target, options=options)


def _failure(endpoint: a2a_pb2.RemoteA2AAgent, err: Exception, timeout: float, endpoint_limit: int) -> str:
    """Why a call failed, for InvokeAgent's ``error`` (too large, a timeout, or the remote's error)."""
    import httpx

    from hubsvc.core.bounded_http import TooLarge, too_large

    where = f"the A2A agent {endpoint.card_name or endpoint.url!r} at {endpoint.url}"
    cause: BaseException | None = err
    while cause is not None:
        if isinstance(cause, TooLarge) or (
            isinstance(cause, grpc.aio.AioRpcError) and cause.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        ):
            return f"{where} answered too much: {too_large(endpoint_limit)}"
        if isinstance(cause, (httpx.TimeoutException, TimeoutError)) or (
            isinstance(cause, grpc.aio.AioRpcError) and cause.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        ):
            return f"{where} did not answer within {timeout:g}s"
        cause = cause.__cause__
    if "timed out" in str(err).lower():
        return f"{where} did not answer within {timeout:g}s"
    return f"{where} failed: {type(err).__name__}: {err}"


def _text(parts: Iterable[a2a.Part]) -> str:
    return "\n".join(p.text for p in parts if p.HasField("text"))


def _outcome(answer: a2a.StreamResponse | None) -> Outcome:
    """Map the remote's answer (a direct message, or its task) to an Outcome."""
    from a2a.types import a2a_pb2 as a2a

    if answer is None:
        return Outcome(FAILED, error="the remote agent sent no answer")
    if answer.HasField("message"):
        return Outcome(COMPLETED, result=_text(answer.message.parts), context_id=answer.message.context_id)
    if not answer.HasField("task"):
        return Outcome(FAILED, error="the remote agent answered neither a message nor a task")
    task = answer.task
    ids = {"task_id": task.id, "context_id": task.context_id}
    state = task.status.state
    said = _text(task.status.message.parts)
    name = a2a.TaskState.Name(state).removeprefix("TASK_STATE_").lower().replace("_", "-")
    if state == a2a.TASK_STATE_COMPLETED:
        artifacts = "\n".join(t for t in (_text(a.parts) for a in task.artifacts) if t)
        return Outcome(COMPLETED, result=artifacts or said or _last_agent_text(task), **ids)
    if state == a2a.TASK_STATE_INPUT_REQUIRED:
        return Outcome(INPUT_REQUIRED, result=said or "the remote agent needs more input", **ids)
    if state in (a2a.TASK_STATE_FAILED, a2a.TASK_STATE_REJECTED, a2a.TASK_STATE_CANCELED):
        return Outcome(FAILED, error=f"the remote task ended {name}" + (f": {said}" if said else ""), **ids)
    return Outcome(FAILED, error=f"the remote task is {name}, which the hub cannot continue", **ids)


def _last_agent_text(task: a2a.Task) -> str:
    from a2a.types import a2a_pb2 as a2a

    for message in reversed(task.history):
        if message.role == a2a.ROLE_AGENT:
            return _text(message.parts)
    return ""


def card_base(card_url: str) -> str:
    """The base URL of a card at the well-known path (the card URL itself otherwise)."""
    return card_url.removesuffix(WELL_KNOWN_CARD_PATH)
