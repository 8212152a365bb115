"""The knowledge service's Prometheus metrics, scraped over HTTP after real calls through the SDK's client."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentsdk.knowledge import RemoteKnowledgeStore
from knowledgestore.sqlite_store import SqliteKnowledgeStore
from knowledgesvc.auth import TokenAuthority
from knowledgesvc.server import start_knowledge
from netkernel.errors import NotFound
from servicekit.metrics import MetricsSettings
from tests.knowledgesvc.helpers import TOKEN, assert_eventually
from tests.scrape import scrape, value


async def test_knowledge_ops_are_counted_by_op_backend_and_outcome(tmp_path: Path) -> None:
    backend = SqliteKnowledgeStore(tmp_path / "knowledge.db")
    await backend.open()
    server = await start_knowledge(backend, TokenAuthority({TOKEN: ["*"]}), metrics=MetricsSettings(port=0))
    try:
        assert server.metrics_server is not None
        url = server.metrics_server.url
        async with RemoteKnowledgeStore(server.target, namespace="ns", credential=TOKEN) as store:
            for i in range(3):
                await store.write(f"/notes/{i}.md", f"note {i}")
            assert await store.read("/notes/1.md") == "note 1"
            assert not await store.exists("/missing.md")
            with pytest.raises(NotFound):
                await store.delete("/missing.md")
            await store.append("/log.md", "one\n")
            assert await store.exists("/log.md")
            changes: list[object] = []
            watch = await store.on_change("/notes", changes.append)
            await store.write("/notes/9.md", "late")

            def changed() -> None:
                assert changes

            await assert_eventually(changed)
            samples = await scrape(url)
            assert value(samples, "agentnet_knowledge_watches", backend="sqlite") == 1
            await watch.cancel()
        samples = await scrape(url)

        def ops(op: str, outcome: str = "ok") -> float:
            return value(samples, "agentnet_knowledge_ops_total", op=op, backend="sqlite", outcome=outcome)

        assert ops("write") == 4
        assert ops("read_many") == 1  # the SDK's client reads through ReadMany
        assert ops("delete", "NOT_FOUND") == 1
        assert ops("append") == 1
        assert ops("exists") == 2
        assert value(samples, "agentnet_knowledge_op_seconds_count", op="write", backend="sqlite") == 4
        assert value(samples, "agentnet_knowledge_op_seconds_count", op="delete", backend="sqlite") == 1

        async def watch_ended() -> None:
            now = await scrape(url)
            assert value(now, "agentnet_knowledge_watches", backend="sqlite") == 0
            assert value(now, "agentnet_knowledge_ops_total", op="watch", backend="sqlite", outcome="CANCELLED") == 1

        await assert_eventually(watch_ended)
    finally:
        await server.stop(0)
        await backend.close()


async def test_metrics_are_off_unless_asked_for(tmp_path: Path) -> None:
    backend = SqliteKnowledgeStore(tmp_path / "knowledge.db")
    await backend.open()
    server = await start_knowledge(backend, TokenAuthority({TOKEN: ["*"]}))
    try:
        assert server.metrics_server is None and server.metrics is None
    finally:
        await server.stop(0)
        await backend.close()
