"""Hub storage: one interface (:class:`HubStore`), one implementation per backend."""

from hubsvc.storage.base import AgentRow, ChannelRow, ExecutionRow, HubStore, TaskRow, WalRow, Writes
from hubsvc.storage.sqlite import SqliteHubStore

__all__ = ["AgentRow", "ChannelRow", "ExecutionRow", "HubStore", "SqliteHubStore", "TaskRow", "WalRow", "Writes"]
