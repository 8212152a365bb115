"""The KnowledgeService gRPC servicer (thin: auth, namespaces, conversion)."""

from __future__ import annotations

from agentnet.v1 import knowledge_pb2, knowledge_pb2_grpc

from agentsdk.service_runtime import fill_unimplemented

KNOWLEDGE_SERVICE = knowledge_pb2.DESCRIPTOR.services_by_name["KnowledgeService"]


@fill_unimplemented(KNOWLEDGE_SERVICE, "the knowledge stores are not built yet")
class KnowledgeServicer(knowledge_pb2_grpc.KnowledgeServiceServicer):
    """Serves agentnet.v1.KnowledgeService."""
