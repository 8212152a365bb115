"""Which stored call tokens of an execution make room for a new one, and when there is none.

One execution holds at most ``CallTokenRow.hold_limit`` tokens in the store. Storing a new
token first removes the execution's tokens that expired more than the grace period ago
(RefreshCallToken would never accept them again), then, while the execution would still
hold more than the limit, its oldest expired tokens (they can no longer authorize a call,
only be exchanged). Unexpired tokens are never removed: when they alone reach the limit the
new token is refused (:class:`~hubsvc.storage.base.LimitConflict`), so every token a caller
was handed keeps working until its expiry. The SQLite store and the hub's memory use these
functions; the Redis commit script does the same in Lua (``tokens`` check, ``tokroom`` write).
"""

from __future__ import annotations

from collections.abc import Mapping

from hubsvc.storage.base import CallTokenRow, LimitConflict


def unexpired(held: Mapping[str, float], at: float) -> int:
    """How many of the tokens ``held`` (hash → expiry) have not expired at ``at``."""
    return sum(1 for expires_at in held.values() if expires_at > at)


def check_room(held: Mapping[str, float], row: CallTokenRow, earlier: int = 0) -> None:
    """Raise :class:`LimitConflict` when the execution's unexpired tokens ``held`` (hash → expiry,
    as stored) plus ``earlier`` new ones reach ``row.hold_limit``; nothing to check without one."""
    if row.hold_limit is None:
        return
    count = unexpired(held, row.issued_at) + earlier
    if count >= row.hold_limit:
        raise LimitConflict(
            f"execution {row.execution_id} holds {count} unexpired call tokens, its limit of {row.hold_limit}",
            count,
        )


def make_room(held: Mapping[str, float], row: CallTokenRow) -> list[str]:
    """The hashes among ``held`` (the execution's stored tokens, hash → expiry) that storing
    ``row`` removes: those past expiry plus grace, then the oldest expired ones (by expiry, then
    hash) while the execution would hold more than ``row.hold_limit``. None without a limit."""
    if row.hold_limit is None:
        return []
    now = row.issued_at
    gone = [h for h, expires_at in held.items() if expires_at + row.grace <= now]
    expired = sorted((e, h) for h, e in held.items() if e <= now and e + row.grace > now)
    excess = len(held) - len(gone) + 1 - row.hold_limit
    return gone + [h for _, h in expired[: max(0, excess)]]
