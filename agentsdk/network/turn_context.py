"""What the running turn belongs to: its task and the envelope that caused it.

Both are context variables, so each asyncio task (each turn, each ``async with
agent.task(...)`` block) sees its own values, and concurrent turns of one agent never
see each other's task. ``agent.task(...)`` sets the task; the default handler sets the
causing envelope for the turn that answers it, and the delivery stream what the hub's
delivery said about posting now (``Delivery.can_send``), so the default handler skips its
CanSend call. The network tools read both: the task
for ``tasks(action="progress"|"complete")``, the cause so a ``delegate`` made while
answering a delegated question counts one more hop (``CallToolRequest.causation_id``).
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import Any

__all__ = [
    "cause_scope",
    "current_cause",
    "current_task",
    "delivered_can_send",
    "delivery_scope",
    "enter_delivery",
    "exit_delivery",
    "task_scope",
]

_task: contextvars.ContextVar[Any] = contextvars.ContextVar("agentsdk_current_task", default=None)
_cause: contextvars.ContextVar[str] = contextvars.ContextVar("agentsdk_current_cause", default="")
_delivered: contextvars.ContextVar[tuple[str, bool | None]] = contextvars.ContextVar(
    "agentsdk_delivered_can_send", default=("", None)
)


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


def delivered_can_send(envelope_id: str) -> bool | None:
    """The hub's ``Delivery.can_send`` for ``envelope_id`` while its handler runs.

    None when the delivery did not carry it, or outside that envelope's handler."""
    delivered, can_send = _delivered.get()
    return can_send if delivered == envelope_id else None


@contextlib.contextmanager
def delivery_scope(envelope_id: str, can_send: bool | None) -> Iterator[None]:
    """While ``envelope_id``'s handler runs, remember what its delivery said about posting now."""
    token = enter_delivery(envelope_id, can_send)
    try:
        yield
    finally:
        exit_delivery(token)


def enter_delivery(envelope_id: str, can_send: bool | None) -> contextvars.Token[tuple[str, bool | None]]:
    """:func:`delivery_scope` without the context manager (the delivery stream's per-envelope path):
    remember what ``envelope_id``'s delivery said; pass the token to :func:`exit_delivery` after."""
    return _delivered.set((envelope_id, can_send))


def exit_delivery(token: contextvars.Token[tuple[str, bool | None]]) -> None:
    """End what :func:`enter_delivery` began."""
    _delivered.reset(token)
