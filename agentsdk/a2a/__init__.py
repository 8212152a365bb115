"""agentsdk.a2a: agent-to-agent discovery and invocation through the hub.

* ``client.a2a``: a pre-authenticated :class:`AgentToAgent`,
  or None when A2A is unavailable (the identity's A2A is disabled, or it is disconnected).
* ``client.a2a_tools()`` / ``agent.a2a_tools()``: the LLM tools ``discover_available_agents``
  and ``invoke_a2a_agent`` (empty when A2A is disabled); :func:`to_langchain_tools` converts them.
* :func:`get_current_custom_headers`: the headers the caller forwarded, inside the answer.
* :class:`A2ASettings`: the ``a2a:`` section of ``agent.yaml`` (``hc.register(..., a2a=...)``).
* :class:`RemoteA2AAgent`: an outside A2A agent registered with ``hc.register_remote_a2a_agent``.

See ``docs/a2a.md``.
"""

from agentsdk.a2a.client import AgentResponse, AgentToAgent, DiscoveredAgent, Execution
from agentsdk.a2a.context import Dispatch, ReplyStatus, current_dispatch, dispatch_scope, get_current_custom_headers
from agentsdk.a2a.remote import RemoteA2AAgent
from agentsdk.a2a.settings import A2ASettings
from agentsdk.a2a.tools import REQUEST_INPUT_TOOL, make_a2a_tools, tool_error
from agentsdk.langchain import to_langchain_tools
from netkernel.wire import InvocationStatus

__all__ = [
    "REQUEST_INPUT_TOOL",
    "A2ASettings",
    "AgentResponse",
    "AgentToAgent",
    "DiscoveredAgent",
    "Dispatch",
    "Execution",
    "InvocationStatus",
    "RemoteA2AAgent",
    "ReplyStatus",
    "current_dispatch",
    "dispatch_scope",
    "get_current_custom_headers",
    "make_a2a_tools",
    "to_langchain_tools",
    "tool_error",
]
