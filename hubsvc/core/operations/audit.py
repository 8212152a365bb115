"""ListAudit: the operator's read of the audit log."""

from __future__ import annotations

from agentnet.v1 import hub_pb2

from hubsvc.core.hub import HubCore
from hubsvc.core.util import to_timestamp
from netkernel.errors import InvalidArgument

MAX_AUDIT_ID = 2**63 - 1
"""Audit ids are SQLite rowids; ``after_id`` is a uint64 on the wire, so it can lie beyond every id."""


class AuditOps:
    """ListAudit."""

    def __init__(self, core: HubCore) -> None:
        self.core = core

    async def list_audit(self, kind: str, subject_id: str, after_id: int, limit: int) -> list[hub_pb2.AuditRecord]:
        """Audit records in id order."""
        if limit < 0 or limit > 10_000:
            raise InvalidArgument("limit must be between 1 and 10000 (0 = 100).")
        if after_id >= MAX_AUDIT_ID:
            return []  # no record comes after it
        rows = await self.core.store.list_audit(kind=kind, subject_id=subject_id, after_id=after_id, limit=limit or 100)
        return [
            hub_pb2.AuditRecord(
                audit_id=r.audit_id,
                kind=r.kind,
                actor_id=r.actor_id,
                subject_id=r.subject_id,
                detail_json=r.detail_json,
                created_at=to_timestamp(r.created_at),
            )
            for r in rows
        ]
