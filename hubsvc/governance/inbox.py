"""Inbox caps: how much may wait for an identity (INBOX_FULL beyond).

What is counted: an identity's **pending** envelopes are the messages of its *live*
channels that it has **not answered**: envelopes visible to it (broadcast, or it is in the
audience) that it did not send, of a counted event type — the substantive ``ag2.msg.text``
and ``ag2.packet`` and every custom (non-``ag2.``) type — posted after its last answer in
that channel. Its **answer** is a substantive envelope (``ag2.msg.text`` / ``ag2.packet``)
it posts into the channel: everything that waited for it there is answered. Protocol
envelopes — invites and their answers, opened / closed / expired, expectation
violations, ``ag2.context.set``, ``ag2.task.*`` — never count. Acknowledging a delivery
does not answer it: a recipient that reads but does not reply keeps holding its inbox
(the seeds' turn semantics; AG2 1.2.1 also counts until the recipient's next substantive
post). When a channel ends, its envelopes leave the count.

Everything the count depends on is in the channel's WAL, so it is a fold of committed
state: every hub replica folding a channel's WAL (its own admissions, other replicas'
commits through the change feed, a restart's hydrate, a rebuild after a failed write)
arrives at the same count, and nothing of it is written separately.

The count is staged with the envelope (in admission, under the channel's lock), so posts
in flight count before they commit; a failed commit rebuilds the channel's count from the
WAL (:meth:`reset` then :meth:`staged_run` again).

The cap is checked for every envelope a participant posts (and for the seed of a channel
being opened): a recipient at its cap refuses it with :class:`~netkernel.errors.InboxFull`
(metadata ``recipient``, ``rule``, ``limit``), unless the envelope is itself not counted
(a protocol envelope such as an invite answer). Hub-generated envelopes are never refused.
Memory: one small int per pending (recipient, envelope), plus one entry per participant
of each live channel that was counted for or answered.
"""

from __future__ import annotations

import operator
from bisect import bisect_right
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import accumulate, compress

from agentnet.v1 import envelope_pb2

from netkernel.envelope import SUBSTANTIVE_EVENT_TYPES
from netkernel.errors import InboxFull

_RESERVED_PREFIX = "ag2."
_EVENT_TYPE = operator.attrgetter("event_type")
_SEQ = operator.attrgetter("seq")
_SENDER = operator.attrgetter("sender_id")


def counts_in_inbox(event_type: str) -> bool:
    """Whether an envelope of ``event_type`` waits in its recipients' inboxes: the substantive types
    and every custom (non-``ag2.``) type; the protocol's own ``ag2.`` types (channel lifecycle,
    invites, context, tasks) never do."""
    return event_type in SUBSTANTIVE_EVENT_TYPES or not event_type.startswith(_RESERVED_PREFIX)


class _Pending:
    __slots__ = ("answered", "seqs")

    def __init__(self) -> None:
        self.answered = 0
        """Seq of the participant's last answer in the channel: nothing at or below it counts."""
        self.seqs: deque[int] = deque()
        """Counted seqs above ``answered``, ascending."""


