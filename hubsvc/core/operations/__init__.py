"""The typed operations behind the HubService RPCs, one module per area.

The servicer converts messages and calls these; CallTool's JSON surface
(:mod:`hubsvc.core.tool_calls`) runs the same operations, so a bridge's LLM gets
the same behaviour as a Python agent.
"""

from __future__ import annotations

from hubsvc.core.hub import HubCore
from hubsvc.core.operations.a2a import A2AOps
from hubsvc.core.operations.agents import AgentOps
from hubsvc.core.operations.audit import AuditOps
from hubsvc.core.operations.channels import ChannelOps
from hubsvc.core.operations.context import ContextOps
from hubsvc.core.operations.messages import MessageOps
from hubsvc.core.operations.operator import OperatorOps
from hubsvc.core.operations.tasks import TaskOps
from hubsvc.core.operations.tools import ToolOps
from hubsvc.core.operations.turns import TurnOps


class Operations:
    """Every operation area over one :class:`HubCore`."""

    def __init__(self, core: HubCore) -> None:
        self.core = core
        self.agents = AgentOps(core)
        self.channels = ChannelOps(core)
        self.messages = MessageOps(core)
        self.tasks = TaskOps(core)
        self.context = ContextOps(core)
        self.tools = ToolOps(core)
        self.turns = TurnOps(core)
        self.audit = AuditOps(core)
        self.a2a = A2AOps(core, self.messages)
        self.operator = OperatorOps(core, self.channels)


__all__ = [
    "A2AOps",
    "AgentOps",
    "AuditOps",
    "ChannelOps",
    "ContextOps",
    "MessageOps",
    "Operations",
    "OperatorOps",
    "TaskOps",
    "ToolOps",
    "TurnOps",
]
