"""A2A call trees: the part of a list of executions below one call (for the hub and its clients)."""

from __future__ import annotations

from collections.abc import Iterable

from agentnet.v1 import a2a_pb2


def execution_subtree(executions: Iterable[a2a_pb2.Execution], execution_id: str) -> list[a2a_pb2.Execution]:
    """``execution_id`` and every call below it, from executions in start order (empty when absent)."""
    below = {execution_id}
    subtree = []
    for e in executions:  # start order: a caller starts before what it calls
        if e.execution_id in below or e.parent_execution_id in below:
            below.add(e.execution_id)
            subtree.append(e)
    return subtree
