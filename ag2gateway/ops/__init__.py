"""AG2 1.2.1's control-plane ops, each mapped onto the hub's RPCs (docs/ag2.md has the table).

An op takes the request's ``params`` and returns AG2's JSON result. Ops AG2's hub has but the hub
has no RPC for answer as documented there (``fire_task_event`` is logged, ``record_observation`` is
a no-op: the hub fills ``Resume.observed`` itself from tasks); ``report_turn_failure`` is the hub's
ReportTurnFailure.
"""

from __future__ import annotations

from ag2gateway.ops import channels, identities, tasks
from ag2gateway.ops.registry import OPS, dispatch

__all__ = ["OPS", "channels", "dispatch", "identities", "tasks"]
