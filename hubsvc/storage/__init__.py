"""Hub storage: one interface (:class:`HubStore`), one implementation per backend."""

from hubsvc.storage.base import AgentRow, ChannelRow, HubStore, TaskRow, WalRow, Writes
from hubsvc.storage.sqlite import SqliteHubStore

__all__ = ["AgentRow", "ChannelRow", "HubStore", "SqliteHubStore", "TaskRow", "WalRow", "Writes"]
