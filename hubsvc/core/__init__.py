"""The transport-agnostic hub: :class:`~hubsvc.core.hub.HubCore` wires admission, the live
channels, posts, Connect sessions, identities, tasks and executions together; ``operations/``
holds what the RPCs run, and ``tool_calls.py`` the CallTool JSON surface over it."""
