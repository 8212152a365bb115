"""The Redis hub store (``--store redis://…`` or ``redis+cluster://…``): :class:`RedisHubStore`.

One job per module:

* :mod:`~hubsvc.storage.redis_store.store` — :class:`RedisHubStore`, the facade: settings,
  open / close, and which commit path a group takes;
* :mod:`~hubsvc.storage.redis_store.keys` — the key layout (what every key holds, single-slot
  and spread);
* :mod:`~hubsvc.storage.redis_store.scripts` — the Lua scripts, shipped as ``lua/*.lua`` package
  data;
* :mod:`~hubsvc.storage.redis_store.plan` — the commit plan: bundles turned into the commit
  script's check and write ops;
* :mod:`~hubsvc.storage.redis_store.commit` — running the commit script (deadline in Redis's
  clock, ``WAIT`` for replicas, pipelines) and the single-slot commit;
* :mod:`~hubsvc.storage.redis_store.spread` — the spread layout's two-part commit, its outbox
  and the completion of global parts a dead writer left behind;
* :mod:`~hubsvc.storage.redis_store.reads` / :mod:`~hubsvc.storage.redis_store.records` — reads
  of channels and WALs / of the global records;
* :mod:`~hubsvc.storage.redis_store.upkeep` — what opening checks and repairs;
* :mod:`~hubsvc.storage.redis_store.codec` / :mod:`~hubsvc.storage.redis_store.failures` — packed
  values; the errors a Redis that does not answer or a refused commit raises.

* :mod:`~hubsvc.storage.redis_store.feed` / :mod:`~hubsvc.storage.redis_store.liveness` — the change
  feed and channel notices the replicas follow; each replica's liveness key.

The client a URL names (:mod:`hubsvc.storage.redis_connect`) is beside this package, with the
settings a ``redis://`` URL carries (:mod:`hubsvc.storage.redis_settings`). A test makes the store fail at a
named point through :class:`~hubsvc.storage.faults.StoreFaults` (the ``faults`` argument).
"""

from hubsvc.storage.redis_settings import DEFAULT_TIMEOUT, DEFAULT_WAIT_TIMEOUT
from hubsvc.storage.redis_store.failures import StoreLate, StoreUnreachable
from hubsvc.storage.redis_store.keys import DEFAULT_PREFIX, HOLDINGS_MARK, REPLIES_MARK, RESERVED
from hubsvc.storage.redis_store.spread import OUTBOX_SWEEP
from hubsvc.storage.redis_store.store import RedisHubStore

__all__ = [
    "DEFAULT_PREFIX",
    "DEFAULT_TIMEOUT",
    "DEFAULT_WAIT_TIMEOUT",
    "HOLDINGS_MARK",
    "OUTBOX_SWEEP",
    "REPLIES_MARK",
    "RESERVED",
    "RedisHubStore",
    "StoreLate",
    "StoreUnreachable",
]
