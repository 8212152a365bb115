"""Typed routing values a tool returns to decide a workflow turn: :class:`Handoff` and :class:`Finish`.

A workflow routes on the tools its agent calls (``tool_called`` transitions). A tool that
picks the next speaker at run time returns ``Handoff(target, reason)``; a tool that ends
the workflow returns ``Finish(summary, reason)``. The agent loop keeps the value on the
call's :class:`~agentsdk.events.ToolResultEvent` (``routing``), and the workflow adapter's
round-end packet carries it (``routing.kind`` ``"handoff"`` / ``"finish"``), so the hub
applies it instead of the transitions. The model sees the value rendered as JSON, like any
tool result. See docs/network.md "Workflow routing".
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MAX_CLOSE_REASON", "Finish", "Handoff"]

MAX_CLOSE_REASON = 64
"""Longest close reason a :class:`Finish` may name (characters); the hub refuses longer."""


@dataclass(frozen=True, slots=True)
class Handoff:
    """Routing decided by a tool: ``target`` (a participant's name or agent id) speaks next.

    ``reason`` says why; it travels in the packet's ``routing.reason``."""

    target: str
    reason: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.target, str) or not self.target:
            raise ValueError(f"Handoff needs a target (a participant's name or agent id); got {self.target!r}")
        if not isinstance(self.reason, str):
            raise ValueError(f"Handoff.reason must be a string; got {self.reason!r}")


@dataclass(frozen=True, slots=True)
class Finish:
    """Routing decided by a tool: the workflow ends, closing the channel with close reason ``reason``.

    ``summary`` rides on the packet's ``routing.summary`` for whoever reads the WAL."""

    summary: str = ""
    reason: str = "finished"

    def __post_init__(self) -> None:
        if not isinstance(self.summary, str):
            raise ValueError(f"Finish.summary must be a string; got {self.summary!r}")
        if not isinstance(self.reason, str) or not self.reason.strip() or len(self.reason) > MAX_CLOSE_REASON:
            raise ValueError(
                f"Finish.reason is the channel's close reason: a non-empty string of at most "
                f"{MAX_CLOSE_REASON} characters; got {self.reason!r}"
            )
