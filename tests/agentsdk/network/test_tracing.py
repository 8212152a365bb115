"""One trace across the network: a post, its commit, its delivery and the handler turn that answers it.

A real hub and real SDK clients in one process, each recording into its own in-memory span
exporter (no global OpenTelemetry state is touched); the trace context travels in the
envelope's ``trace_id`` (a W3C traceparent), as it does between processes.
"""

from __future__ import annotations

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NoOpTracerProvider, SpanKind

from agentsdk import Agent
from agentsdk.network import Envelope, Hub, HubClient
from agentsdk.testing import ScriptedOpenAIServer
from agentsdk.transport import HubConnection
from netkernel.envelope import EV_TEXT
from netkernel.identity import Passport
from tests.agentsdk.network.llm import llm
from tests.eventually import assert_eventually


def named(spans: list[ReadableSpan], name: str, envelope_id: str) -> ReadableSpan:
    found = [s for s in spans if s.name == name and (s.attributes or {}).get("agentnet.envelope_id") == envelope_id]
    assert len(found) == 1, (name, envelope_id, [s.name for s in spans])
    return found[0]


def parent_of(span: ReadableSpan) -> int:
    assert span.parent is not None, span.name
    return span.parent.span_id


async def test_a_post_its_commit_delivery_and_answering_turn_form_one_trace(
    spans: tuple[TracerProvider, InMemorySpanExporter], servers: list[ScriptedOpenAIServer]
) -> None:
    provider, exporter = spans
    _, config = llm(servers, "pong")
    async with Hub.open(tracer_provider=provider) as hub:
        worker = await hub.register(Agent("worker", config=config), Passport(name="worker"))
        user = await hub.register_human(Passport(name="user", kind="human"))
        ch = await user.open(type="conversation", target="worker")
        ping = await user.send(ch.channel_id, "ping")
        reply = await user.next_envelope(predicate=lambda e: e.event_type == EV_TEXT, timeout=20)
        assert reply.text == "pong" and reply.causation_id == ping.envelope_id

        def finished() -> list[ReadableSpan]:
            done = list(exporter.get_finished_spans())
            ended = {(s.name, (s.attributes or {}).get("agentnet.envelope_id")) for s in done}
            wanted = {("agentnet.handle", ping.envelope_id), ("agentnet.hub.post", reply.envelope_id)}
            return done if wanted <= ended else []

        done = await assert_eventually(finished)
        post = named(done, "agentnet.post", ping.envelope_id)  # the user's SDK, a root span
        admitted = named(done, "agentnet.hub.post", ping.envelope_id)
        delivered = named(done, "agentnet.hub.deliver", ping.envelope_id)
        turn = named(done, "agentnet.handle", ping.envelope_id)
        answer = named(done, "agentnet.post", reply.envelope_id)
        answer_admitted = named(done, "agentnet.hub.post", reply.envelope_id)
        # the commit span carries no envelope id: it is the admission span's child
        commits = [s for s in done if s.name == "agentnet.hub.commit" and parent_of(s) == admitted.context.span_id]
        assert len(commits) == 1
        trace_id = post.context.trace_id
        for span in (admitted, commits[0], delivered, turn, answer, answer_admitted):
            assert span.context.trace_id == trace_id, span.name
        assert post.parent is None
        assert parent_of(admitted) == post.context.span_id
        assert parent_of(delivered) == admitted.context.span_id
        assert (delivered.attributes or {}).get("agentnet.recipient_id") == worker.agent_id
        assert parent_of(turn) == admitted.context.span_id  # the context the envelope carried in its trace_id
        assert parent_of(answer) == turn.context.span_id
        assert parent_of(answer_admitted) == answer.context.span_id

        # what the WAL keeps: the admission span's traceparent, so a later read continues the trace
        stored = next(e for e in await user.read_wal(ch.channel_id) if e.envelope_id == ping.envelope_id)
        flags = int(admitted.context.trace_flags)
        assert stored.trace_id == f"00-{trace_id:032x}-{admitted.context.span_id:016x}-{flags:02x}"


