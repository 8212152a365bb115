"""The hub's spans and the trace context an envelope carries through the WAL (on both stores)."""

from __future__ import annotations

from pathlib import Path

from agentnet.v1 import hub_pb2, task_pb2
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from tests.hubsvc.harness import EV_TEXT, assert_eventually, conversation, running_hub

CLIENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_PARENT = f"00-{CLIENT_TRACE}-00f067aa0ba902b7-01"


def of(exporter: InMemorySpanExporter, name: str, envelope_id: str) -> list[ReadableSpan]:
    return [
        s
        for s in exporter.get_finished_spans()
        if s.name == name and (s.attributes or {}).get("agentnet.envelope_id") == envelope_id
    ]


async def test_a_replayed_delivery_continues_the_trace_from_the_wal(
    tmp_path: Path, spans: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    provider, exporter = spans
    async with running_hub(tmp_path / "hub.db", tracer_provider=provider) as hub:
        alice, bob, cid = await conversation(hub.target)
        await bob.sync()
        await bob.disconnect()
        posted = await alice.say(cid, "while bob is away", trace_id=CLIENT_PARENT)
        [admitted] = of(exporter, "agentnet.hub.post", posted.envelope_id)
        assert admitted.context.trace_id == int(CLIENT_TRACE, 16)
        assert admitted.parent is not None and admitted.parent.span_id == int("00f067aa0ba902b7", 16)
        # the envelope as written carries the admission span as the parent of what follows
        assert posted.trace_id.startswith(f"00-{CLIENT_TRACE}-{admitted.context.span_id:016x}-")
        await bob.connect()
        replayed = await bob.next_of(EV_TEXT)
        assert replayed.trace_id == posted.trace_id

        def replays() -> list[ReadableSpan]:
            spans = of(exporter, "agentnet.hub.deliver", posted.envelope_id)
            return [s for s in spans if (s.attributes or {}).get("agentnet.replay") is True]

        await assert_eventually(replays)
        # The replay, and a live delivery to bob's old stream if the hub had not yet seen it end
        # when alice posted (bob's disconnect ends only his side): both continue the trace.
        delivered = of(exporter, "agentnet.hub.deliver", posted.envelope_id)
        assert len(replays()) == 1 and len(delivered) <= 2
        for span in delivered:
            assert span.context.trace_id == int(CLIENT_TRACE, 16)
            assert span.parent is not None and span.parent.span_id == admitted.context.span_id
        await alice.close()
        await bob.close()


async def test_a_free_form_trace_id_is_kept_and_starts_no_context(
    tmp_path: Path, spans: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    provider, exporter = spans
    async with running_hub(tmp_path / "hub.db", tracer_provider=provider) as hub:
        alice, bob, cid = await conversation(hub.target)
        posted = await alice.say(cid, "hi", trace_id="my-own-request-42")
        assert posted.trace_id == "my-own-request-42"
        assert (await bob.next_of(EV_TEXT)).trace_id == "my-own-request-42"
        [admitted] = of(exporter, "agentnet.hub.post", posted.envelope_id)
        assert admitted.parent is None  # a root span: nothing to continue
        assert of(exporter, "agentnet.hub.deliver", posted.envelope_id) == []  # no context travels with it
        untraced = await alice.say(cid, "no trace id")
        [root] = of(exporter, "agentnet.hub.post", untraced.envelope_id)
        assert untraced.trace_id == f"00-{root.context.trace_id:032x}-{root.context.span_id:016x}-" + (
            f"{int(root.context.trace_flags):02x}"
        )
        await alice.close()
        await bob.close()


async def test_without_a_tracer_the_hub_leaves_trace_ids_alone(tmp_path: Path) -> None:
    async with running_hub(tmp_path / "hub.db") as hub:
        alice, bob, cid = await conversation(hub.target)
        assert not (await alice.say(cid, "plain")).HasField("trace_id")
        assert (await alice.say(cid, "traced", trace_id=CLIENT_PARENT)).trace_id == CLIENT_PARENT
        await alice.close()
        await bob.close()


def task_spans(exporter: InMemorySpanExporter, task_id: str) -> list[ReadableSpan]:
    return [
        s
        for s in exporter.get_finished_spans()
        if s.name == "agentnet.hub.task" and (s.attributes or {}).get("agentnet.task_id") == task_id
    ]


async def test_a_tasks_lifecycle_is_one_span_from_its_start_to_its_end(
    tmp_path: Path, spans: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    provider, exporter = spans
    async with running_hub(tmp_path / "hub.db", tracer_provider=provider) as hub:
        alice, bob, cid = await conversation(hub.target)
        started = await alice.rpc(
            "ReportTask",
            hub_pb2.ReportTaskRequest(
                kind=task_pb2.TASK_EVENT_KIND_STARTED, title="crunch", channel_id=cid, capability="math"
            ),
        )
        task_id = started.task.task_id
        await alice.rpc(
            "ReportTask", hub_pb2.ReportTaskRequest(task_id=task_id, kind=task_pb2.TASK_EVENT_KIND_PROGRESS)
        )
        assert task_spans(exporter, task_id) == []  # still running: no span ended yet
        ended = await alice.rpc(
            "ReportTask",
            hub_pb2.ReportTaskRequest(task_id=task_id, kind=task_pb2.TASK_EVENT_KIND_FAILED, error="boom"),
        )
        [span] = task_spans(exporter, task_id)
        attributes = dict(span.attributes or {})
        assert attributes == {
            "agentnet.task_id": task_id,
            "agentnet.owner_id": alice.agent_id,
            "agentnet.channel_id": cid,
            "agentnet.title": "crunch",
            "agentnet.capability": "math",
            "agentnet.task_state": "TASK_STATE_FAILED",
            "agentnet.error": "boom",
        }
        assert span.start_time == started.task.created_at.ToNanoseconds()
        assert span.end_time == ended.task.updated_at.ToNanoseconds()
        assert span.status.status_code == StatusCode.ERROR
        done = await alice.rpc("ReportTask", hub_pb2.ReportTaskRequest(kind=task_pb2.TASK_EVENT_KIND_STARTED))
        await alice.rpc(
            "ReportTask", hub_pb2.ReportTaskRequest(task_id=done.task.task_id, kind=task_pb2.TASK_EVENT_KIND_COMPLETED)
        )
        [ok] = task_spans(exporter, done.task.task_id)
        assert ok.status.status_code == StatusCode.OK  # as AG2's network.task span
        await alice.close()
        await bob.close()
