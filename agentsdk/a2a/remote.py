"""Outside A2A agents registered on the hub (``hc.register_remote_a2a_agent``): what registration returns."""

from __future__ import annotations

from dataclasses import dataclass, field

from agentnet.v1 import identity_pb2


@dataclass(frozen=True)
class RemoteA2AAgent:
    """An outside A2A agent's identity on the hub: call it with ``invoke_agent(agent_id, ...)``.

    ``credential`` acts as the identity (``hc.refresh_remote_a2a_agent``, ``set_a2a_settings``,
    unregistering); it is not shown in ``repr``."""

    agent_id: str
    name: str
    card_url: str
    url: str
    """The interface the hub calls."""
    protocol_binding: str
    """"JSONRPC" or "GRPC": the first of those the card lists."""
    description: str
    skills: tuple[str, ...]
    credential: str = field(repr=False)

    @classmethod
    def from_record(cls, record: identity_pb2.AgentRecord, credential: str) -> RemoteA2AAgent:
        """Built from the hub's registry entry."""
        remote = record.remote_a2a
        return cls(
            agent_id=record.agent_id,
            name=record.passport.name,
            card_url=remote.card_url,
            url=remote.url,
            protocol_binding=remote.protocol_binding,
            description=record.a2a.description,
            skills=tuple(record.a2a.skills),
            credential=credential,
        )
