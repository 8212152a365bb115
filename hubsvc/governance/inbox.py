"""Inbox caps: how much may wait for an identity (INBOX_FULL beyond).

What is counted: an identity's **pending** envelopes are the envelopes of its *live*
channels that are visible to it (broadcast, or it is in the audience), that it did not
send itself, and that lie above its cursor in that channel — exactly what the hub would
deliver to it if it connected now. Hub-generated envelopes (invites, opened, closed)
count like any other. The cursor moves when it acknowledges deliveries (and past
envelopes it is not meant to see), whether it is connected or not: an offline identity
keeps its last cursor, so everything posted for it meanwhile counts. When a channel
ends, its envelopes leave the count (they are still replayed on resume, but no longer
hold the inbox).

The count is staged with the envelope (in admission, under the channel's lock), so posts
in flight count before they commit; a failed commit rebuilds the channel's count from the
WAL (:meth:`reset` then :meth:`staged` again). At start, the hub rebuilds every live
channel's count from the stored cursors and the WAL it folds anyway (:meth:`load_floor`
before the fold), so the count survives a restart — acks of the last cursor-flush interval
before a crash count again, as those envelopes are replayed again.

The cap is checked for every envelope a participant posts (and for the seed of a channel
being opened): a recipient at its cap refuses it with :class:`~netkernel.errors.InboxFull`
(metadata ``recipient``, ``rule``, ``limit``). Hub-generated envelopes are never refused.
Memory: one small int per pending (recipient, envelope), plus one entry per participant
of each live channel.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Sequence

from agentnet.v1 import envelope_pb2

from netkernel.errors import InboxFull
from netkernel.wire import wire_recipients


class _Pending:
    __slots__ = ("floor", "seqs")

    def __init__(self, floor: int) -> None:
        self.floor = floor
        """The participant's cursor in the channel: nothing at or below it counts."""
        self.seqs: deque[int] = deque()
        """Counted seqs above the floor, ascending."""


class Inboxes:
    """Pending envelopes per identity, and the inbox cap check."""

    def __init__(self, cap_of: Callable[[str], tuple[int, str] | None], name_of: Callable[[str], str]) -> None:
        self._cap_of = cap_of
        self._name_of = name_of
        self._channels: dict[str, dict[str, _Pending]] = {}
        self._totals: dict[str, int] = {}

    def pending(self, agent_id: str) -> int:
        """Envelopes waiting for ``agent_id`` in its live channels (see the module docstring)."""
        return self._totals.get(agent_id, 0)

    def check(self, sender_id: str, participants: Iterable[str], audience: Sequence[str] | None) -> None:
        """Refuse (InboxFull) an envelope from ``sender_id`` that would reach a recipient at its cap."""
        cap_of = self._cap_of
        for recipient in participants:
            if recipient == sender_id or (audience is not None and recipient not in audience):
                continue
            cap = cap_of(recipient)
            if cap is None:
                continue
            pending = self._totals.get(recipient, 0)
            if pending >= cap[0]:
                name = self._name_of(recipient)
                raise InboxFull(
                    f"the inbox of {name} is full: {pending} envelopes wait for it (limit {cap[0]}, rule "
                    f"{cap[1]!r}); retry once it has caught up (it acknowledges deliveries) or post to others.",
                    metadata={"recipient": recipient, "recipient_name": name, "rule": cap[1], "limit": str(cap[0])},
                )

    def staged(self, channel_id: str, participants: Iterable[str], wire: envelope_pb2.Envelope) -> None:
        """Count a staged (or, at start and after a failed write, folded) envelope for its recipients."""
        members = self._channels.get(channel_id)
        if members is None:
            members = self._channels[channel_id] = {}
        totals = self._totals
        seq = wire.seq
        for agent_id in wire_recipients(wire, participants):
            entry = members.get(agent_id)
            if entry is None:
                entry = members[agent_id] = _Pending(0)
            if seq > entry.floor:
                entry.seqs.append(seq)
                totals[agent_id] = totals.get(agent_id, 0) + 1

    def staged_run(self, channel_id: str, participants: Sequence[str], wires: Sequence[envelope_pb2.Envelope]) -> None:
        """:meth:`staged` for each of ``wires`` in turn (a run of one channel's envelopes, in seq order).

        Rebuilding a channel counts its whole WAL: each field of an envelope is read once, then
        each participant's count is taken in one pass."""
        members = self._channels.get(channel_id)
        if members is None:
            members = self._channels[channel_id] = {}
        rows = [(w.seq, w.sender_id, w.audience.agent_ids if w.HasField("audience") else None) for w in wires]
        totals = self._totals
        for agent_id in participants:
            entry = members.get(agent_id)
            floor = 0 if entry is None else entry.floor
            seqs = [
                seq
                for seq, sender, audience in rows
                if seq > floor and sender != agent_id and (audience is None or agent_id in audience)
            ]
            if seqs:
                if entry is None:
                    entry = members[agent_id] = _Pending(0)
                entry.seqs.extend(seqs)
                totals[agent_id] = totals.get(agent_id, 0) + len(seqs)

    def cursor(self, agent_id: str, channel_id: str, cursor: int) -> None:
        """``agent_id``'s cursor in the channel moved to ``cursor``: what it passed no longer counts."""
        members = self._channels.get(channel_id)
        if members is None:
            return  # not a live channel: nothing of it counts
        entry = members.get(agent_id)
        if entry is None:
            members[agent_id] = _Pending(cursor)
            return
        if cursor <= entry.floor:
            return
        entry.floor = cursor
        seqs = entry.seqs
        passed = 0
        while seqs and seqs[0] <= cursor:
            seqs.popleft()
            passed += 1
        if passed:
            self._subtract(agent_id, passed)

    def load_floor(self, agent_id: str, channel_id: str, cursor: int) -> None:
        """A stored cursor of a live channel, before its WAL is folded at start."""
        self._channels.setdefault(channel_id, {})[agent_id] = _Pending(cursor)

    def reset(self, channel_id: str) -> None:
        """Uncount the channel's envelopes but keep its cursors (its count is rebuilt from the WAL next)."""
        for agent_id, entry in self._channels.get(channel_id, {}).items():
            if entry.seqs:
                self._subtract(agent_id, len(entry.seqs))
                entry.seqs.clear()

    def release(self, channel_id: str) -> None:
        """The channel ended: none of its envelopes counts any more."""
        self.reset(channel_id)
        self._channels.pop(channel_id, None)

    def _subtract(self, agent_id: str, n: int) -> None:
        left = self._totals.get(agent_id, 0) - n
        if left > 0:
            self._totals[agent_id] = left
        else:
            self._totals.pop(agent_id, None)
