"""The Redis store's reads of the global records: identities, sessions, cursors, tasks,
checkpoints, observed counts, A2A executions and call tokens, the audit log."""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from hubsvc.storage.base import AgentRow, AuditRow, CallTokenRow, CheckpointRow, ExecutionRow, ObservedCounts, TaskRow
from hubsvc.storage.redis_connect import RedisClient
from hubsvc.storage.redis_store.codec import agent_row, as_bytes, audit_row, execution_row, text, unpack
from hubsvc.storage.redis_store.failures import read
from hubsvc.storage.redis_store.feed import HIDDEN
from hubsvc.storage.redis_store.keys import KeyLayout
from hubsvc.storage.redis_store.reads import PAGE


class RecordReads:
    """The global-record reads of :class:`~hubsvc.storage.redis_store.store.RedisHubStore` (a mixin:
    the store sets the client and the key layout)."""

    _client: RedisClient
    _keys: KeyLayout

    @read
    async def session_of(self, agent_id: str) -> str | None:
        """The session id holding the identity's Connect stream on some replica (None: none)."""
        value = await self._client.hget(self._keys.g + "sessions", agent_id)
        return None if value is None else text(value)

    @read
    async def hidden_agents(self) -> frozenset[str]:
        """The agents a ``hide`` firing hides in a live channel, from ``P{g}:hidden`` (written only
        when the replicas divide the channels: otherwise every replica folds every channel)."""
        rows = await self._client.hvals(self._keys.g + HIDDEN)
        return frozenset(agent for packed in rows for agent in text(packed).split("\0") if agent)

    @read
    async def load_agents(self) -> list[AgentRow]:
        """Every identity."""
        rows = await self._client.hgetall(self._keys.g + "agents")
        return [agent_row(text(agent_id), as_bytes(packed)) for agent_id, packed in rows.items()]

    @read
    async def get_agent(self, agent_id: str) -> AgentRow | None:
        """One identity (removed ones flagged)."""
        packed = await self._client.hget(self._keys.g + "agents", agent_id)
        return None if packed is None else agent_row(agent_id, as_bytes(packed))

    @read
    async def get_agent_named(self, name: str) -> AgentRow | None:
        """The live identity of a name (the live-name index)."""
        agent_id = await self._client.hget(self._keys.g + "agent_names", name)
        if agent_id is None:
            return None
        packed = await self._client.hget(self._keys.g + "agents", agent_id)
        return None if packed is None else agent_row(text(agent_id), as_bytes(packed))

    @read
    async def load_cursors(self, agent_id: str) -> dict[str, int]:
        """Ack cursors of one agent."""
        rows = await self._client.hgetall(self._keys.g + "cursors:" + agent_id)
        return {text(k): int(v) for k, v in rows.items()}

    @read
    async def load_tasks(self, *, live_only: bool) -> list[TaskRow]:
        """Tasks."""
        if live_only:
            ids = sorted(text(m) for m in await self._client.smembers(self._keys.g + "tasks:live"))
        else:
            ids = sorted(text(m) for m in await self._client.hkeys(self._keys.g + "tasks"))
        return [row for row in await self._tasks(ids) if row is not None]

    async def _tasks(self, ids: Sequence[str]) -> list[TaskRow | None]:
        if not ids:
            return []
        async with self._client.pipeline(transaction=False) as pipe:
            pipe.hmget(self._keys.g + "tasks", list(ids))
            pipe.hmget(self._keys.g + "task_meta", list(ids))
            pipe.smismember(self._keys.g + "tasks:live", list(ids))
            records, metas, live = await pipe.execute()
        out: list[TaskRow | None] = []
        for task_id, record, meta, is_live in zip(ids, records, metas, live, strict=True):
            if record is None or meta is None:
                out.append(None)
                continue
            owner, channel = unpack(meta)
            out.append(TaskRow(task_id, owner.decode(), channel.decode(), not is_live, bytes(record)))
        return out

    @read
    async def get_task(self, task_id: str) -> TaskRow | None:
        """One task."""
        return (await self._tasks([task_id]))[0]

    @read
    async def get_checkpoint(self, task_id: str) -> CheckpointRow | None:
        """The task's last checkpoint."""
        packed = await self._client.hget(self._keys.g + "checkpoints", task_id)
        if packed is None:
            return None
        owner, saved_at, state = (v.decode() for v in unpack(as_bytes(packed)))
        return CheckpointRow(task_id, owner, state, float(saved_at))

    @read
    async def load_observed(self, agent_id: str) -> dict[str, ObservedCounts]:
        """The identity's counts per capability."""
        fields = await self._client.hgetall(self._keys.g + "observed:" + agent_id)
        by_capability: dict[str, dict[str, str]] = {}
        for key, value in fields.items():
            capability, _, name = text(key).rpartition("\0")
            by_capability.setdefault(capability, {})[name] = text(value)
        return {
            capability: ObservedCounts(
                completed=int(v.get("completed", "0")),
                failed=int(v.get("failed", "0")),
                expired=int(v.get("expired", "0")),
                cancelled=int(v.get("cancelled", "0")),
                last_latency_ms=int(v.get("latency", "0")),
                last_updated=float(v.get("at", "0")),
            )
            for capability, v in by_capability.items()
        }

    @read
    async def load_running_executions(self) -> list[ExecutionRow]:
        """Executions still marked running."""
        ids = sorted(text(m) for m in await self._client.smembers(self._keys.g + "exec:running"))
        if not ids:
            return []
        async with self._client.pipeline(transaction=False) as pipe:
            pipe.hmget(self._keys.g + "exec", ids)
            pipe.hmget(self._keys.g + "exec:meta", ids)
            records, metas = await pipe.execute()
        out = []
        for execution_id, record, meta in zip(ids, records, metas, strict=True):
            if record is None or meta is None:
                continue
            out.append(execution_row(execution_id, True, bytes(record), as_bytes(meta)))
        return out

    @read
    async def get_execution(self, execution_id: str) -> ExecutionRow | None:
        """One execution."""
        async with self._client.pipeline(transaction=False) as pipe:
            pipe.hget(self._keys.g + "exec", execution_id)
            pipe.hget(self._keys.g + "exec:meta", execution_id)
            pipe.sismember(self._keys.g + "exec:running", execution_id)
            record, meta, running = await pipe.execute()
        if record is None or meta is None:
            return None
        return execution_row(execution_id, bool(running), bytes(record), as_bytes(meta))

    @read
    async def get_call_token(self, token_hash: str) -> CallTokenRow | None:
        """A call token of an execution that has not ended."""
        packed = await self._client.hget(self._keys.g + "call_tokens", token_hash)
        if packed is None:
            return None
        execution_id, agent_id, expires_at = (v.decode() for v in unpack(as_bytes(packed)))
        return CallTokenRow(token_hash, execution_id, agent_id, float(expires_at))

    @read
    async def list_executions(self, *, root_session_id: str, member_id: str, limit: int) -> list[bytes]:
        """Executions of one root session, or of every root session ``member_id`` took part in (all when "")."""
        count = limit if limit >= 0 else -1
        if root_session_id:
            roots = [self._keys.g + "exec:root:" + root_session_id]
        elif not member_id:
            roots = [self._keys.g + "exec:all"]
        else:
            members = await self._client.smembers(self._keys.g + "exec:roots_of:" + member_id)
            roots = [self._keys.g + "exec:root:" + text(r) for r in members]
        ordered: list[tuple[float, str]] = []
        for key in roots:
            page = await self._client.zrangebyscore(key, "-inf", "+inf", start=0, num=count, withscores=True)
            ordered.extend((float(score), text(member)) for member, score in cast("list[tuple[bytes, float]]", page))
        ordered.sort()  # (started_at, insertion number): SQLite's (started_at, rowid)
        if count >= 0:
            ordered = ordered[:count]
        ids = [member.partition(":")[2] for _, member in ordered]
        if not ids:
            return []
        records = await self._client.hmget(self._keys.g + "exec", ids)
        return [as_bytes(r) for r in records if r is not None]

    @read
    async def root_session_members(self, root_session_id: str) -> set[str]:
        """Callers and targets of a root session's executions."""
        members = await self._client.zrange(self._keys.g + "exec:root:" + root_session_id, 0, -1)
        ids = [text(m).partition(":")[2] for m in cast("list[bytes]", members)]
        if not ids:
            return set()
        metas = await self._client.hmget(self._keys.g + "exec:meta", ids)
        out: set[str] = set()
        for meta in metas:
            if meta is not None:
                _, caller, target, *_ = unpack(as_bytes(meta))
                out.update((caller.decode(), target.decode()))
        return out

    @read
    async def list_audit(self, *, kind: str, subject_id: str, after_id: int, limit: int) -> list[AuditRow]:
        """Audit records in id order (paging the most selective index, filtering by the other field)."""
        if subject_id:
            key = self._keys.g + "audit:subject:" + subject_id
        elif kind:
            key = self._keys.g + "audit:kind:" + kind
        else:
            key = self._keys.g + "audit:all"
        out: list[AuditRow] = []
        low = f"({after_id}"
        while limit < 0 or len(out) < limit:
            page = cast("list[bytes]", await self._client.zrangebyscore(key, low, "+inf", start=0, num=PAGE))
            ids = [int(m) for m in page]
            if not ids:
                break
            records = await self._client.hmget(self._keys.g + "audit", [str(i) for i in ids])
            for audit_id, packed in zip(ids, records, strict=True):
                if packed is None:
                    continue
                row = audit_row(audit_id, as_bytes(packed))
                if (not kind or row.kind == kind) and (not subject_id or row.subject_id == subject_id):
                    out.append(row)
            if len(ids) < PAGE:
                break
            low = f"({ids[-1]}"
        return out if limit < 0 else out[:limit]
