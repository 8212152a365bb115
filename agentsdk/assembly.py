"""Assembly: shaping what the model sees before each call.

An :class:`AssemblyPolicy` transforms ``(prompts, events)`` — the system prompt parts
and the history — and hands the result to the next policy. The agent runs its chain
(``Agent(assembly=[...])``) before *every* model call of a turn, on a copy of the
stream: policies change what the model sees, never the stream itself. A policy may
put a new :class:`~agentsdk.events.HaltEvent` in the events to stop the turn.

The built-in policies live in ``agentsdk.policies``; :class:`AssemblerMiddleware` (defined there, beside
the policies whose order it checks) is importable here too. The chain's types are defined in a module of
their own, which both this one and ``agentsdk.policies`` import, so neither imports the other in a circle.
"""

from __future__ import annotations

from agentsdk._assembly import AssemblyContext, AssemblyPolicy, run_assembly
from agentsdk.policies import AssemblerMiddleware

__all__ = ["AssemblerMiddleware", "AssemblyContext", "AssemblyPolicy", "run_assembly"]
