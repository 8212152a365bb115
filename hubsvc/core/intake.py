"""Intake: the one seam every envelope a client originates passes, with its stateful checks.

:meth:`Intake.screen` runs :meth:`Admission.screen <hubsvc.core.admission.Admission.screen>`
(pure: shape, size, no forged dispatch); :meth:`Intake.check_inbox` is the inbox cap
(:mod:`hubsvc.governance.inbox`), checked for the recipients once the envelope's audience
is known; :meth:`Intake.count` takes a token from the sender's rate bucket
(:mod:`hubsvc.governance.rate`) last, once every check that can refuse the envelope has
passed and with no await before it is staged, so a refused envelope takes no token. Every
path calls them — a post (PostEnvelope, a Connect ``Post``, Say, a task's cancel request,
CallTool actions that post, invite acks) through :mod:`hubsvc.core.posts`, and the seed of
a channel being opened (OpenChannel's message or seed envelope, Delegate's prompt,
InvokeAgent's question) through :mod:`hubsvc.core.live_channels` — so every envelope an
identity originates counts once. :meth:`Intake.count` notes each token it takes in the list of
the commit that is to store the envelope (a :class:`~hubsvc.core.admission.Batch`'s ``charged``);
if that commit fails with nothing stored (a race lost to another replica, a write the store did
not take), :meth:`Intake.uncount` gives the tokens back — once, for every path, from the commit's
one failure callback — so a post admitted again after a lost race still counts once.
"""

from __future__ import annotations

from collections.abc import Iterable

from hubsvc.core.admission import Admission
from hubsvc.governance.inbox import Inboxes
from hubsvc.governance.rate import RateLimiter
from hubsvc.storage import nothing_stored
from netkernel.envelope import Envelope


class Intake:
    """Screening, rate limit and inbox cap of client-originated envelopes."""

    def __init__(self, admission: Admission, rate: RateLimiter, inboxes: Inboxes) -> None:
        self._admission = admission
        self.rate = rate
        self.inboxes = inboxes

    def screen(self, env: Envelope, event_data_json: str | None = None) -> None:
        """Refuse a malformed envelope (changes nothing; its rate token is taken by :meth:`count`)."""
        self._admission.screen(env, event_data_json)

    def count(self, sender_id: str, env: Envelope, charged: list[str]) -> None:
        """Take the sender's rate token for ``env`` (RateLimited when none is left; nothing taken then),
        noting it in ``charged``, the list of the commit that is to store ``env`` (see :meth:`uncount`).

        Called last, once nothing else can refuse ``env`` and with no await before it is staged."""
        if self.rate.take(sender_id, env.channel_id, env.event_type):
            charged.append(sender_id)

    def uncount(self, charged: list[str], error: BaseException | None) -> None:
        """The commit whose envelopes took the tokens in ``charged`` failed with ``error``: if it stored
        nothing of them, give the tokens back (never above a bucket's burst).

        A write stored but unconfirmed keeps its tokens: the client's retry with the same idempotency
        key is answered as the duplicate, which takes none."""
        if charged and nothing_stored(error):
            refund = self.rate.refund
            for sender_id in charged:
                refund(sender_id)

    def check_inbox(self, sender_id: str, participants: Iterable[str], env: Envelope) -> None:
        """Refuse (InboxFull) an envelope that would wait for a recipient whose inbox is at its cap.

        Protocol envelopes (invite answers among them) are exempt: they are not counted, and
        refusing them would keep a channel from opening or ending."""
        self.inboxes.check(sender_id, participants, env.audience, env.event_type)
