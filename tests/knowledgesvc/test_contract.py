"""The KnowledgeStore contract, run against every backend in-process and behind the real service."""

from __future__ import annotations

import asyncio

import pytest

from agentsdk.errors import InvalidArgument, NotFound, OutOfRange
from agentsdk.knowledge import ChangeEvent, KnowledgeStore
from tests.knowledgesvc.helpers import Recorder, assert_eventually

TEXT = "héllo→世界\n"  # 1-, 2-, 3-byte characters
TEXT_BYTES = len(TEXT.encode("utf-8"))


async def test_write_read_exists_overwrite(store: KnowledgeStore) -> None:
    assert isinstance(store, KnowledgeStore)
    assert not await store.exists("/artifacts/report.md")
    await store.write("/artifacts/report.md", "# Q3\n")
    assert await store.exists("/artifacts/report.md")
    assert await store.read("/artifacts/report.md") == "# Q3\n"
    await store.write("/artifacts/report.md", TEXT)
    assert await store.read("/artifacts/report.md") == TEXT
    await store.write("/empty", "")
    assert await store.read("/empty") == ""
    assert await store.exists("/empty")


async def test_missing_files_raise_not_found(store: KnowledgeStore) -> None:
    with pytest.raises(NotFound):
        await store.read("/nope.md")
    with pytest.raises(NotFound):
        await store.delete("/nope.md")
    with pytest.raises(NotFound):
        await store.read_range("/nope.md", 0)
    await store.write("/dir/file", "x")
    with pytest.raises(NotFound):
        await store.read("/dir")  # a directory is not a file
    with pytest.raises(NotFound):
        await store.delete("/dir")


async def test_delete_removes_file_and_empty_directories(store: KnowledgeStore) -> None:
    await store.write("/a/b/c.txt", "1")
    await store.write("/a/keep.txt", "2")
    await store.delete("/a/b/c.txt")
    assert not await store.exists("/a/b/c.txt")
    with pytest.raises(NotFound):
        await store.read("/a/b/c.txt")
    assert await store.list("/a") == ["keep.txt"]
    assert await store.list("/a/b") == []
    await store.write("/a/b/c.txt", "again")  # re-creatable after delete
    assert await store.read("/a/b/c.txt") == "again"


async def test_list_immediate_children_sorted_with_directory_slash(store: KnowledgeStore) -> None:
    for path in ["/z.md", "/b/c.txt", "/b/d/e.txt", "/a.txt", "/b/d/f/g.txt", "/bb", "/b/a.txt"]:
        await store.write(path, path)
    assert await store.list("/") == ["a.txt", "b/", "bb", "z.md"]
    assert await store.list("/b") == ["a.txt", "c.txt", "d/"]
    assert await store.list("/b/") == ["a.txt", "c.txt", "d/"]
    assert await store.list("b//d/./") == ["e.txt", "f/"]
    assert await store.list("/missing") == []
    assert await store.list("/a.txt") == []  # a file has no children


async def test_paths_are_normalised(store: KnowledgeStore) -> None:
    await store.write("/a//b/../c", "normalised")
    assert await store.read("/a/c") == "normalised"
    assert await store.read("a/./c") == "normalised"  # relative to "/"
    assert await store.exists("/a/c/")
    await store.append("rel/log", "x")
    assert await store.read("/rel/log") == "x"
    assert await store.list("/") == ["a/", "rel/"]
    await store.delete("/a/x/../c")
    assert not await store.exists("/a/c")


@pytest.mark.parametrize("bad", ["/../x", "../x", "/a/../../x", "/a/b/../../../etc/passwd"])
async def test_traversal_is_refused(store: KnowledgeStore, bad: str) -> None:
    with pytest.raises(InvalidArgument):
        await store.write(bad, "x")
    with pytest.raises(InvalidArgument):
        await store.read(bad)
    with pytest.raises(InvalidArgument):
        await store.append(bad, "x")
    with pytest.raises(InvalidArgument):
        await store.list(bad)
    with pytest.raises(InvalidArgument):
        await store.exists(bad)
    assert await store.list("/") == []


async def test_root_is_not_a_file(store: KnowledgeStore) -> None:
    with pytest.raises(InvalidArgument):
        await store.write("/", "x")
    with pytest.raises(InvalidArgument):
        await store.read("/..")


async def test_a_path_is_either_file_or_directory(store: KnowledgeStore) -> None:
    await store.write("/notes", "a file")
    with pytest.raises(InvalidArgument):
        await store.write("/notes/inner.md", "x")
    with pytest.raises(InvalidArgument):
        await store.append("/notes/deeper/inner.md", "x")
    await store.write("/dir/inner.md", "x")
    with pytest.raises(InvalidArgument):
        await store.write("/dir", "x")
    with pytest.raises(InvalidArgument):
        await store.append("/dir", "x")
    assert await store.list("/") == ["dir/", "notes"]
    assert await store.read("/notes") == "a file"


async def test_unicode_paths_and_content(store: KnowledgeStore) -> None:
    await store.write("/メモ/日本語.md", TEXT)
    assert await store.list("/") == ["メモ/"]
    assert await store.list("/メモ") == ["日本語.md"]
    assert await store.read("/メモ/日本語.md") == TEXT


