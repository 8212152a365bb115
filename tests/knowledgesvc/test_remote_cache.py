"""RemoteKnowledgeStore(cache=True): reads from the cache, kept coherent by the service's Watch stream."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agentsdk.errors import NotFound, Unavailable
from agentsdk.knowledge import MemoryKnowledgeStore, RemoteKnowledgeStore, SqliteKnowledgeStore
from agentsdk.knowledge.read_cache import ENTRY_OVERHEAD, CacheInfo
from tests.forwarder import TcpForwarder
from tests.knowledgesvc.helpers import TOKEN, assert_eventually, serve_in_process
from tests.procs import ServiceProcess, start_service


@pytest.fixture
async def target() -> AsyncIterator[str]:
    """The real service over a memory backend, in this process."""
    async with MemoryKnowledgeStore() as backend, serve_in_process(backend) as address:
        yield address


def remote(target: str, *, cache: bool = True, cache_bytes: int = 1 << 20) -> RemoteKnowledgeStore:
    return RemoteKnowledgeStore(target, namespace="ns", credential=TOKEN, cache=cache, cache_bytes=cache_bytes)


def info(store: RemoteKnowledgeStore) -> CacheInfo:
    state = store.cache_info()
    assert state is not None
    return state


async def test_the_cache_is_off_by_default(target: str) -> None:
    async with RemoteKnowledgeStore(target, namespace="ns", credential=TOKEN) as store:
        assert store.cache_info() is None
        await store.write("/f", "x")
        assert await store.read("/f") == "x"


async def test_reads_exists_and_lists_are_served_from_the_cache_after_the_first_fetch(target: str) -> None:
    async with remote(target, cache=False) as writer, remote(target) as reader:
        assert info(reader).live  # open() waited for the watch
        await writer.write("/dir/f", "one")

        async def a_round() -> None:
            assert await reader.read("/dir/f") == "one"
            assert await reader.exists("/dir/f")
            assert not await reader.exists("/dir/missing")
            assert await reader.list("/dir") == ["f"]
            with pytest.raises(NotFound, match="no file at /dir/missing"):
                await reader.read("dir//missing")  # the same key once normalised

        async def all_hits() -> None:
            before = info(reader)
            await a_round()
            after = info(reader)
            assert (after.misses, after.hits) == (before.misses, before.hits + 5)

        # A fetch that overlaps the write's change event is not stored (it might predate it): retry.
        await assert_eventually(all_hits)
        assert info(reader).entries == 3
        for _ in range(3):
            await all_hits()


async def test_another_clients_changes_become_visible(target: str) -> None:
    async with remote(target, cache=False) as writer, remote(target) as reader:
        await writer.write("/notes/a.md", "v1")
        assert await reader.read("/notes/a.md") == "v1"
        assert await reader.list("/notes") == ["a.md"]
        assert not await reader.exists("/notes/b.md")

        await writer.write("/notes/a.md", "v2")
        await assert_eventually(lambda: _assert_reads(reader, "/notes/a.md", "v2"))
        await writer.append("/notes/a.md", "+tail")
        await assert_eventually(lambda: _assert_reads(reader, "/notes/a.md", "v2+tail"))
        await writer.write("/notes/b.md", "b")
        await assert_eventually(lambda: _assert_lists(reader, "/notes", ["a.md", "b.md"]))
        assert await reader.exists("/notes/b.md")
        await writer.delete("/notes/a.md")
        await assert_eventually(lambda: _assert_missing(reader, "/notes/a.md"))
        assert await reader.list("/notes") == ["b.md"]
        await writer.write("/notes/a.md", "again")  # re-created: its version restarts at 1
        await assert_eventually(lambda: _assert_reads(reader, "/notes/a.md", "again"))


async def _assert_reads(store: RemoteKnowledgeStore, path: str, content: str) -> None:
    try:
        assert await store.read(path) == content
    except (NotFound, Unavailable) as err:  # still the deleted file's entry; the service not back yet
        raise AssertionError(err) from None


async def _assert_lists(store: RemoteKnowledgeStore, path: str, entries: list[str]) -> None:
    assert await store.list(path) == entries


async def _assert_missing(store: RemoteKnowledgeStore, path: str) -> None:
    assert not await store.exists(path)
    with pytest.raises(NotFound):
        await store.read(path)


async def test_own_changes_are_visible_immediately(target: str) -> None:
    async with remote(target) as store:
        assert not await store.exists("/f")
        assert await store.list("/") == []
        await store.write("/f", "one")
        assert await store.exists("/f")
        assert await store.read("/f") == "one"
        assert await store.list("/") == ["f"]
        hits = info(store).hits
        assert await store.read("/f") == "one"  # the write stored what it wrote
        assert info(store).hits == hits + 1
        await store.write("/f", "two")
        assert await store.read("/f") == "two"
        assert await store.append("/f", "→") == 3
        assert await store.read("/f") == "two→"
        await store.delete("/f")
        assert not await store.exists("/f")
        with pytest.raises(NotFound):
            await store.read("/f")
        assert await store.list("/") == []
        await store.append("/d/log", "x")
        assert await store.list("/") == ["d/"]
        assert await store.read("/d/log") == "x"


async def test_concurrent_reads_during_remote_writes_settle_on_the_last_write(target: str) -> None:
    async with remote(target, cache=False) as writer, remote(target) as reader:
        await writer.write("/hot", "0")
        stop = asyncio.Event()

        async def read_loop() -> None:
            while not stop.is_set():
                await reader.read("/hot")
                await reader.exists("/hot")

        readers = [asyncio.create_task(read_loop()) for _ in range(8)]
        for i in range(1, 201):
            await writer.write("/hot", str(i))
        stop.set()
        await asyncio.gather(*readers)
        await assert_eventually(lambda: _assert_reads(reader, "/hot", "200"))
        for _ in range(20):  # and it stays: no stale result was stored after the last change
            assert await reader.read("/hot") == "200"
            await asyncio.sleep(0.01)
        assert info(reader).hits > 0


async def test_the_cache_stays_within_its_byte_budget(target: str) -> None:
    budget = 4 * (1000 + ENTRY_OVERHEAD + 8)  # four 1000-byte files with their paths
    async with remote(target, cache=False) as writer:
        for i in range(20):
            await writer.write(f"/f/{i:02d}", f"{i:02d}" * 500)
        await writer.write("/big", "x" * (budget + 1))
    async with remote(target, cache_bytes=budget) as reader:  # watching from here on: no events in flight
        for i in range(20):
            assert await reader.read(f"/f/{i:02d}") == f"{i:02d}" * 500
            assert info(reader).bytes <= budget
        assert info(reader).entries == 4
        misses = info(reader).misses
        assert await reader.read("/f/19") == "19" * 500  # recently used: still there
        assert info(reader).misses == misses
        assert await reader.read("/f/00") == "00" * 500  # evicted long ago
        assert info(reader).misses == misses + 1
        for _ in range(2):  # larger than the whole budget: never cached, always read correctly
            assert await reader.read("/big") == "x" * (budget + 1)
        assert info(reader).misses == misses + 3
        assert info(reader).bytes <= budget


async def test_namespace_views_have_their_own_watch_and_share_the_budget(target: str) -> None:
    async with remote(target) as root, remote(target, cache=False) as writer:
        view = root.namespace("other")
        await view.write("/f", "in other")
        await root.write("/f", "in ns")
        assert await view.read("/f") == "in other"
        assert await root.read("/f") == "in ns"
        await assert_eventually(lambda: _assert_live(view))
        assert info(view).entries == info(root).entries
        await writer.namespace("other").write("/f", "changed")
        await assert_eventually(lambda: _assert_reads(view, "/f", "changed"))
        assert await root.read("/f") == "in ns"
    assert not info(view).live
    assert info(root).entries == 0


def _assert_live(store: RemoteKnowledgeStore, watches: int = 1) -> None:
    state = info(store)
    assert state.live
    assert state.watches == watches


async def test_a_watch_ended_by_the_service_drops_the_cache() -> None:
    async with MemoryKnowledgeStore() as backend, serve_in_process(backend, watch_backlog=3) as address:
        ns = backend.namespace("ns")
        await ns.write("/target", "old")
        async with remote(address) as reader:
            assert await reader.read("/target") == "old"
            assert info(reader).entries == 1
            # The memory store publishes without yielding, so the service queues all 21 changes at once,
            # ends the watch after 3 of them, and the change to /target is never sent.
            for i in range(20):
                await ns.write(f"/other/{i}", "x")
            await ns.write("/target", "new")
            await assert_eventually(lambda: _assert_live(reader, watches=2))
            assert await reader.read("/target") == "new"
            await ns.write("/target", "newer")  # the new watch keeps the cache coherent
            await assert_eventually(lambda: _assert_reads(reader, "/target", "newer"))


@pytest.fixture
def tokens_file(tmp_path: Path) -> Path:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"{TOKEN} *\n")
    tokens.chmod(0o600)
    return tokens


def start_knowledge(tmp_path: Path, tokens: Path) -> ServiceProcess:
    args = ["--data-dir", str(tmp_path / "data"), "--backend", "sqlite", "--tokens-file", str(tokens)]
    return start_service("knowledgesvc", args, cwd=tmp_path)


async def test_a_service_restart_drops_the_cache_and_reads_stay_correct(tmp_path: Path, tokens_file: Path) -> None:
    service = start_knowledge(tmp_path, tokens_file)
    try:
        async with TcpForwarder() as address:
            address.point_to(service.target)
            async with remote(address.target) as store:
                await store.write("/f", "before")
                assert await store.read("/f") == "before"
                assert await store.list("/") == ["f"]
                assert service.terminate() == 0
                address.point_to(None)  # refused while down, whoever takes the old port
                await assert_eventually(lambda: _assert_dropped(store))
                with pytest.raises(Unavailable):
                    await store.read("/f")  # not from the dropped cache
                # Changed while the service is down: no watch will ever report it.
                async with SqliteKnowledgeStore(tmp_path / "data" / "knowledge.db") as direct:
                    await direct.namespace("ns").write("/f", "changed while down")
                    await direct.namespace("ns").write("/g", "new")
                # The new service binds a port of its own (0); the client keeps dialling the address the test holds.
                service = start_knowledge(tmp_path, tokens_file)
                address.point_to(service.target)
                await assert_eventually(lambda: _assert_reads(store, "/f", "changed while down"), timeout=30)
                assert await store.list("/") == ["f", "g"]
                await assert_eventually(lambda: _assert_live(store, watches=2), timeout=30)
                assert await store.read("/f") == "changed while down"
                assert await store.read("/f") == "changed while down"
    finally:
        if service.proc.poll() is None:
            service.terminate()


def _assert_dropped(store: RemoteKnowledgeStore) -> None:
    state = info(store)
    assert not state.live
    assert state.entries == 0
