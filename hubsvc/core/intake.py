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
identity originates counts once.
"""

from __future__ import annotations

from collections.abc import Iterable

from hubsvc.core.admission import Admission
from hubsvc.governance.inbox import Inboxes
from hubsvc.governance.rate import RateLimiter
from netkernel.envelope import LIFECYCLE_EVENT_TYPES, Envelope


class Intake:
    """Screening, rate limit and inbox cap of client-originated envelopes."""

    def __init__(self, admission: Admission, rate: RateLimiter, inboxes: Inboxes) -> None:
        self._admission = admission
        self.rate = rate
        self.inboxes = inboxes

    def screen(self, env: Envelope, event_data_json: str | None = None) -> None:
        """Refuse a malformed envelope (changes nothing; its rate token is taken by :meth:`count`)."""
        self._admission.screen(env, event_data_json)

    def count(self, sender_id: str, env: Envelope) -> None:
        """Take the sender's rate token for ``env`` (RateLimited when none is left; nothing taken then).

        Called last, once nothing else can refuse ``env`` and with no await before it is staged."""
        self.rate.take(sender_id, env.channel_id, env.event_type)

    def check_inbox(self, sender_id: str, participants: Iterable[str], env: Envelope) -> None:
        """Refuse (InboxFull) an envelope that would reach a recipient whose inbox is at its cap.

        Invite answers are exempt: they are the channel's protocol, and refusing them would
        keep a channel from opening or ending."""
        if env.event_type not in LIFECYCLE_EVENT_TYPES:
            self.inboxes.check(sender_id, participants, env.audience)
