"""LockedKnowledgeStore's locking, and the shared path and namespace rules."""

from __future__ import annotations

import asyncio

import pytest

from agentsdk.errors import InvalidArgument
from agentsdk.knowledge import KnowledgeStore, LockedKnowledgeStore, MemoryKnowledgeStore, normalize_path
from knowledgestore.paths import ancestors, dir_prefix, immediate_children, is_under, validate_namespace


async def test_locked_store_locks_mutations_only() -> None:
    lock = asyncio.Lock()
    async with MemoryKnowledgeStore() as inner:
        store = LockedKnowledgeStore(inner, lock)
        assert isinstance(store, KnowledgeStore)
        await store.write("/existing", "x")
        async with lock:
            pending = [
                asyncio.create_task(store.write("/a", "1")),
                asyncio.create_task(store.append("/b", "2")),
                asyncio.create_task(store.delete("/existing")),
            ]
            # Reads pass through while the lock is held...
            assert await store.read("/existing") == "x"
            assert await store.exists("/existing")
            assert await store.list("/") == ["existing"]
            assert await store.read_range("/existing", 0) == "x"
            for _ in range(5):
                await asyncio.sleep(0)
            # ...while every mutation waits for it.
            assert not any(task.done() for task in pending)
        await asyncio.gather(*pending)
        assert await store.list("/") == ["a", "b"]


@pytest.mark.parametrize(
    ("raw", "normalized"),
    [
        ("/a//b/../c", "/a/c"),
        ("a/b", "/a/b"),
        ("", "/"),
        ("/", "/"),
        ("./x/./y/", "/x/y"),
        ("/a/b/..", "/a"),
        ("/a/../", "/"),
        ("/日本/語", "/日本/語"),
    ],
)
def test_normalize_path(raw: str, normalized: str) -> None:
    assert normalize_path(raw) == normalized


@pytest.mark.parametrize("bad", ["/../x", "..", "a/../../b", "/a\x00b", "/\udc80", "/" + "x" * 5000])
def test_normalize_path_refuses(bad: str) -> None:
    with pytest.raises(InvalidArgument):
        normalize_path(bad)


def test_path_helpers() -> None:
    assert ancestors("/a/b/c") == ["/a", "/a/b"]
    assert ancestors("/a") == []
    assert dir_prefix("/a/b") == "/a/b/" and dir_prefix("/") == "/"
    assert is_under("/log/x", "/log") and is_under("/log", "/log") and not is_under("/logs", "/log")
    assert is_under("/anything", "/")
    assert immediate_children("/a/", ["/a/x", "/a/y/z", "/a/y/w", "/ab", "/a/"]) == ["x", "y/"]


@pytest.mark.parametrize("good", ["a", "team-a", "A.b_c-9", "x" * 64])
def test_valid_namespaces(good: str) -> None:
    assert validate_namespace(good) == good


@pytest.mark.parametrize("bad", ["", ".", "..", "a/b", "x" * 65, "sp ace", "ü"])
def test_invalid_namespaces(bad: str) -> None:
    with pytest.raises(InvalidArgument):
        validate_namespace(bad)
