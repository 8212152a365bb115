"""The AG2 WebSocket gateway: unmodified ``ag2.network`` clients (AG2 1.2.1's ``HubClient(WsLink(url))``)
join the hub through it. A client of the hub's public gRPC API, stateless, any number in front of any
hub replicas (docs/ag2.md)."""

from netkernel.extras import require

require("ag2", "websockets")
