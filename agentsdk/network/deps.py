"""Dependency-injection keys and ``Annotated`` injects for network-aware tools.

The default notify handler passes these keys in ``agent.ask(dependencies=...)`` so
a tool can declare, e.g., ``channel: ChannelInject`` and receive the current
channel without the LLM ever seeing the parameter. Tests outside the handler can
pass the same keys by hand::

    await tool.invoke({"content": "hi"}, {CHANNEL_DEP: channel, AGENT_CLIENT_DEP: client})

At runtime every inject is ``Annotated[Any, Inject(KEY)]`` (no imports of the
client classes, so there are no import cycles); type checkers see the precise
types.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from agentsdk.tools import Inject

__all__ = [
    "AGENT_CLIENT_DEP",
    "CHANNEL_DEP",
    "CHANNEL_STATE_DEP",
    "HUB_DEP",
    "TASK_DEP",
    "AgentClientInject",
    "ChannelInject",
    "ChannelStateInject",
    "HubInject",
    "TaskInject",
]

AGENT_CLIENT_DEP = "agent_client"
"""Dependencies key of the network client (AgentClient / HumanClient) running the turn."""
CHANNEL_DEP = "channel"
"""Dependencies key of the current channel (an object with a ``channel_id``)."""
CHANNEL_STATE_DEP = "channel_state"
"""Dependencies key of the channel's adapter state (the DescribeChannel state JSON dict)."""
HUB_DEP = "hub"
"""Dependencies key of the HubClient."""
TASK_DEP = "task"
"""Dependencies key of the active task (inside ``agent.task(...)``), if any."""

if TYPE_CHECKING:
    from agentsdk.network.channel import Channel
    from agentsdk.network.clients import NetworkClient
    from agentsdk.network.hub_client import HubClient

    AgentClientInject = Annotated[NetworkClient, Inject(AGENT_CLIENT_DEP)]
    ChannelInject = Annotated[Channel, Inject(CHANNEL_DEP)]
    ChannelStateInject = Annotated[dict[str, Any], Inject(CHANNEL_STATE_DEP)]
    HubInject = Annotated[HubClient, Inject(HUB_DEP)]
    TaskInject = Annotated[Any, Inject(TASK_DEP)]
else:
    AgentClientInject = Annotated[Any, Inject(AGENT_CLIENT_DEP)]
    """Tool parameter type: the network client running the turn (hidden from the LLM)."""
    ChannelInject = Annotated[Any, Inject(CHANNEL_DEP)]
    """Tool parameter type: the current channel (hidden from the LLM)."""
    ChannelStateInject = Annotated[dict[str, Any], Inject(CHANNEL_STATE_DEP)]
    """Tool parameter type: the channel's adapter state dict (hidden from the LLM)."""
    HubInject = Annotated[Any, Inject(HUB_DEP)]
    """Tool parameter type: the HubClient (hidden from the LLM)."""
    TaskInject = Annotated[Any, Inject(TASK_DEP)]
    """Tool parameter type: the active task, if any (hidden from the LLM)."""
