"""Assembly: shaping what the model sees before each call (the chain's types and runner; the public
module is :mod:`agentsdk.assembly`, which re-exports them beside :class:`~agentsdk.policies.AssemblerMiddleware`).

An :class:`AssemblyPolicy` transforms ``(prompts, events)`` — the system prompt parts
and the history — and hands the result to the next policy. The agent runs its chain
(``Agent(assembly=[...])``) before *every* model call of a turn, on a copy of the
stream: policies change what the model sees, never the stream itself. A policy may
put a new :class:`~agentsdk.events.HaltEvent` in the events to stop the turn.

The built-in policies live in ``agentsdk.policies``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from agentsdk.events import BaseEvent
from agentsdk.stream import Stream

if TYPE_CHECKING:
    from agentsdk.agent import Agent

__all__ = ["AssemblyContext", "AssemblyPolicy", "run_assembly"]


@dataclass(frozen=True, slots=True)
class AssemblyContext:
    """What a policy may consult besides the prompts and events."""

    agent: Agent
    """The agent whose turn this is."""
    stream: Stream
    """The conversation stream (read it; do not modify it from a policy)."""
    dependencies: Mapping[Any, Any]
    """The turn's dependencies (agent's merged with ``ask(dependencies=...)``); ``.get(KnowledgeStore)``."""
    model_call: int = 0
    """Index of the upcoming model call within this turn (0 for the first)."""


@runtime_checkable
class AssemblyPolicy(Protocol):
    """Transforms ``(prompts, events)`` before a model call."""

    async def apply(
        self, prompts: list[str], events: list[BaseEvent], context: AssemblyContext
    ) -> tuple[list[str], list[BaseEvent]]:
        """Return the (possibly new) prompts and events for the next policy / the model."""
        ...


async def run_assembly(
    policies: Sequence[AssemblyPolicy], prompts: list[str], events: list[BaseEvent], context: AssemblyContext
) -> tuple[list[str], list[BaseEvent]]:
    """Run ``policies`` in order, each on the previous one's output (copies of the inputs)."""
    prompts, events = list(prompts), list(events)
    for policy in policies:
        prompts, events = await policy.apply(prompts, events, context)
        prompts, events = list(prompts), list(events)
    return prompts, events
