"""The timers of live channels: a PENDING channel's invite timeout and any channel's TTL."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from hubsvc.core.channel import PENDING, ChannelRuntime
from hubsvc.core.util import Clock, from_timestamp

Expire = Callable[[str, str, bool], Awaitable[None]]
"""Ends a channel when one of its timers fires: (channel id, reason, whether it expired)."""


class ChannelTimers:
    """Arms each channel's timers on the event loop; a timer that fires ends the channel through ``expire``."""

    def __init__(self, clock: Clock, spawn: Callable[[Any, str], asyncio.Task[Any]], expire: Expire) -> None:
        self._clock = clock
        self._spawn = spawn
        self._expire = expire

    def arm(self, ch: ChannelRuntime) -> None:
        """Arm the invite timeout of a PENDING channel and the TTL of any channel."""
        loop = asyncio.get_running_loop()
        now = self._clock()
        if ch.meta.state == PENDING:
            deadline = from_timestamp(ch.meta.created_at) + ch.meta.invite_ack_timeout_seconds
            ch.timers.append(
                loop.call_later(
                    max(0.0, deadline - now),
                    lambda: self._spawn(self._expire(ch.channel_id, "invite_timeout", False), "invite-timeout"),
                )
            )
        self.arm_ttl(ch)

    def arm_ttl(self, ch: ChannelRuntime) -> None:
        """Arm the TTL of a channel that has one (an opened channel gets it when the open commits)."""
        if not ch.meta.HasField("expires_at"):
            return
        delay = max(0.0, from_timestamp(ch.meta.expires_at) - self._clock())
        ch.timers.append(
            asyncio.get_running_loop().call_later(
                delay, lambda: self._spawn(self._expire(ch.channel_id, "ttl", True), "channel-ttl")
            )
        )

    @staticmethod
    def cancel(channels: Iterable[ChannelRuntime]) -> None:
        """Disarm the timers of ``channels`` (the hub is stopping)."""
        for ch in channels:
            ch.cancel_timers()
