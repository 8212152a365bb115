"""A2A call tokens: issued for a running execution, verified on any replica.

A token is ``<execution_id>.<secret>``; only the SHA-256 of the secret is kept. Each one is
stored (:class:`~hubsvc.storage.CallTokenRow`) before it is handed out, conditional on its
execution still running, and the store drops an execution's tokens when the execution's
ended row is written — so tokens never outlive their call and never pile up. The replica
that runs the execution also keeps the hashes it issued in memory
(:attr:`~hubsvc.core.executions.Running.tokens`) and looks there first; any other replica
(or a token another replica issued) is answered from the store.
"""

from __future__ import annotations

from hubsvc.core.executions import ExecutionLog, Running
from hubsvc.core.options import HubOptions
from hubsvc.core.util import Clock, hash_secret, new_secret
from hubsvc.storage import CallTokenRow, HubStore, Writes


class ExecutionEnded(Exception):
    """The execution a token was asked for ended before the token was stored."""


class CallTokens:
    """Issues and looks up call tokens."""

    def __init__(self, store: HubStore, executions: ExecutionLog, options: HubOptions, clock: Clock) -> None:
        self._store = store
        self._executions = executions
        self._options = options
        self._clock = clock

    async def issue(self, running: Running) -> tuple[str, float]:
        """A new token for ``running`` (to its target) and its expiry, stored before it is returned;
        :class:`ExecutionEnded` when the execution ended meanwhile (nothing stored)."""
        secret = new_secret()
        digest = hash_secret(secret)
        now = self._clock()
        expires_at = now + self._options.a2a_token_ttl
        record = running.record
        try:
            await self._store.commit(
                Writes(call_tokens=[CallTokenRow(digest, record.execution_id, record.target_id, expires_at)])
            )
        except Exception:
            await self._executions.reload(record.execution_id)  # the store's word: ended elsewhere?
            if await self._executions.find_running(record.execution_id) is None:
                raise ExecutionEnded(record.execution_id) from None
            raise
        grace = self._options.a2a_token_grace
        running.tokens = {h: exp for h, exp in running.tokens.items() if exp + grace > now}
        running.tokens[digest] = expires_at
        return f"{record.execution_id}.{secret}", expires_at

    async def lookup(self, token: str) -> tuple[Running, float] | None:
        """The running execution a token was issued for and the token's expiry; None for an unknown
        token or one whose execution has ended."""
        execution_id, _, secret = token.partition(".")
        if not execution_id or not secret:
            return None
        digest = hash_secret(secret)
        mine = self._executions.running.get(execution_id)
        if mine is not None and digest in mine.tokens:
            return mine, mine.tokens[digest]
        row = await self._store.get_call_token(digest)
        if row is None or row.execution_id != execution_id:
            return None
        running = await self._executions.find_running(execution_id)
        return (running, row.expires_at) if running is not None else None