async def test_append_offsets_and_read_range_with_multibyte_text(store: KnowledgeStore) -> None:
    assert await store.append("/log/events.jsonl", TEXT) == 0  # creates the file
    assert await store.append("/log/events.jsonl", '{"t":1}\n') == TEXT_BYTES
    third = await store.append("/log/events.jsonl", "末尾")
    assert third == TEXT_BYTES + 8
    assert await store.read("/log/events.jsonl") == TEXT + '{"t":1}\n' + "末尾"
    assert await store.read_range("/log/events.jsonl", 0) == TEXT + '{"t":1}\n' + "末尾"
    assert await store.read_range("/log/events.jsonl", TEXT_BYTES) == '{"t":1}\n末尾'
    assert await store.read_range("/log/events.jsonl", third) == "末尾"
    assert await store.read_range("/log/events.jsonl", third + 3) == "尾"
    assert await store.read_range("/log/events.jsonl", third + 6) == ""  # offset == size


# Bytes of TEXT: "h"=0, "é"=1-2, "l"=3, "l"=4, "o"=5, "→"=6-8, "世"=9-11, "界"=12-14, "\n"=15.
@pytest.mark.parametrize("offset", [2, 7, 8, 10, 14, TEXT_BYTES + 1, -1])
async def test_read_range_refuses_offsets_inside_characters_or_outside(store: KnowledgeStore, offset: int) -> None:
    await store.write("/t.txt", TEXT)
    assert await store.read_range("/t.txt", 9) == "世界\n"
    with pytest.raises(OutOfRange):
        await store.read_range("/t.txt", offset)


async def test_append_after_write_and_write_after_append(store: KnowledgeStore) -> None:
    await store.write("/f", "abc")
    assert await store.append("/f", "dé") == 3
    assert await store.read("/f") == "abcdé"
    await store.write("/f", "new")
    assert await store.append("/f", "!") == 3
    assert await store.read_range("/f", 0) == "new!"


async def test_concurrent_appends_are_atomic(store: KnowledgeStore) -> None:
    tasks, per_task = 50, 20

    async def appender(task: int) -> list[tuple[int, str]]:
        landed = []
        for i in range(per_task):
            line = f"task-{task:02d} line-{i:02d} {'é' * (task % 5)}\n"
            landed.append((await store.append("/log/concurrent.log", line), line))
        return landed

    results = [entry for chunk in await asyncio.gather(*(appender(t) for t in range(tasks))) for entry in chunk]
    content = await store.read("/log/concurrent.log")
    lines = content.splitlines(keepends=True)
    assert len(lines) == tasks * per_task
    assert sorted(lines) == sorted(line for _, line in results)  # each exactly once, none torn
    # Offsets tile the file: each line sits exactly where its append said.
    data = content.encode("utf-8")
    position = 0
    for offset, line in sorted(results):
        assert offset == position
        assert data[offset : offset + len(line.encode("utf-8"))] == line.encode("utf-8")
        position += len(line.encode("utf-8"))
    assert position == len(data)
    last_offset, last_line = max(results)
    assert await store.read_range("/log/concurrent.log", last_offset) == last_line


async def test_on_change_reports_written_appended_deleted_under_prefix(store: KnowledgeStore) -> None:
    recorder = Recorder()
    sub = await store.on_change("/watched/", recorder)
    await store.write("/watched/a.md", "héllo")  # 6 bytes
    await store.append("/watched/a.md", "→")  # 3 bytes at offset 6
    await store.write("/other/x.md", "not watched")
    await store.write("/watchedness", "not under the prefix")
    await store.delete("/watched/a.md")
    await store.write("/watched/sub/b.md", "b")
    await store.write("/watched/sub/b.md", "bb")
    await store.append("/watched/a.md", "new")  # re-created: its version starts again at 1
    expected = [
        ("/watched/a.md", "written", 0, 6, 1),
        ("/watched/a.md", "appended", 6, 9, 2),
        ("/watched/a.md", "deleted", 0, 0, 0),
        ("/watched/sub/b.md", "written", 0, 1, 1),
        ("/watched/sub/b.md", "written", 0, 2, 2),
        ("/watched/a.md", "appended", 0, 3, 1),
    ]

    def delivered() -> None:
        assert recorder.summary() == expected

    await assert_eventually(delivered)
    await sub.cancel()


async def test_on_change_accepts_async_callbacks_and_the_root_prefix(store: KnowledgeStore) -> None:
    seen: list[ChangeEvent] = []

    async def callback(event: ChangeEvent) -> None:
        await asyncio.sleep(0)
        seen.append(event)

    sub = await store.on_change("/", callback)
    await store.write("/x", "1")
    await store.append("/y/z", "2")

    def delivered() -> None:
        assert [(e.path, e.kind) for e in seen] == [("/x", "written"), ("/y/z", "appended")]

    await assert_eventually(delivered)
    await sub.cancel()


async def test_no_events_after_cancel(store: KnowledgeStore) -> None:
    cancelled, witness = Recorder(), Recorder()
    sub = await store.on_change("/w", cancelled)
    witness_sub = await store.on_change("/", witness)
    await store.write("/w/before", "1")
    await assert_eventually(lambda: _assert_paths(cancelled, ["/w/before"]))
    await sub.cancel()
    assert not sub.active
    await sub.cancel()  # harmless twice
    await store.write("/w/after", "2")
    await store.write("/sentinel", "3")
    # The witness saw both later writes, so the cancelled subscription had every chance to.
    await assert_eventually(lambda: _assert_paths(witness, ["/w/before", "/w/after", "/sentinel"]))
    assert [e.path for e in cancelled.events] == ["/w/before"]
    await witness_sub.cancel()


def _assert_paths(recorder: Recorder, paths: list[str]) -> None:
    assert [e.path for e in recorder.events] == paths


async def test_on_change_refuses_traversal(store: KnowledgeStore) -> None:
    with pytest.raises(InvalidArgument):
        await store.on_change("/../etc", Recorder())
