"""DiskKnowledgeStore specifics: plain files, atomic writes, reserved and escaping paths, the watchdog extra."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from agentsdk.errors import InvalidArgument
from agentsdk.knowledge import DiskKnowledgeStore
from tests.knowledgesvc.helpers import Recorder, assert_eventually


async def test_files_are_plain_and_human_readable(tmp_path: Path) -> None:
    async with DiskKnowledgeStore(tmp_path) as store:
        await store.write("/notes/a.md", "# Title\nhéllo\n")
        await store.append("/log/events.jsonl", '{"t":1}\n')
        await store.append("/log/events.jsonl", '{"t":2}\n')
        assert (tmp_path / "notes" / "a.md").read_text(encoding="utf-8") == "# Title\nhéllo\n"
        assert (tmp_path / "log" / "events.jsonl").read_text() == '{"t":1}\n{"t":2}\n'
        assert list((tmp_path / ".agentnet" / "tmp").iterdir()) == []  # no temp files left behind
        await store.delete("/notes/a.md")
        assert not (tmp_path / "notes").exists()  # empty directory removed with its last file


async def test_files_made_by_hand_are_readable_and_bookkeeping_is_hidden(tmp_path: Path) -> None:
    (tmp_path / "hand").mkdir()
    (tmp_path / "hand" / "made.txt").write_text("typed in an editor")
    async with DiskKnowledgeStore(tmp_path) as store:
        assert await store.list("/") == ["hand/"]
        assert await store.read("/hand/made.txt") == "typed in an editor"
        assert await store.append("/hand/made.txt", "!") == len("typed in an editor")


async def test_reserved_name_and_symlink_escapes_are_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("secret")
    root = tmp_path / "root"
    async with DiskKnowledgeStore(root) as store:
        os.symlink(outside, root / "link")
        os.symlink(outside / "secret", root / "file-link")
        for path in ("/link/secret", "/file-link"):
            with pytest.raises(InvalidArgument, match="outside the store root"):
                await store.read(path)
            with pytest.raises(InvalidArgument):
                await store.append(path, "x")
        with pytest.raises(InvalidArgument):
            await store.write("/link/new", "x")
        with pytest.raises(InvalidArgument, match="reserved"):
            await store.write("/.agentnet/lock", "x")
        with pytest.raises(InvalidArgument, match="reserved"):
            await store.read("/a/.agentnet/x")
    assert (outside / "secret").read_text() == "secret"
    assert sorted(p.name for p in outside.iterdir()) == ["secret"]


async def test_watch_follows_journal_rotation(tmp_path: Path) -> None:
    async with DiskKnowledgeStore(tmp_path, journal_max_bytes=1500) as store:
        recorder = Recorder()
        await store.on_change("/", recorder)
        for i in range(60):
            await store.write(f"/f{i:02d}", str(i))
        assert (tmp_path / ".agentnet" / "changes.jsonl.1").exists()

        def delivered() -> None:
            assert [e.path for e in recorder.events] == [f"/f{i:02d}" for i in range(60)]

        await assert_eventually(delivered)


async def test_namespaces_are_subdirectories(tmp_path: Path) -> None:
    async with DiskKnowledgeStore(tmp_path) as store:
        team = store.namespace("team")
        recorder = Recorder()
        await team.on_change("/", recorder)
        await team.write("/x.md", "team file")
        assert (tmp_path / "team" / "x.md").read_text() == "team file"
        await assert_eventually(lambda: _assert_paths(recorder, ["/x.md"]))


def _assert_paths(recorder: Recorder, paths: list[str]) -> None:
    assert [e.path for e in recorder.events] == paths


def test_without_watchdog_the_import_error_names_the_extra() -> None:
    code = (
        "import sys; sys.modules['watchdog'] = None\n"
        "import agentsdk.knowledge as k\n"
        "k.MemoryKnowledgeStore()\n"
        "try:\n"
        "    k.DiskKnowledgeStore\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert "pip install 'agent-network[disk]'" in result.stdout
