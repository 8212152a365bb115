"""A channel's window of idempotency keys (hubsvc/core/key_window.py): exact for its last keys, a
filter of the keys it forgot that never denies a forgotten key, and bytes bounded."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from hubsvc.core.key_window import BITS_PER_KEY, FILTER_BITS, KeyWindow


def keys(prefix: str, n: int) -> list[tuple[str, str]]:
    return [(f"sender-{i % 3}", f"{prefix}-{i:08x}") for i in range(n)]


def test_a_window_that_forgot_nothing_proves_every_miss_new() -> None:
    window = KeyWindow(limit=8)
    for key in keys("a", 8):
        window[key] = "env"
    assert not window.evicted
    assert not window.may_have_forgotten(("sender-0", "never-posted"))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.text(min_size=1, max_size=40), min_size=1, max_size=400, unique=True), st.integers(1, 64))
def test_every_forgotten_key_may_have_been_forgotten(posted: list[str], limit: int) -> None:
    window = KeyWindow(limit=limit)
    for key in posted:
        window[("s", key)] = key
    forgotten = posted[: max(0, len(posted) - limit)]
    assert list(window) == [("s", key) for key in posted[len(forgotten) :]]  # the last `limit` keys, exactly
    assert all(window.may_have_forgotten(("s", key)) for key in forgotten)


def test_most_new_keys_are_proved_new_without_the_store() -> None:
    window = KeyWindow(limit=4096)
    old = keys("old", 150_000)  # the first filter full, a second one in use
    for key in old:
        window[key] = "env"
    assert all(window.may_have_forgotten(key) for key in old[:-4096])
    fresh = keys("new", 20_000)
    false_positives = sum(window.may_have_forgotten(key) for key in fresh)
    assert false_positives < 0.04 * len(fresh)  # about 1.7% per full filter
    assert window.forgotten.nbytes == 2 * FILTER_BITS // 8


def test_past_its_byte_budget_the_filter_is_dropped_and_every_miss_goes_to_the_store() -> None:
    window = KeyWindow(limit=16, max_filter_bytes=FILTER_BITS // 8)  # room for one filter
    for key in keys("a", 16 + FILTER_BITS // BITS_PER_KEY):  # fills it exactly
        window[key] = "env"
    assert window.forgotten.complete and window.forgotten.nbytes == FILTER_BITS // 8
    assert sum(window.may_have_forgotten(key) for key in keys("new", 5000)) < 250
    window[("sender-0", "one-more")] = "env"  # needs a second filter: over the budget
    assert not window.forgotten.complete and window.forgotten.nbytes == 0
    assert all(window.may_have_forgotten(key) for key in keys("new", 100))
