"""The network as an MCP server: ``agentnet mcp`` serves one person-kind hub identity to an MCP host.

Its tools are the identity's network tools (``peers``, ``channels``, ``tasks``, ``context``,
``delegate``, ``discover_available_agents``, ``invoke_a2a_agent``) and ``ask``; its channels and
their transcripts are resources, updated by ``notifications/resources/updated`` as envelopes arrive
(docs/mcp.md "The network as an MCP server"). Needs the ``mcp`` extra.
"""

from netkernel.extras import missing_extra

try:
    import mcp.server.lowlevel  # noqa: F401
except ImportError as exc:
    raise missing_extra("mcp", exc) from exc

from agentsdk.mcp_server.resources import (
    CHANNEL_TEMPLATE,
    CHANNELS_URI,
    MAX_ENVELOPE_BYTES,
    MAX_TRANSCRIPT_BYTES,
    MAX_TRANSCRIPT_ENVELOPES,
    TRANSCRIPT_TEMPLATE,
)
from agentsdk.mcp_server.serve import MAX_HTTP_SESSIONS, ServeOptions, serve
from agentsdk.mcp_server.server import NetworkMCPServer
from agentsdk.mcp_server.subscriptions import MAX_SESSIONS, MAX_SUBSCRIPTIONS
from agentsdk.mcp_server.tools import ASK_DEFAULT_TIMEOUT, ASK_MAX_TIMEOUT

__all__ = [
    "ASK_DEFAULT_TIMEOUT",
    "ASK_MAX_TIMEOUT",
    "CHANNELS_URI",
    "CHANNEL_TEMPLATE",
    "MAX_ENVELOPE_BYTES",
    "MAX_HTTP_SESSIONS",
    "MAX_SESSIONS",
    "MAX_SUBSCRIPTIONS",
    "MAX_TRANSCRIPT_BYTES",
    "MAX_TRANSCRIPT_ENVELOPES",
    "TRANSCRIPT_TEMPLATE",
    "NetworkMCPServer",
    "ServeOptions",
    "serve",
]
