"""Paged lists: the opaque page tokens of every list RPC (OperatorService's and HubService's) and
one page of a list kept in memory.

A token is the kind of list and the position of the last item sent (a sort key, or a creation
order), base64 of JSON: opaque to clients, checked on the way back in."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, TypeVar

from agentnet.v1 import task_pb2

from hubsvc.core.util import from_timestamp
from netkernel.errors import InvalidArgument

T = TypeVar("T")
R = TypeVar("R")
M = TypeVar("M")

SortKey = tuple[str | float, ...]
"""Where an item sits in its list (compared as a tuple; JSON round-trips it exactly)."""


def encode_token(kind: str, value: Any) -> str:
    """The page token of a ``kind`` list that continues after ``value``."""
    raw = json.dumps([kind, value], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_token(kind: str, token: str) -> Any:
    """The position a page token carries (None for ""); InvalidArgument for a token not issued here."""
    if not token:
        return None
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        found_kind, value = json.loads(raw)
    except (binascii.Error, ValueError, TypeError):
        found_kind, value = None, None
    if found_kind != kind:
        raise bad_token(kind)
    return value


def bad_token(kind: str) -> InvalidArgument:
    """The refusal of a page token that is not one of this list's."""
    return InvalidArgument(
        f"page_token is not a {kind} page token of this hub: pass the next_page_token of the previous "
        'answer unchanged, or "" for the first page.',
        metadata={"field": "page_token"},
    )


def keyed_page(
    kind: str,
    items: Iterable[T],
    key: Callable[[T], SortKey],
    size: int,
    token: str,
    *,
    descending: bool = False,
) -> tuple[list[T], str]:
    """One page of ``items`` in ``key`` order (``descending``: largest first): at most ``size`` of
    those after the position ``token`` carries, and the token of the next page ("" = none)."""
    mark = decode_token(kind, token)
    ordered = sorted(items, key=key, reverse=descending)
    if mark is not None:
        if not isinstance(mark, list):
            raise bad_token(kind)
        after = tuple(mark)
        try:
            ordered = [i for i in ordered if (key(i) < after if descending else key(i) > after)]
        except TypeError:
            raise bad_token(kind) from None
    page = ordered[:size]
    return page, encode_token(kind, list(key(page[-1]))) if len(ordered) > size else ""


async def ordered_page(
    kind: str,
    fetch: Callable[[int, int], Awaitable[Sequence[tuple[int, R]]]],
    pick: Callable[[R], M | None],
    size: int,
    token: str,
) -> tuple[list[M], str]:
    """One page of a list the store keeps newest first by a positive creation order:
    ``fetch(before, limit)`` reads up to ``limit`` (order, row) pairs created before ``before``
    (0 = from the newest); ``pick(row)`` is the row's item, or None to leave it out. Returns at
    most ``size`` items after the position ``token`` carries and the token of the next page."""
    before = decode_token(kind, token)
    if before is not None and (type(before) is not int or before <= 0):
        raise bad_token(kind)
    cursor = before or 0
    out: list[M] = []
    last = 0
    while True:
        rows = await fetch(cursor, size)
        for order, row in rows:
            cursor = order
            item = pick(row)
            if item is None:
                continue
            if len(out) == size:  # one more exists: this page ends before it
                return out, encode_token(kind, last)
            out.append(item)
            last = order
        if len(rows) < size:
            return out, ""


def task_order(task: task_pb2.TaskMetadata) -> SortKey:
    """Where a task sits in a task list (newest first: by creation time, then id)."""
    return (from_timestamp(task.created_at), task.task_id)
