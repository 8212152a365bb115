"""agentsdk.network: agents, humans and bridges on a hub.

Entry points: ``HubClient.connect("host:port")`` for a running hub and
``Hub.open()`` for an embedded one; ``hc.register(agent, passport, resume)`` →
:class:`AgentClient`, ``hc.register_human(passport)`` → :class:`HumanClient`.
Every name an agent program needs on the network (handler hooks, views, envelope
types and event constants, dependency keys) is importable here; see ``docs/network.md``.
"""

from agentsdk.backoff import RateLimitBackoff
from agentsdk.errors import (
    AccessDeniedError,
    AuthError,
    InboxFull,
    NetworkError,
    NotFoundError,
    ProtocolError,
)
from agentsdk.events import ImageInput
from agentsdk.network._cursors import CursorStore, JsonFileCursorStore
from agentsdk.network.agent_client import (
    AgentClient,
    HubBackedCheckpointStore,
    Task,
    default_handler,
    read_wal_until,
    resolve_view_policy,
    stamp_dependencies,
)
from agentsdk.network.channel import Channel, ChannelMetadata, DefaultView
from agentsdk.network.clients import HumanClient, NetworkClient, PendingTurn
from agentsdk.network.deps import (
    AGENT_CLIENT_DEP,
    CHANNEL_DEP,
    CHANNEL_STATE_DEP,
    HUB_DEP,
    TASK_DEP,
    AgentClientInject,
    ChannelInject,
    ChannelStateInject,
    HubInject,
    TaskInject,
)
from agentsdk.network.hub_client import AgentSummary, Hub, HubClient
from agentsdk.network.plugin import NetworkContextPolicy, NetworkPlugin
from agentsdk.network.service import stop_signal
from agentsdk.network.transitions import (
    AgentTarget,
    Always,
    ContextEquals,
    FromSpeaker,
    RevertToInitiatorTarget,
    RoundRobinTarget,
    StayTarget,
    TerminateTarget,
    ToolCalled,
    Transition,
    TransitionCondition,
    TransitionGraph,
    TransitionTarget,
)
from agentsdk.network.turn_context import cause_scope, current_cause, current_task
from agentsdk.network.views import (
    FullTranscript,
    NamedTranscript,
    NamedWindowedSummary,
    ViewPolicy,
    WindowedSummary,
)
from agentsdk.routing import Finish, Handoff
from agentsdk.tls import TlsConfig
from netkernel.channel_types import (
    CONSULTING_TYPE,
    CONVERSATION_TYPE,
    DISCUSSION_TYPE,
    ORDERING_ROUND_ROBIN,
    WORKFLOW_TYPE,
)
from netkernel.envelope import (
    EV_CHANNEL_CLOSED,
    EV_CHANNEL_EXPIRED,
    EV_CHANNEL_INVITE,
    EV_CHANNEL_INVITE_ACK,
    EV_CHANNEL_INVITE_REJECT,
    EV_CHANNEL_OPENED,
    EV_CONTEXT_SET,
    EV_EXPECTATION_VIOLATED,
    EV_MSG_CHUNK,
    EV_PACKET,
    EV_TASK_CANCEL_REQUEST,
    EV_TASK_CANCELLED,
    EV_TEXT,
    Envelope,
    Priority,
    visible_to,
)
from netkernel.identity import PASSPORT_KINDS, ObservedStat, Passport, PassportKind, Resume, ResumeExample
from netkernel.skills import ParsedSkill, parse_skill_frontmatter, render_fallback_skill

__all__ = [
    "AGENT_CLIENT_DEP",
    "CHANNEL_DEP",
    "CHANNEL_STATE_DEP",
    "CONSULTING_TYPE",
    "CONVERSATION_TYPE",
    "DISCUSSION_TYPE",
    "EV_CHANNEL_CLOSED",
    "EV_CHANNEL_EXPIRED",
    "EV_CHANNEL_INVITE",
    "EV_CHANNEL_INVITE_ACK",
    "EV_CHANNEL_INVITE_REJECT",
    "EV_CHANNEL_OPENED",
    "EV_CONTEXT_SET",
    "EV_EXPECTATION_VIOLATED",
    "EV_MSG_CHUNK",
    "EV_PACKET",
    "EV_TASK_CANCELLED",
    "EV_TASK_CANCEL_REQUEST",
    "EV_TEXT",
    "HUB_DEP",
    "ORDERING_ROUND_ROBIN",
    "PASSPORT_KINDS",
    "TASK_DEP",
    "WORKFLOW_TYPE",
    "AccessDeniedError",
    "AgentClient",
    "AgentClientInject",
    "AgentSummary",
    "AgentTarget",
    "Always",
    "AuthError",
    "Channel",
    "ChannelInject",
    "ChannelMetadata",
    "ChannelStateInject",
    "ContextEquals",
    "CursorStore",
    "DefaultView",
    "Envelope",
    "Finish",
    "FromSpeaker",
    "FullTranscript",
    "Handoff",
    "Hub",
    "HubBackedCheckpointStore",
    "HubClient",
    "HubInject",
    "HumanClient",
    "ImageInput",
    "InboxFull",
    "JsonFileCursorStore",
    "NamedTranscript",
    "NamedWindowedSummary",
    "NetworkClient",
    "NetworkContextPolicy",
    "NetworkError",
    "NetworkPlugin",
    "NotFoundError",
    "ObservedStat",
    "ParsedSkill",
    "Passport",
    "PassportKind",
    "PendingTurn",
    "Priority",
    "ProtocolError",
    "RateLimitBackoff",
    "Resume",
    "ResumeExample",
    "RevertToInitiatorTarget",
    "RoundRobinTarget",
    "StayTarget",
    "Task",
    "TaskInject",
    "TerminateTarget",
    "TlsConfig",
    "ToolCalled",
    "Transition",
    "TransitionCondition",
    "TransitionGraph",
    "TransitionTarget",
    "ViewPolicy",
    "WindowedSummary",
    "cause_scope",
    "current_cause",
    "current_task",
    "default_handler",
    "parse_skill_frontmatter",
    "read_wal_until",
    "render_fallback_skill",
    "resolve_view_policy",
    "stamp_dependencies",
    "stop_signal",
    "visible_to",
]