class Inboxes:
    """Unanswered envelopes per identity, and the inbox cap check."""

    def __init__(self, cap_of: Callable[[str], tuple[int, str] | None], name_of: Callable[[str], str]) -> None:
        self._cap_of = cap_of
        self._name_of = name_of
        self._channels: dict[str, dict[str, _Pending]] = {}
        self._totals: dict[str, int] = {}
        self.elsewhere: dict[str, int] = {}
        """Agent id → what waits for it in the channels other replicas hold, as last read
        (:class:`~hubsvc.governance.inbox_share.SharedInboxes`; empty when one process folds them all)."""

    def pending(self, agent_id: str) -> int:
        """Envelopes waiting for ``agent_id``'s answer in its live channels (see the module docstring)."""
        return self._totals.get(agent_id, 0)

    def capped(self, agent_id: str) -> bool:
        """Whether an inbox cap applies to ``agent_id``."""
        return self._cap_of(agent_id) is not None

    def capped_totals(self) -> dict[str, int]:
        """What waits for each capped identity in the channels of this process (those with any)."""
        return {agent_id: n for agent_id, n in self._totals.items() if self._cap_of(agent_id) is not None}

    def totals(self) -> tuple[int, int]:
        """(envelopes pending over all identities, the most pending for one identity)."""
        values = self._totals.values()
        return sum(values), max(values, default=0)

    def check(
        self, sender_id: str, participants: Iterable[str], audience: Sequence[str] | None, event_type: str
    ) -> None:
        """Refuse (InboxFull) an envelope of ``event_type`` from ``sender_id`` that would wait for a
        recipient at its cap (an envelope that is not counted never is refused)."""
        if not counts_in_inbox(event_type):
            return
        cap_of = self._cap_of
        for recipient in participants:
            if recipient == sender_id or (audience is not None and recipient not in audience):
                continue
            cap = cap_of(recipient)
            if cap is None:
                continue
            pending = self._totals.get(recipient, 0) + self.elsewhere.get(recipient, 0)
            if pending >= cap[0]:
                name = self._name_of(recipient)
                raise InboxFull(
                    f"the inbox of {name} is full: {pending} envelopes wait for its answer (limit {cap[0]}, rule "
                    f"{cap[1]!r}); retry once it has answered (it posts a reply into those channels, or they "
                    "end) or post to others.",
                    metadata={"recipient": recipient, "recipient_name": name, "rule": cap[1], "limit": str(cap[0])},
                )

    def staged(self, channel_id: str, participants: Iterable[str], wire: envelope_pb2.Envelope) -> None:
        """Count a staged (or, at start and after a failed write, folded) envelope."""
        audience = wire.audience.agent_ids if wire.HasField("audience") else None
        self._count(channel_id, participants, wire.seq, wire.sender_id, wire.event_type, audience)

    def staged_run(self, channel_id: str, participants: Sequence[str], wires: Sequence[envelope_pb2.Envelope]) -> None:
        """:meth:`staged` for each of ``wires`` in turn (a run of one channel's envelopes, in ascending
        seq order): :meth:`staged_columns` of their fields."""
        audiences = {i: w.audience.agent_ids for i, w in enumerate(wires) if w.HasField("audience")}
        seqs, senders, types = list(map(_SEQ, wires)), list(map(_SENDER, wires)), list(map(_EVENT_TYPE, wires))
        self.staged_columns(channel_id, participants, seqs, senders, types, audiences)

    def staged_columns(
        self,
        channel_id: str,
        participants: Sequence[str],
        seqs: Sequence[int],
        senders: Sequence[str],
        event_types: Sequence[str],
        audiences: Mapping[int, Sequence[str]],
    ) -> None:
        """:meth:`staged` for each envelope of a run of one channel's envelopes, given as columns: their
        seqs (ascending), senders and event types, and ``audiences``: the index of each envelope that
        has an audience → its audience (the others are broadcasts).

        Rebuilding a channel counts its whole WAL: each participant's last answer in the run and
        what follows it are taken in one pass each, a column at a time (in C)."""
        counted_type = {etype: counts_in_inbox(etype) for etype in set(event_types)}  # a run holds few types
        counted = list(map(counted_type.__getitem__, event_types))
        if not any(counted):
            return
        if not all(counted):
            if audiences:  # renumbered among the counted envelopes
                at = list(accumulate(counted))  # at[i] - 1: the index of envelope i among the counted ones
                audiences = {at[i] - 1: audience for i, audience in audiences.items() if counted[i]}
            seqs, senders = list(compress(seqs, counted)), list(compress(senders, counted))
            event_types = list(compress(event_types, counted))
        members = self._channels.get(channel_id)
        if members is None:
            members = self._channels[channel_id] = {}
        totals = self._totals
        answers = list(map(SUBSTANTIVE_EVENT_TYPES.__contains__, event_types))
        # Each participant's last answer in the run (the seqs ascend: the last one wins).
        last_answer = dict(zip(compress(senders, answers), compress(seqs, answers), strict=True))
        for agent_id in participants:
            answer = last_answer.get(agent_id)
            entry = members.get(agent_id) if answer is None else self._answered(members, agent_id, answer)
            start = bisect_right(seqs, 0 if entry is None else entry.answered)  # the first seq above its answer
            if audiences:
                waits = list(map(agent_id.__ne__, senders))  # not its own
                for index, audience in audiences.items():
                    if agent_id not in audience:
                        waits[index] = False  # not addressed to it
                mine = list(compress(seqs[start:], waits[start:]))
            else:
                mine = list(compress(seqs[start:], map(agent_id.__ne__, senders[start:])))
            if mine:
                if entry is None:
                    entry = members[agent_id] = _Pending()
                entry.seqs.extend(mine)
                totals[agent_id] = totals.get(agent_id, 0) + len(mine)

    def _count(
        self,
        channel_id: str,
        participants: Iterable[str],
        seq: int,
        sender: str,
        event_type: str,
        audience: Sequence[str] | None,
    ) -> None:
        substantive = event_type in SUBSTANTIVE_EVENT_TYPES
        if not substantive and event_type.startswith(_RESERVED_PREFIX):
            return  # a protocol envelope: neither counted nor an answer
        members = self._channels.get(channel_id)
        if members is None:
            members = self._channels[channel_id] = {}
        totals = self._totals
        for agent_id in participants:
            if agent_id == sender:
                if substantive:  # its answer: what waited for it here is answered
                    self._answered(members, agent_id, seq)
                continue
            if audience is not None and agent_id not in audience:
                continue
            entry = members.get(agent_id)
            if entry is None:
                entry = members[agent_id] = _Pending()
            if seq > entry.answered:
                entry.seqs.append(seq)
                totals[agent_id] = totals.get(agent_id, 0) + 1

    def _answered(self, members: dict[str, _Pending], agent_id: str, seq: int) -> _Pending:
        """``agent_id`` answered in the channel at ``seq``: what waited for it there no longer counts."""
        entry = members.get(agent_id)
        if entry is None:
            entry = members[agent_id] = _Pending()
        entry.answered = seq
        if entry.seqs:
            self._subtract(agent_id, len(entry.seqs))
            entry.seqs.clear()
        return entry

    def reset(self, channel_id: str) -> None:
        """Uncount the channel entirely (its count is rebuilt from its whole WAL next)."""
        for agent_id, entry in self._channels.pop(channel_id, {}).items():
            if entry.seqs:
                self._subtract(agent_id, len(entry.seqs))

    def release(self, channel_id: str) -> None:
        """The channel ended: none of its envelopes counts any more."""
        self.reset(channel_id)

    def _subtract(self, agent_id: str, n: int) -> None:
        left = self._totals.get(agent_id, 0) - n
        if left > 0:
            self._totals[agent_id] = left
        else:
            self._totals.pop(agent_id, None)
