"""A2A call tokens: issued for a running execution, verified on any replica.

A token is ``<execution_id>.<secret>``; only the SHA-256 of the secret is kept. Each one is
stored (:class:`~hubsvc.storage.CallTokenRow`) before it is handed out, conditional on its
execution still running, and the store drops an execution's tokens when the execution's
ended row is written — so tokens never outlive their call. Nor do they pile up while it
runs: an execution holds at most ``HubOptions.a2a_max_tokens``; storing a new one removes
expired ones to make room, and a refresh that would leave more unexpired tokens than that
is refused (:mod:`hubsvc.storage.call_token_room`, enforced by the store's commit, so
replicas issuing at once cannot exceed it). The replica that runs the execution also keeps
the hashes it issued in memory (:attr:`~hubsvc.core.executions.Running.tokens`, pruned the
same way) and looks there first for an unexpired token; any other replica, a token another
replica issued, or an expired one (which another issue may have removed) is answered from
the store.
"""

from __future__ import annotations

from hubsvc.core.executions import ExecutionLog, Running
from hubsvc.core.options import HubOptions
from hubsvc.core.util import Clock, hash_secret, new_secret
from hubsvc.storage import AtLimit, CallTokenRow, HubStore, LimitConflict, Writes
from hubsvc.storage.call_token_room import check_room, make_room
from netkernel.errors import LimitExceeded


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
        :class:`ExecutionEnded` when the execution ended meanwhile, ``LimitExceeded`` when it holds
        ``a2a_max_tokens`` unexpired tokens already (nothing stored either way)."""
        secret = new_secret()
        digest = hash_secret(secret)
        now = self._clock()
        expires_at = now + self._options.a2a_token_ttl
        record = running.record
        row = CallTokenRow(
            digest,
            record.execution_id,
            record.target_id,
            expires_at,
            hold_limit=self._options.a2a_max_tokens,
            issued_at=now,
            grace=self._options.a2a_token_grace,
        )
        try:
            check_room(running.tokens, row)  # what this replica issued is stored: an early answer
            await self._store.commit(Writes(call_tokens=[row]))
        except (LimitConflict, AtLimit) as exc:
            raise self._full(record.execution_id, exc.held) from None
        except Exception:
            await self._executions.reload(record.execution_id)  # the store's word: ended elsewhere?
            if await self._executions.find_running(record.execution_id) is None:
                raise ExecutionEnded(record.execution_id) from None
            raise
        for gone in make_room(running.tokens, row):
            del running.tokens[gone]
        running.tokens[digest] = expires_at
        return f"{record.execution_id}.{secret}", expires_at

    def _full(self, execution_id: str, held: int) -> LimitExceeded:
        limit = self._options.a2a_max_tokens
        return LimitExceeded(
            f"execution {execution_id!r} already holds {held} unexpired call tokens, the hub's limit of {limit} "
            "(--a2a-max-tokens); nothing was issued. Use a token you already hold: it stays valid until its "
            "expiry, and a new one can be had once one has expired.",
            metadata={"execution_id": execution_id, "limit": str(limit), "held": str(held)},
        )

    async def lookup(self, token: str) -> tuple[Running, float] | None:
        """The running execution a token was issued for and the token's expiry; None for an unknown
        token or one whose execution has ended."""
        execution_id, _, secret = token.partition(".")
        if not execution_id or not secret:
            return None
        digest = hash_secret(secret)
        mine = self._executions.running.get(execution_id)
        if mine is not None and mine.tokens.get(digest, 0.0) > self._clock():
            return mine, mine.tokens[digest]
        row = await self._store.get_call_token(digest)
        if row is None or row.execution_id != execution_id:
            return None
        running = await self._executions.find_running(execution_id)
        return (running, row.expires_at) if running is not None else None
