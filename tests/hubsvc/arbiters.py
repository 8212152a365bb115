"""Arbiters the governance tests load, in process and with ``python -m hubsvc --arbiter tests.hubsvc.arbiters:...``."""

from __future__ import annotations

import asyncio

from hubsvc.governance.arbiter import ALLOW, Decision, Verdict, refuse


class Desk:
    """Refuses registrations of names starting "bot-", workflow channels, and posts of "secret.*" events."""

    def __init__(self) -> None:
        self.seen: list[Decision] = []

    async def decide(self, decision: Decision) -> Verdict:
        """The verdict, after noting the decision."""
        self.seen.append(decision)
        if decision.action == "register" and decision.actor_name.startswith("bot-"):
            return refuse("bots register through the operator")
        if decision.channel_type == "workflow" and decision.action == "open_channel":
            return refuse("workflows need a ticket")
        if decision.action == "post" and decision.event_type.startswith("secret."):
            return refuse("no secrets in channels")
        return ALLOW


DESK = Desk()
"""An instance, for ``--arbiter tests.hubsvc.arbiters:DESK``."""


class Broken:
    """Raises on every decision (the hub must fail closed)."""

    async def decide(self, decision: Decision) -> Verdict:
        """Always fails."""
        raise RuntimeError("arbiter bug")


class Stuck:
    """Never answers (the hub must refuse once its arbiter timeout passes)."""

    async def decide(self, decision: Decision) -> Verdict:
        """Waits forever."""
        await asyncio.Event().wait()
        return ALLOW