async def test_the_sdks_unary_calls_are_client_spans_the_hubs_rpc_spans_continue(
    spans: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    """OpenChannel from the SDK: a client span in the SDK, the hub's server span of the same RPC its
    child (the context travels in the call's traceparent metadata). Streams get no RPC span."""
    provider, exporter = spans
    async with Hub.open(tracer_provider=provider) as hub:
        await hub.register_human(Passport(name="bob", kind="human"))
        alice = await hub.register_human(Passport(name="alice", kind="human"))
        await alice.open(type="conversation", target="bob")
        method = "/agentnet.v1.HubService/OpenChannel"

        def both() -> list[ReadableSpan]:
            return [s for s in exporter.get_finished_spans() if s.name == method]

        found = await assert_eventually(lambda: len(both()) == 2 and both())
        [client] = [s for s in found if s.kind == SpanKind.CLIENT]
        [server] = [s for s in found if s.kind == SpanKind.SERVER]
        assert server.context.trace_id == client.context.trace_id
        assert parent_of(server) == client.context.span_id
        names = {s.name for s in exporter.get_finished_spans()}
        assert "/agentnet.v1.HubService/Connect" not in names


async def test_clients_without_tracing_make_no_spans_yet_pass_on_the_trace_an_envelope_carries(
    spans: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    """SDK clients with no tracer provider (none given, no global one) skip their spans entirely; what
    they post is what OpenTelemetry's no-op spans gave: no trace context of their own, and inside a
    handler turn the context the delivered envelope carried, so the traced hub's spans stay one trace."""
    provider, exporter = spans
    async with Hub.open(tracer_provider=provider) as hub, HubClient.connect(hub.target) as hc:
        assert not hc.connection.tracing  # the premise: nothing would record the SDK's spans
        user = await hc.register_human(Passport(name="user", kind="human"))
        answerer = await hc.register_human(Passport(name="answerer", kind="human"))

        async def answer(env: Envelope) -> None:
            if env.event_type == EV_TEXT and env.sender_id == user.agent_id:
                await answerer.send(env.channel_id, "pong", causation_id=env.envelope_id)

        answerer.on_envelope(answer)
        ch = await user.open(type="conversation", target="answerer")
        ping = await user.send(ch.channel_id, "ping")
        reply = await user.next_envelope(predicate=lambda e: e.event_type == EV_TEXT, timeout=20)
        assert reply.causation_id == ping.envelope_id

        def admitted() -> list[ReadableSpan]:
            done = [s for s in exporter.get_finished_spans() if s.name == "agentnet.hub.post"]
            ids = {(s.attributes or {}).get("agentnet.envelope_id") for s in done}
            return done if {ping.envelope_id, reply.envelope_id} <= ids else []

        done = await assert_eventually(admitted)
        ping_admitted = named(done, "agentnet.hub.post", ping.envelope_id)
        reply_admitted = named(done, "agentnet.hub.post", reply.envelope_id)
        assert ping_admitted.parent is None  # the untraced post carried no context of its own
        assert reply_admitted.context.trace_id == ping_admitted.context.trace_id
        assert parent_of(reply_admitted) == ping_admitted.context.span_id  # the delivered ping's context
        assert not [s for s in exporter.get_finished_spans() if s.name in ("agentnet.post", "agentnet.handle")]


async def test_a_connection_traces_when_a_recording_provider_is_given() -> None:
    """``HubConnection.tracing``: a provider given counts unless it is OpenTelemetry's no-op one; with
    none given it follows the global provider (unset in the tests)."""
    for provider, tracing in ((TracerProvider(), True), (NoOpTracerProvider(), False), (None, False)):
        async with HubConnection("127.0.0.1:1", tracer_provider=provider) as connection:
            assert connection.tracing is tracing, provider
