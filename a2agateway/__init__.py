"""The inbound A2A gateway: outside A2A clients call hub agents (``python -m a2agateway``).

A separate, stateless process in front of the hub. It serves the A2A protocol (Agent Cards,
JSON-RPC over HTTP and gRPC, through a2a-sdk's own server framework) and maps every A2A method to
the hub's public gRPC API, called as the client's hub identity (its bearer token is a hub
credential), so the hub's visibility rules apply unchanged. Tasks live in the hub's execution
records, so any gateway answers for any task. docs/a2a.md describes the mapping.
"""

from netkernel.extras import require

require("a2a", "a2a.server", "starlette", "sse_starlette", "uvicorn")
