"""What the running turn belongs to: its task and the envelope that caused it.

Both are context variables, so each asyncio task (each turn, each ``async with
agent.task(...)`` block) sees its own values, and concurrent turns of one agent never
see each other's task. ``agent.task(...)`` sets the task; the default handler sets the
causing envelope for the turn that answers it. The network tools read both: the task
for ``tasks(action="progress"|"complete")``, the cause so a ``delegate`` made while
answering a delegated question counts one more hop (``CallToolRequest.causation_id``).
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import Any

__all__ = ["cause_scope", "current_cause", "current_task", "task_scope"]

_task: contextvars.ContextVar[Any] = contextvars.ContextVar("agentsdk_current_task", default=None)
_cause: contextvars.ContextVar[str] = contextvars.ContextVar("agentsdk_current_cause", default="")


def current_task() -> Any:
    """The task of the ``async with agent.task(...)`` block this code runs in, or None."""
    return _task.get()


@contextlib.contextmanager
def task_scope(task: Any) -> Iterator[Any]:
    """Make ``task`` current for the block (restored on exit)."""
    token = _task.set(task)
    try:
        yield task
    finally:
        _task.reset(token)


def current_cause() -> str:
    """The id of the envelope the running turn answers ("" outside a handler turn)."""
    return _cause.get()


@contextlib.contextmanager
def cause_scope(envelope_id: str) -> Iterator[str]:
    """Make ``envelope_id`` the current turn's cause for the block (restored on exit)."""
    token = _cause.set(envelope_id)
    try:
        yield envelope_id
    finally:
        _cause.reset(token)
