"""A channel's window of recent idempotency keys, and a filter of the keys it has forgotten.

Every envelope a channel's store holds is folded into its runtime (admission, hydrate, a
rebuild, a catch-up), so every key the store holds passed through the channel's window. The
window remembers the last ``limit`` keyed posts exactly (key -> envelope id); each key it
forgets goes into a Bloom filter. A new key the filter has never seen is proved new without
asking the store; a key the filter may hold (a retry of an old post, or a false positive,
1.7% of new keys per full filter) is looked up in the store, as every miss was before the window forgot.

Memory is bounded: a channel's filters take 128 KiB each (104,857 keys) and at most
``max_filter_bytes`` together (1 MiB by default, 838,856 forgotten keys); past that they
are dropped and every miss of the window is asked of the store.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

FILTER_BITS = 1 << 20
"""Bits of one filter (128 KiB; its three probes take 21 bits each of one 64-bit hash). A channel
gets its first once its window forgets a key (a channel of fewer keyed posts has none), and
another each time the last is full."""
BITS_PER_KEY = 10
"""A filter takes ``bits / BITS_PER_KEY`` keys (three probes: about 1.7% false positives when full)."""
MAX_FILTER_BYTES = 1 << 20
"""A channel's filters together take at most this many bytes by default."""

_MASK = FILTER_BITS - 1

Key = tuple[str, str]
"""(sender_id, idempotency_key)."""


class ForgottenKeys:
    """A growing Bloom filter (a list of fixed-size ones) of keys: no false negatives while ``complete``."""

    __slots__ = ("_bytes", "_filters", "_max_bytes", "_room", "complete")

    def __init__(self, max_bytes: int) -> None:
        self._filters: list[bytearray] = []
        self._room = 0
        self._bytes = 0
        self._max_bytes = max_bytes
        self.complete = True
        """False once the filters would have outgrown ``max_bytes``: they were dropped and say nothing."""

    def add(self, key: Key) -> None:
        """Remember ``key`` (a new filter once the last is full; none past the byte budget)."""
        if not self.complete:
            return
        if self._room == 0:
            if self._bytes + FILTER_BITS // 8 > self._max_bytes:
                self.complete = False
                self._filters = []
                return
            self._filters.append(bytearray(FILTER_BITS // 8))
            self._bytes += FILTER_BITS // 8
            self._room = FILTER_BITS // BITS_PER_KEY
        self._room -= 1
        table = self._filters[-1]
        h = hash(key)
        for bit in (h & _MASK, (h >> 21) & _MASK, (h >> 42) & _MASK):
            table[bit >> 3] |= 1 << (bit & 7)

    def may_hold(self, key: Key) -> bool:
        """False only if ``key`` was never added (always True once the filter is incomplete)."""
        if not self.complete:
            return True
        h = hash(key)
        a, b, c = h & _MASK, (h >> 21) & _MASK, (h >> 42) & _MASK
        for table in self._filters:
            if table[a >> 3] >> (a & 7) & table[b >> 3] >> (b & 7) & table[c >> 3] >> (c & 7) & 1:
                return True
        return False

    @property
    def nbytes(self) -> int:
        """Bytes the filters take."""
        return self._bytes if self.complete else 0


class KeyWindow(OrderedDict[Key, str]):
    """(sender_id, idempotency_key) -> envelope_id of a channel's last ``limit`` keyed posts; the keys
    it forgets (oldest first) go into :class:`ForgottenKeys`."""

    def __init__(self, limit: int = 4096, max_filter_bytes: int = MAX_FILTER_BYTES) -> None:
        super().__init__()
        self.limit = limit
        self.evicted = False
        """Some key was forgotten (so a miss alone does not prove a key new; see :meth:`may_have_forgotten`)."""
        self.forgotten = ForgottenKeys(max_filter_bytes)

    def __setitem__(self, key: Key, value: str, _set: Any = OrderedDict.__setitem__) -> None:
        _set(self, key, value)
        if len(self) > self.limit:
            self.forgotten.add(self.popitem(last=False)[0])
            self.evicted = True

    def may_have_forgotten(self, key: Key) -> bool:
        """Whether ``key``, missing from the window, may be one it forgot (False proves it new)."""
        return self.evicted and self.forgotten.may_hold(key)
