"""This replica's liveness in a shared store, and the end of calls whose replica died.

Replicas sharing a store (Redis, docs/scale-out.md) each keep a liveness key that lapses
``replica_ttl`` seconds after its last refresh; :class:`ReplicaLiveness` refreshes it every
``replica_refresh`` seconds and, on the same cadence, fails the running A2A executions whose
owner replica's key has lapsed (:meth:`~hubsvc.core.executions.ExecutionLog.fail_orphans`):
their callers waited on an RPC of a process that is gone. The two run as separate loops, so a
long sweep never delays a refresh.
"""

from __future__ import annotations

import asyncio
import logging

from hubsvc.core.executions import ExecutionLog
from hubsvc.core.options import HubOptions
from hubsvc.storage.base import Liveness

log = logging.getLogger("agentnet.hub.replicas")


class ReplicaLiveness:
    """Keeps this replica alive in the store and fails the calls of replicas that are not."""

    def __init__(self, liveness: Liveness, executions: ExecutionLog, options: HubOptions) -> None:
        self._liveness = liveness
        self._executions = executions
        self._ttl = options.replica_ttl
        self._every = options.replica_refresh

    async def beat(self) -> None:
        """Refresh this replica's liveness key now."""
        await self._liveness.beat(self._ttl)

    async def beat_loop(self) -> None:
        """Refresh the key every ``replica_refresh`` seconds until cancelled (a failed refresh is
        logged and tried again next time: the key outlives a few missed refreshes)."""
        while True:
            await asyncio.sleep(self._every)
            try:
                await self.beat()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("could not refresh this replica's liveness key (%r)", exc)

    async def sweep_loop(self) -> None:
        """Fail the calls of dead replicas every ``replica_refresh`` seconds until cancelled."""
        while True:
            await asyncio.sleep(self._every)
            try:
                failed = await self._executions.fail_orphans()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("could not sweep the A2A calls of stopped replicas (%r)", exc)
                continue
            if failed:
                log.info("failed %d A2A calls whose hub replica stopped: %s", len(failed), ", ".join(failed))

    async def leave(self) -> None:
        """Delete this replica's key (a clean stop): the others fail what it left running at once."""
        try:
            await self._liveness.leave()
        except Exception as exc:
            log.warning("could not remove this replica's liveness key (%r); it lapses by itself", exc)
