"""ListAudit: the operator's read of the audit log (and the wire form FollowAudit shares)."""

from __future__ import annotations

from agentnet.v1 import hub_pb2

from hubsvc.core.hub import HubCore
from hubsvc.core.util import to_timestamp
from hubsvc.storage.base import AuditRow
from netkernel.errors import InvalidArgument

MAX_AUDIT_ID = 2**63 - 1
"""Audit ids are SQLite rowids; ``after_id`` is a uint64 on the wire, so it can lie beyond every id."""


def audit_record(row: AuditRow) -> hub_pb2.AuditRecord:
    """The wire form of a stored audit record."""
    return hub_pb2.AuditRecord(
        audit_id=row.audit_id,
        kind=row.kind,
        actor_id=row.actor_id,
        subject_id=row.subject_id,
        detail_json=row.detail_json,
        created_at=to_timestamp(row.created_at),
    )


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
        return [audit_record(r) for r in rows]
