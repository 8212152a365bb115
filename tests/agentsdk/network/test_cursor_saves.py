"""Cursor stores are written off the event loop, one save at a time, coalescing the moves made
meanwhile; disconnecting writes the last ones (agentsdk/network/_cursors.py, docs/network.md)."""

from __future__ import annotations

import asyncio
import logging
import threading
from pathlib import Path

import pytest

from agentsdk.network import EV_TEXT, Hub, JsonFileCursorStore, Passport
from agentsdk.network._cursors import CursorBook
from tests.eventually import assert_eventually


class RecordingStore:
    """A cursor store that records each save (its thread, what it wrote) and can be held or made to fail."""

    def __init__(self) -> None:
        self.saved: list[dict[str, int]] = []
        self.threads: set[int] = set()
        self.release = threading.Event()
        self.release.set()
        self.failures = 0
        self._active = 0
        self.overlapped = False
        self._lock = threading.Lock()

    def load(self) -> dict[str, int]:
        return {}

    def save(self, cursors: dict[str, int]) -> None:
        with self._lock:
            self._active += 1
            self.overlapped = self.overlapped or self._active > 1
        try:
            self.threads.add(threading.get_ident())
            self.release.wait(30)
            if self.failures:
                self.failures -= 1
                raise OSError("disk full")
            self.saved.append(dict(cursors))
        finally:
            with self._lock:
                self._active -= 1


async def test_moves_are_saved_off_the_loop_one_save_at_a_time_and_flush_writes_the_last() -> None:
    store = RecordingStore()
    store.release.clear()  # the first save waits, so the moves after it pile up
    book = CursorBook(store)
    for seq in range(1, 201):
        assert book.processed("c1", seq - 1, seq)
    store.release.set()
    await book.flush()
    assert store.saved[-1] == {"c1": 200} == book.snapshot()
    assert len(store.saved) < 10  # 200 moves, a save each would be 200
    assert threading.get_ident() not in store.threads
    assert not store.overlapped


async def test_moves_made_during_a_slow_save_reach_the_store_without_flush() -> None:
    """The save that ends starts the next one for the moves made meanwhile: nobody has to call
    flush() (a process that never disconnects cleanly still gets its last cursors saved)."""
    store = RecordingStore()
    store.release.clear()  # the first save hangs: the moves after it are made during it
    book = CursorBook(store)
    book.processed("c1", 0, 1)
    for seq in range(2, 51):
        book.processed("c1", seq - 1, seq)
    assert store.saved == []
    store.release.set()
    await assert_eventually(lambda: store.saved and store.saved[-1] == {"c1": 50})
    assert store.saved[0] == {"c1": 1} and len(store.saved) == 2  # the slow save, then one for the rest


async def test_a_failed_save_is_logged_and_tried_again(caplog: pytest.LogCaptureFixture) -> None:
    store = RecordingStore()
    store.failures = 1
    book = CursorBook(store)
    book.processed("c1", 0, 1)
    await book.flush()  # the only save failed: flush tries once more
    assert "could not save the delivery cursors (disk full)" in caplog.text
    assert store.saved == [{"c1": 1}]
    store.failures = 5
    book.processed("c1", 1, 2)
    await asyncio.wait_for(book.flush(), 10)  # a store that keeps failing does not hold flush forever
    assert store.saved == [{"c1": 1}]
    store.failures = 0
    book.processed("c1", 2, 3)
    await book.flush()
    assert store.saved[-1] == {"c1": 3}


async def test_a_save_that_hangs_holds_up_no_delivery_and_disconnect_writes_the_last_cursor(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, "agentnet.sdk")
    store = RecordingStore()
    async with Hub.open() as hub:
        alice = await hub.register_human(Passport(name="alice", kind="human"))
        bob = await hub.register_human(Passport(name="bob", kind="human"), cursor_store=store)
        channel = await alice.open(type="conversation", target="bob")
        got: list[str] = []
        bob.on_envelope(lambda env: got.append(env.text) if env.event_type == EV_TEXT else None)
        await assert_eventually(lambda: store.saved)  # the invite and the opening were saved
        store.release.clear()  # from here the store's next save hangs until released
        sent = [await alice.send(channel.channel_id, f"m{i}") for i in range(50)]
        await assert_eventually(lambda: len(got) == 50)  # handled while the save hung
        assert not store.saved or store.saved[-1].get(channel.channel_id, 0) < sent[-1].seq
        store.release.set()
        await bob.disconnect()
        assert store.saved[-1][channel.channel_id] >= sent[-1].seq
    assert "could not save" not in caplog.text


async def test_a_restarted_client_resumes_from_the_cursor_file_its_disconnect_wrote(tmp_path: Path) -> None:
    path = tmp_path / "bob.cursors.json"
    async with Hub.open() as hub:
        alice = await hub.register_human(Passport(name="alice", kind="human"))
        bob = await hub.register_human(Passport(name="bob", kind="human"), cursor_store=JsonFileCursorStore(path))
        channel = await alice.open(type="conversation", target="bob")
        for i in range(30):
            await alice.send(channel.channel_id, f"m{i}")
        for _ in range(30):
            await bob.next_envelope(predicate=lambda e: e.event_type == EV_TEXT, timeout=10)
        credential = bob.credential
        await bob.disconnect()
        await alice.send(channel.channel_id, "after")
        again = await hub.resume_human(credential, cursor_store=JsonFileCursorStore(path))
        first = await again.next_envelope(predicate=lambda e: e.event_type == EV_TEXT, timeout=10)
        assert first.text == "after"  # nothing handled before the disconnect comes again
        await again.disconnect()
