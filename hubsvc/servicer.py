"""The HubService gRPC servicer: a thin layer that authenticates, converts
messages and delegates to the transport-agnostic hub core.

RPCs the core does not implement yet answer UNIMPLEMENTED with a message naming
the RPC (see :func:`agentsdk.service_runtime.fill_unimplemented`).
"""

from __future__ import annotations

from agentnet.v1 import hub_pb2, hub_pb2_grpc

from agentsdk.service_runtime import fill_unimplemented

HUB_SERVICE = hub_pb2.DESCRIPTOR.services_by_name["HubService"]


@fill_unimplemented(HUB_SERVICE, "the hub core is not built yet")
class HubServicer(hub_pb2_grpc.HubServiceServicer):
    """Serves agentnet.v1.HubService."""
