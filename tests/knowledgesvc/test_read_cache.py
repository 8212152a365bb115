"""The read cache's coherence rules, step by step (the interleavings the service tests cannot force)."""

from __future__ import annotations

import pytest

from agentsdk.errors import InvalidArgument
from agentsdk.knowledge import ChangeEvent
from agentsdk.knowledge.read_cache import CachedFile, Key, NamespaceCache, ReadCache


def live_cache() -> NamespaceCache:
    cache = ReadCache(1 << 20).namespace("ns")
    cache.connected()
    return cache


def key(cache: NamespaceCache, path: str) -> Key:
    k = cache.file_key(path)
    assert k is not None
    return k


def dir_key(cache: NamespaceCache, path: str) -> Key:
    k = cache.dir_key(path)
    assert k is not None
    return k


def cached(cache: NamespaceCache, path: str) -> CachedFile | None:
    return cache.cached_file(key(cache, path), content=True)


def written(path: str, version: int) -> ChangeEvent:
    return ChangeEvent(path, "written", 0, 1, version)


def test_a_fetch_result_is_stored_when_nothing_happened_meanwhile() -> None:
    cache = live_cache()
    with cache.fetching(key(cache, "/f")) as ticket:
        ticket.store(CachedFile(True, "a", 1, 1))
    assert cached(cache, "/f") == CachedFile(True, "a", 1, 1)


def test_a_fetch_overlapping_a_change_event_is_not_stored() -> None:
    cache = live_cache()
    with cache.fetching(key(cache, "/f")) as ticket:
        cache.apply(written("/f", 2))  # the result may show the state before this change
        ticket.store(CachedFile(True, "old", 3, 1))
    assert cached(cache, "/f") is None
    with cache.fetching(key(cache, "/f")) as ticket:  # the next fetch is stored again
        ticket.store(CachedFile(True, "new", 3, 2))
    assert cached(cache, "/f") == CachedFile(True, "new", 3, 2)


def test_a_fetch_overlapping_an_own_mutation_is_not_stored() -> None:
    cache = live_cache()
    f = key(cache, "/f")
    with cache.fetching(f) as before:  # began before the write
        with cache.mutating(f) as write:
            with cache.fetching(f) as during:  # began during the write, answered before it applied
                during.store(CachedFile(True, "old", 3, 1))
            with cache.fetching(f) as late:  # began during the write, answered before it applied, stored after
                write.store(CachedFile(True, "mine", 4, 2))
                late.store(CachedFile(True, "old", 3, 1))
        before.store(CachedFile(True, "old", 3, 1))
    assert cached(cache, "/f") == CachedFile(True, "mine", 4, 2)


def test_concurrent_own_writes_leave_nothing_cached() -> None:
    cache = live_cache()
    f = key(cache, "/f")
    with cache.mutating(f) as first:
        with cache.mutating(f) as second:
            second.store(CachedFile(True, "2", 1, 2))
        first.store(CachedFile(True, "1", 1, 1))  # which one the service applied last is unknown
    assert cached(cache, "/f") is None


def test_a_failed_or_appending_mutation_drops_the_entry() -> None:
    cache = live_cache()
    f = key(cache, "/f")
    with cache.fetching(f) as ticket:
        ticket.store(CachedFile(True, "a", 1, 1))
    with pytest.raises(RuntimeError), cache.mutating(f):
        raise RuntimeError("the write timed out: it may or may not have been applied")
    assert cached(cache, "/f") is None


def test_change_events_keep_only_entries_that_already_show_them() -> None:
    cache = live_cache()
    paths = {"/same": CachedFile(True, "a", 1, 3), "/older": CachedFile(True, "a", 1, 2)}
    paths |= {"/absent": CachedFile(False), "/exists-only": CachedFile(True), "/deleted": CachedFile(True, "a", 1, 1)}
    for path, value in paths.items():
        with cache.fetching(key(cache, path)) as ticket:
            ticket.store(value)
    cache.apply(written("/same", 3))  # e.g. the event of the store's own write, arriving after its response
    cache.apply(ChangeEvent("/older", "appended", 1, 2, 3))
    cache.apply(ChangeEvent("/absent", "deleted", 0, 0, 0))  # an older event: still absent
    cache.apply(written("/exists-only", 1))
    cache.apply(ChangeEvent("/deleted", "deleted", 0, 0, 0))
    survivors = {path for path in paths if cache.cached_file(key(cache, path), content=False) is not None}
    assert survivors == {"/same", "/absent"}


def test_listings_are_dropped_by_changes_beneath_them() -> None:
    cache = live_cache()
    directories = ["/", "/a", "/a/b", "/a/bb", "/other"]
    for directory in directories:
        with cache.fetching(dir_key(cache, directory)) as ticket:
            ticket.store(("x",))
    cache.apply(written("/a/b/c", 1))
    assert [d for d in directories if cache.cached_listing(dir_key(cache, d))] == ["/a/bb", "/other"]


def test_nothing_is_cached_unless_the_watch_is_live_and_an_outage_drops_everything() -> None:
    cache = ReadCache(1 << 20).namespace("ns")
    f = key(cache, "/f")
    with cache.fetching(f) as ticket:  # not live yet
        ticket.store(CachedFile(True, "a", 1, 1))
    assert cache.info().entries == 0
    with cache.fetching(f) as ticket:  # began before the watch was confirmed: changes meanwhile are unreported
        cache.connected()
        ticket.store(CachedFile(True, "a", 1, 1))
    assert cache.info().entries == 0
    with cache.fetching(f) as ticket:
        ticket.store(CachedFile(True, "a", 1, 1))
    with cache.fetching(key(cache, "/g")) as in_flight:
        cache.disconnected()
        assert cache.info().entries == 0
        cache.connected()  # re-established before the fetch came back: its result may predate the outage
        in_flight.store(CachedFile(True, "b", 1, 1))
    assert cache.info().entries == 0
    assert cached(cache, "/f") is None


def test_namespaces_share_the_budget_but_not_their_entries() -> None:
    shared = ReadCache(1 << 20)
    one, two = shared.namespace("one"), shared.namespace("two")
    assert shared.namespace("one") is one
    for cache in (one, two):
        cache.connected()
        with cache.fetching(key(cache, "/f")) as ticket:
            ticket.store(CachedFile(True, cache.namespace, 3, 1))
    one.disconnected()
    assert cached(one, "/f") is None
    assert cached(two, "/f") == CachedFile(True, "two", 3, 1)
    assert len(shared) == 1


def test_paths_the_service_refuses_are_not_cached_and_the_budget_must_be_positive() -> None:
    cache = live_cache()
    assert cache.file_key("/../x") is None
    assert cache.file_key("/") is None  # the root is not a file
    assert cache.dir_key("/a/../../x") is None
    assert cache.file_key("a//b/") == ("ns", False, "/a/b")
    with pytest.raises(InvalidArgument):
        ReadCache(0)
