"""Identities: registration, credentials, lookup, skills and resumes.

The registry is held in memory (it is small) and written through to the store.
Credentials are ``<agent_id>.<secret>``; only a SHA-256 of the secret is kept.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from agentnet.v1 import a2a_pb2, identity_pb2

from hubsvc.core.util import Clock, audit_row, from_timestamp, hash_secret, new_id, new_secret, to_timestamp
from hubsvc.storage import AgentRow, HubStore, Writes
from netkernel.errors import AlreadyExists, InvalidArgument, NotFound, Unauthenticated
from netkernel.identity import Passport, Resume
from netkernel.skills import render_fallback_skill
from netkernel.wire import PASSPORT_KIND

_NAME = re.compile(r"[A-Za-z0-9._-]{1,64}")
"""A passport name (matched with fullmatch: "$" would let a trailing newline through)."""


@dataclass
class AgentEntry:
    """One identity in memory."""

    record: identity_pb2.AgentRecord
    cred_hash: str

    @property
    def agent_id(self) -> str:
        """Its id."""
        return self.record.agent_id

    @property
    def name(self) -> str:
        """Its unique name."""
        return self.record.passport.name


class Registry:
    """All identities of the hub."""

    def __init__(self, store: HubStore, clock: Clock, *, on_change: Callable[[str], None] | None = None) -> None:
        self._store = store
        self._clock = clock
        self._on_change = on_change or (lambda agent_id: None)
        """Told the id of an identity whose record changed in place or that left (governance forgets it)."""
        self._by_id: dict[str, AgentEntry] = {}
        self._by_name: dict[str, str] = {}
        self._reserved: set[str] = set()
        """Names whose registration is being written."""
        self._keyed_writes: dict[str, asyncio.Future[None]] = {}
        """Ids of registrations with an idempotency key being written (a retry waits for them)."""
        self._writing = asyncio.Lock()
        """Serialises updates of existing identities (write, then apply in memory)."""

    async def load(self) -> None:
        """Read every live identity from the store."""
        for row in await self._store.load_agents():
            if row.removed:
                continue
            entry = AgentEntry(identity_pb2.AgentRecord.FromString(row.record), row.cred_hash)
            self._by_id[row.agent_id] = entry
            self._by_name[row.name] = row.agent_id

    async def reload(self, agent_id: str) -> bool:
        """Make the stored row of ``agent_id`` current in memory (another replica registered, changed
        or removed it): insert, update or drop the entry and its name; returns whether the identity
        is gone. What only this replica knows stays: presence (``online``) and the latest
        ``last_seen_at``. Governance caches forget the identity (``on_change``)."""
        row = await self._store.get_agent(agent_id)
        old = self._by_id.get(agent_id)
        if old is not None and self._by_name.get(old.name) == agent_id:
            del self._by_name[old.name]
        if row is None or row.removed:
            self._by_id.pop(agent_id, None)
            self._on_change(agent_id)
            return True
        record = identity_pb2.AgentRecord.FromString(row.record)
        if old is not None:
            record.online = old.record.online
            if from_timestamp(old.record.last_seen_at) > from_timestamp(record.last_seen_at):
                record.last_seen_at.CopyFrom(old.record.last_seen_at)
            old.record.CopyFrom(record)  # in place: holders of the entry see the change
            old.cred_hash = row.cred_hash
        else:
            self._by_id[agent_id] = AgentEntry(record, row.cred_hash)
        self._by_name[row.name] = agent_id
        self._on_change(agent_id)
        return False

    def __contains__(self, agent_id: str) -> bool:
        return agent_id in self._by_id

    def get(self, agent_id: str) -> AgentEntry:
        """The identity with this id (NotFound otherwise)."""
        entry = self._by_id.get(agent_id)
        if entry is None:
            raise NotFound(f"no agent with id {agent_id!r} is registered; list agents with ListAgents.")
        return entry

    def record_of(self, agent_id: str) -> identity_pb2.AgentRecord | None:
        """The record of a registered identity (None for an unknown id, e.g. the hub's own sender)."""
        entry = self._by_id.get(agent_id)
        return entry.record if entry is not None else None

    def resolve(self, ref: str) -> AgentEntry:
        """The identity named by an agent id or a passport name."""
        if ref in self._by_id:
            return self._by_id[ref]
        agent_id = self._by_name.get(ref)
        if agent_id is None:
            raise NotFound(
                f"no agent named or with id {ref!r}; check the name with peers(action='find') / ListAgents.",
                metadata={"agent": ref},
            )
        return self._by_id[agent_id]

    async def find(self, ref: str) -> AgentEntry:
        """:meth:`resolve`, and on a store shared by replicas, an identity this replica has not
        learnt of yet (registered through another replica a moment ago: the change feed brings it
        shortly) is read from the store first; NotFound only when the store has none either."""
        try:
            return self.resolve(ref)
        except NotFound:
            if self._store.feed is None:
                raise
        row = await self._store.get_agent(ref) or await self._store.get_agent_named(ref)
        if row is not None and not row.removed:
            await self.reload(row.agent_id)
        return self.resolve(ref)

    def name_for(self, agent_id: str) -> str:
        """Passport name of an id (the id itself when unknown, e.g. "hub")."""
        entry = self._by_id.get(agent_id)
        return entry.name if entry else agent_id

    def entries(self) -> Iterable[AgentEntry]:
        """Every live identity."""
        return self._by_id.values()

    async def learn_owner(self, credential: str) -> None:
        """With replicas sharing the store: load the identity a credential names when this replica has
        not learnt of it yet (registered through another replica a moment ago; the change feed brings it
        shortly), so the credential is judged against the store, not refused on a stale copy. Nothing
        for an identity known here, a store of one process, or an id the store does not have."""
        agent_id = credential.partition(".")[0]
        if self._store.feed is None or not agent_id or agent_id in self._by_id:
            return
        row = await self._store.get_agent(agent_id)
        if row is not None and not row.removed:
            await self.reload(row.agent_id)

    def authenticate(self, credential: str) -> str:
        """The agent id a bearer credential belongs to (Unauthenticated otherwise)."""
        agent_id, _, secret = credential.partition(".")
        entry = self._by_id.get(agent_id)
        if not secret or entry is None or not hmac.compare_digest(entry.cred_hash, hash_secret(secret)):
            raise Unauthenticated(
                "unknown or revoked credential; send the credential returned by Register as "
                "'authorization: Bearer <credential>' metadata (or in Hello)."
            )
        return agent_id

    async def register(
        self,
        passport: identity_pb2.Passport,
        resume: identity_pb2.Resume,
        skill_md: str | None,
        a2a: a2a_pb2.A2ASettings | None,
        *,
        rule_json: str = "",
        idempotency_key: str = "",
        remote_a2a: a2a_pb2.RemoteA2AAgent | None = None,
    ) -> tuple[identity_pb2.AgentRecord, str]:
        """Create an identity (``rule_json``: its own, already validated, governance rule; ``remote_a2a``:
        where an outside A2A agent lives); returns its record and credential.

        The name is reserved while its write is in flight (a concurrent Register of it gets
        ALREADY_EXISTS); the identity exists in memory only once the write committed. With an
        ``idempotency_key`` the id and the credential are derived from the key (and the
        credential also from the content, :func:`keyed_identity`), so a retry of the same
        request finds the identity it created and gets the same credential back; the key with
        other content is INVALID_ARGUMENT."""
        if idempotency_key:
            content = (passport, resume, skill_md, a2a, rule_json)
            agent_id, secret = keyed_identity(idempotency_key, _fingerprint(*content))
            earlier = await self._keyed_earlier(agent_id, secret)
            if earlier is not None:
                return earlier, f"{agent_id}.{secret}"
        else:
            agent_id, secret = new_id(), new_secret()
        name = passport.name
        if not _NAME.fullmatch(name):
            raise InvalidArgument(
                f"passport name {name!r} is invalid: use 1-64 letters, digits, '.', '_' or '-'.",
                metadata={"field": "passport.name"},
            )
        if name in self._by_name or name in self._reserved:
            raise AlreadyExists(
                f"an agent named {name!r} is already registered; pick another name or unregister it first.",
                metadata={"name": name},
            )
        if passport.kind not in PASSPORT_KIND.by_value:
            passport.kind = identity_pb2.PASSPORT_KIND_AGENT
        now = self._clock()
        record = identity_pb2.AgentRecord(
            agent_id=agent_id, passport=passport, resume=claims_only(resume), rule_json=rule_json
        )
        record.registered_at.CopyFrom(to_timestamp(now))
        record.last_seen_at.CopyFrom(to_timestamp(now))
        if a2a is not None:
            record.a2a.CopyFrom(a2a)
        if remote_a2a is not None:
            record.remote_a2a.CopyFrom(remote_a2a)
        self._set_skill(record, skill_md)
        entry = AgentEntry(record, hash_secret(secret))
        self._reserved.add(name)
        written: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if idempotency_key:
            self._keyed_writes[agent_id] = written
        try:
            await self._store.commit(
                Writes(
                    agents=[self._row(entry.record, entry.cred_hash)],
                    audit=[
                        self._audit(
                            "agent_registered",
                            agent_id,
                            {"name": name, "kind": PASSPORT_KIND.by_value[passport.kind]},
                        )
                    ],
                )
            )
        except Exception:
            await self._name_taken_elsewhere(name, agent_id)
            raise
        finally:
            self._reserved.discard(name)
            self._keyed_writes.pop(agent_id, None)
            written.set_result(None)
        self._by_id[agent_id] = entry
        self._by_name[name] = agent_id
        return record, f"{agent_id}.{secret}"

    async def _keyed_earlier(self, agent_id: str, secret: str) -> identity_pb2.AgentRecord | None:
        """The record of the live identity an earlier Register with the same key created (None: none),
        read from the store when this replica does not know it yet; INVALID_ARGUMENT when that
        Register had other content (its credential, derived from the content, differs)."""
        while agent_id in self._keyed_writes:  # the original is being written: answer as it ends
            await asyncio.shield(self._keyed_writes[agent_id])
        entry = self._by_id.get(agent_id)
        if entry is None:
            row = await self._store.get_agent(agent_id)
            if row is None or row.removed or await self.reload(agent_id):
                return None
            entry = self._by_id[agent_id]
        if not hmac.compare_digest(entry.cred_hash, hash_secret(secret)):
            raise InvalidArgument(
                f"idempotency_key was used by an earlier registration with other content (agent {entry.name!r}); "
                "send a new key for a new registration, or retry with exactly the same request.",
                metadata={"field": "idempotency_key", "agent_id": agent_id},
            )
        return entry.record

    async def _name_taken_elsewhere(self, name: str, agent_id: str) -> None:
        """After a failed registration write of ``agent_id``: ALREADY_EXISTS if another replica
        registered ``name`` first (the store refused the write), learning that identity here. A write
        that was stored after all (on the Redis primary, unconfirmed by its replicas) is learned too,
        and its own error stands: the caller is told to retry with the same idempotency key."""
        try:
            holder = await self._store.get_agent_named(name)
        except Exception:
            return  # the store is unreachable: the write's own error says so
        if holder is not None:
            await self.reload(holder.agent_id)
            if holder.agent_id == agent_id:
                return
            raise AlreadyExists(
                f"an agent named {name!r} is already registered; pick another name or unregister it first.",
                metadata={"name": name},
            ) from None

    async def unregister(self, agent_id: str) -> None:
        """Remove an identity (its name becomes free once the removal committed)."""
        async with self._writing:
            entry = self.get(agent_id)
            await self._store.commit(
                Writes(
                    agents=[AgentRow(agent_id, entry.name, entry.cred_hash, entry.record.SerializeToString(), True)],
                    audit=[self._audit("agent_unregistered", agent_id, {"name": entry.name})],
                )
            )
            self._by_id.pop(agent_id, None)
            self._by_name.pop(entry.name, None)
            self._on_change(agent_id)

    async def set_skill(self, agent_id: str, skill_md: str) -> identity_pb2.AgentRecord:
        """Replace the skill (empty = back to the fallback); audited as skill_set."""

        def change(record: identity_pb2.AgentRecord) -> None:
            self._set_skill(record, skill_md or None)

        return await self._update(agent_id, change, "skill_set", lambda r: {"fallback": r.skill_is_fallback})

    async def set_resume(self, agent_id: str, resume: identity_pb2.Resume) -> identity_pb2.AgentRecord:
        """Replace the resume, stamped with the time of the change (``last_updated``, as AG2 stamps it);
        audited as resume_set (a fallback skill is re-rendered)."""

        def change(record: identity_pb2.AgentRecord) -> None:
            record.resume.CopyFrom(claims_only(resume))
            record.resume.last_updated.CopyFrom(to_timestamp(self._clock()))
            if record.skill_is_fallback:
                self._set_skill(record, None)

        return await self._update(agent_id, change, "resume_set", lambda r: {})

    async def set_a2a(self, agent_id: str, a2a: a2a_pb2.A2ASettings) -> identity_pb2.AgentRecord:
        """Replace the A2A settings."""
        return await self._update(agent_id, lambda r: r.a2a.CopyFrom(a2a), "a2a_set", lambda r: {})

    async def set_remote_a2a(
        self, agent_id: str, remote_a2a: a2a_pb2.RemoteA2AAgent, a2a: a2a_pb2.A2ASettings
    ) -> identity_pb2.AgentRecord:
        """Replace where an outside A2A agent lives and what its card advertises; audited as remote_a2a_set."""

        def change(record: identity_pb2.AgentRecord) -> None:
            record.remote_a2a.CopyFrom(remote_a2a)
            record.a2a.CopyFrom(a2a)

        return await self._update(agent_id, change, "remote_a2a_set", lambda r: {"card_url": r.remote_a2a.card_url})

    async def set_rule(self, agent_id: str, rule_json: str, actor: str) -> identity_pb2.AgentRecord:
        """Replace the identity's own rule (already validated; "" = none); audited as rule_set by ``actor``."""

        def change(record: identity_pb2.AgentRecord) -> None:
            record.rule_json = rule_json

        return await self._update(
            agent_id, change, "rule_set", lambda r: {"rule": json.loads(r.rule_json or "null")}, actor=actor
        )

    async def _update(
        self,
        agent_id: str,
        change: Callable[[identity_pb2.AgentRecord], None],
        kind: str,
        detail: Callable[[identity_pb2.AgentRecord], dict[str, object]],
        *,
        actor: str = "",
    ) -> identity_pb2.AgentRecord:
        """Write ``change`` applied to a copy of the record, then apply it in memory (serialised, so
        memory always equals the last committed row); audited as ``kind`` by ``actor`` (default: the
        identity itself)."""
        async with self._writing:
            entry = self.get(agent_id)
            updated = identity_pb2.AgentRecord()
            updated.CopyFrom(entry.record)
            change(updated)
            await self._store.commit(
                Writes(
                    agents=[self._row(updated, entry.cred_hash)],
                    audit=[audit_row(kind, actor or agent_id, agent_id, detail(updated), self._clock())],
                )
            )
            change(entry.record)
            self._on_change(agent_id)
            return entry.record

    def touch(self, agent_id: str, *, online: bool | None = None) -> None:
        """Record activity (and presence) in memory; persisted with the next write of the entry."""
        entry = self._by_id.get(agent_id)
        if entry is None:
            return
        entry.record.last_seen_at.CopyFrom(to_timestamp(self._clock()))
        if online is not None:
            entry.record.online = online

    @staticmethod
    def _set_skill(record: identity_pb2.AgentRecord, skill_md: str | None) -> None:
        if skill_md:
            record.skill_md = skill_md
            record.skill_is_fallback = False
        else:
            record.skill_md = render_fallback_skill(
                Passport.from_wire(record.passport), Resume.from_wire(record.resume)
            )
            record.skill_is_fallback = True

    @staticmethod
    def _row(source: identity_pb2.AgentRecord, cred_hash: str) -> AgentRow:
        record = identity_pb2.AgentRecord()
        record.CopyFrom(source)
        record.online = False
        return AgentRow(record.agent_id, record.passport.name, cred_hash, record.SerializeToString())

    def _audit(self, kind: str, subject: str, detail: dict[str, object]) -> tuple[str, str, str, str, float]:
        return audit_row(kind, subject, subject, dict(detail), self._clock())


def claims_only(resume: identity_pb2.Resume) -> identity_pb2.Resume:
    """A client's resume without what only the hub stamps (``observed``, ``last_updated``): the hub's
    observations live in the store beside the record and are filled in when the record is read."""
    if not resume.observed and not resume.HasField("last_updated"):
        return resume
    out = identity_pb2.Resume()
    out.CopyFrom(resume)
    out.observed.clear()
    out.ClearField("last_updated")
    return out


MIN_IDEMPOTENCY_KEY_CHARS = 16
"""Shortest Register idempotency key: the credential is derived from it, so it must be hard to guess."""


def keyed_identity(key: str, fingerprint: bytes) -> tuple[str, str]:
    """The agent id and credential secret a Register with idempotency key ``key`` gets.

    The id depends on the key alone (a reuse of the key finds it); the secret on the key and the
    request's content (``fingerprint``), so a reuse with other content does not match the stored
    credential hash. Both are one-way: the id reveals nothing of the key or the secret."""
    if len(key) < MIN_IDEMPOTENCY_KEY_CHARS:
        raise InvalidArgument(
            f"idempotency_key has {len(key)} characters; use at least {MIN_IDEMPOTENCY_KEY_CHARS} random ones "
            "(e.g. a UUID): the credential is derived from it.",
            metadata={"field": "idempotency_key"},
        )
    raw = key.encode()
    agent_id = hashlib.sha256(b"agentnet.register.id\0" + raw).hexdigest()[:32]
    mac = hmac.new(raw, b"agentnet.register.secret\0" + fingerprint, hashlib.sha256).digest()
    return agent_id, base64.urlsafe_b64encode(mac).rstrip(b"=").decode()


def _fingerprint(
    passport: identity_pb2.Passport,
    resume: identity_pb2.Resume,
    skill_md: str | None,
    a2a: a2a_pb2.A2ASettings | None,
    rule_json: str,
) -> bytes:
    """A digest of what a Register asks for (equal requests, equal digests)."""
    digest = hashlib.sha256()
    for part in (
        passport.SerializeToString(deterministic=True),
        resume.SerializeToString(deterministic=True),
        b"-" if skill_md is None else b"+" + skill_md.encode(),
        b"-" if a2a is None else b"+" + a2a.SerializeToString(deterministic=True),
        rule_json.encode(),
    ):
        digest.update(len(part).to_bytes(8, "big") + part)
    return digest.digest()
