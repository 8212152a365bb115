"""Hub storage: one interface (:class:`HubStore`), one implementation per backend."""

from hubsvc.storage.base import (
    TASK_IF_LIVE,
    TASK_LIVE,
    TASK_NEW,
    WRITE_FAILED,
    AgentRow,
    AtLimit,
    CallTokenRow,
    ChannelRow,
    CheckpointRow,
    ExecutionRow,
    HubStore,
    LimitConflict,
    StoreConflict,
    TaskRow,
    WalRow,
    Writes,
    nothing_stored,
)
from hubsvc.storage.sqlite import SqliteHubStore

__all__ = [
    "TASK_IF_LIVE",
    "TASK_LIVE",
    "TASK_NEW",
    "WRITE_FAILED",
    "AgentRow",
    "AtLimit",
    "CallTokenRow",
    "ChannelRow",
    "CheckpointRow",
    "ExecutionRow",
    "HubStore",
    "LimitConflict",
    "SqliteHubStore",
    "StoreConflict",
    "TaskRow",
    "WalRow",
    "Writes",
    "nothing_stored",
]
