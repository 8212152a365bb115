"""The SQLite hub store (the default, ``--store sqlite``): :class:`SqliteHubStore`.

One job per module: :mod:`~hubsvc.storage.sqlite.store` (the facade: settings, open / close),
:mod:`~hubsvc.storage.sqlite.schema` (tables, statements, the upgrade of an older database),
:mod:`~hubsvc.storage.sqlite.writes` (group commit in one transaction, inline writes on an idle
loop), :mod:`~hubsvc.storage.sqlite.reads` (the queries), :mod:`~hubsvc.storage.sqlite.connection`
(the connection both share).
"""

from hubsvc.storage.sqlite.store import SqliteHubStore
from hubsvc.storage.sqlite.writes import INLINE_MAX_READY

__all__ = ["INLINE_MAX_READY", "SqliteHubStore"]
