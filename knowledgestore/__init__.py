"""The KnowledgeStore protocol and its local backends (memory, sqlite, disk, redis, locked).

Shared by the knowledge service (which serves one of them over gRPC) and the SDK (which
offers them in-process and re-exports them from :mod:`agentsdk.knowledge`). The remote client
(``RemoteKnowledgeStore``) is the SDK's own. See ``docs/knowledge.md``.
"""
