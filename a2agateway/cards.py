"""Agent Cards of the hub agents a caller may see: one per agent, and the gateway's directory card."""

from __future__ import annotations

from dataclasses import dataclass

from a2a.types import a2a_pb2 as a2a
from agentnet.v1 import a2a_pb2 as hub_a2a
from agentnet.v1 import hub_pb2

from a2agateway.hub import RPC_TIMEOUT, HubLink
from netkernel.errors import NotFound

SECURITY_SCHEME = "hubCredential"
"""The name of the cards' one security scheme: an HTTP bearer token that is a hub credential."""
PROTOCOL_VERSION = "1.0"
MEDIA_TYPES = {"text": "text/plain"}
"""Hub input modes written as media types in cards (others are written as they are)."""
MAX_DESCRIPTION = 2000
"""Characters of an agent's skill markdown used as its card's description."""


@dataclass(frozen=True)
class Addresses:
    """Where clients reach this gateway (written into every card)."""

    jsonrpc_url: str
    """The JSON-RPC endpoint, e.g. http://127.0.0.1:8090/a2a."""
    grpc_target: str
    """host:port of the gRPC listener; "" = none."""

    def interfaces(self, tenant: str) -> list[a2a.AgentInterface]:
        """The card's interfaces, naming the hub agent as the tenant."""
        found = [
            a2a.AgentInterface(
                url=self.jsonrpc_url, protocol_binding="JSONRPC", tenant=tenant, protocol_version=PROTOCOL_VERSION
            )
        ]
        if self.grpc_target:
            found.append(
                a2a.AgentInterface(
                    url=self.grpc_target, protocol_binding="GRPC", tenant=tenant, protocol_version=PROTOCOL_VERSION
                )
            )
        return found


def _security(card: a2a.AgentCard) -> None:
    scheme = card.security_schemes[SECURITY_SCHEME]
    scheme.http_auth_security_scheme.scheme = "bearer"
    scheme.http_auth_security_scheme.description = (
        "A hub credential (an agent's, or a human's from RegisterHuman): the call runs as that hub identity."
    )
    requirement = card.security_requirements.add()
    requirement.schemes[SECURITY_SCHEME].SetInParent()


def skill_summary(skill_md: str) -> str:
    """The first paragraph of an agent's skill markdown after any frontmatter, clipped."""
    text = skill_md.strip()
    if text.startswith("---"):
        _, _, rest = text[3:].partition("\n---")
        text = rest.strip()
    lines = [line.strip().lstrip("#").strip() for line in text.split("\n\n", 1)[0].splitlines()]
    return " ".join(line for line in lines if line)[:MAX_DESCRIPTION]


def agent_card(agent: hub_a2a.DiscoveredAgent, description: str, addresses: Addresses) -> a2a.AgentCard:
    """The card of one hub agent."""
    modes = [MEDIA_TYPES.get(m, m) for m in agent.input_modes] or ["text/plain"]
    card = a2a.AgentCard(
        name=agent.name,
        description=description,
        version="1.0.0",
        supported_interfaces=addresses.interfaces(agent.name),
        capabilities=a2a.AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=modes,
        default_output_modes=["text/plain"],
    )
    for skill in agent.skills or [agent.name]:
        card.skills.add(
            id=skill,
            name=skill,
            description=description,
            tags=[skill, *agent.capabilities],
            input_modes=modes,
            output_modes=["text/plain"],
        )
    _security(card)
    return card


class Cards:
    """Builds cards for one caller from what the hub lets it see."""

    def __init__(self, hub: HubLink, addresses: Addresses, limit: int) -> None:
        self.hub = hub
        self.addresses = addresses
        self.limit = limit

    async def visible(self, token: str) -> list[hub_a2a.DiscoveredAgent]:
        """The A2A agents the caller may see and call, by name."""
        return await self.hub.discover(token, self.limit)

    async def find(self, token: str, name: str) -> hub_a2a.DiscoveredAgent:
        """The visible agent ``name`` (or id); NOT_FOUND otherwise, as for an agent that does not exist."""
        for agent in await self.visible(token):
            if name in (agent.name, agent.agent_id):
                return agent
        raise NotFound(
            f"no agent {name!r} you may call through A2A (it does not exist, its A2A is disabled, or it does not "
            "accept you); GET /agents lists the cards you may use.",
            metadata={"agent": name},
        )

    async def _description(self, token: str, agent: hub_a2a.DiscoveredAgent) -> str:
        if agent.description:
            return agent.description
        request = hub_pb2.DescribeAgentRequest(agent_id=agent.agent_id)
        described = await self.hub.rpc(token).describe_agent(request, timeout=RPC_TIMEOUT)
        return skill_summary(described.agent.skill_md) or f"The hub agent {agent.name}."

    async def card(self, token: str, name: str) -> a2a.AgentCard:
        """The card of the visible agent ``name``."""
        agent = await self.find(token, name)
        return agent_card(agent, await self._description(token, agent), self.addresses)

    async def cards(self, token: str) -> list[a2a.AgentCard]:
        """Every visible agent's card."""
        return [agent_card(a, await self._description(token, a), self.addresses) for a in await self.visible(token)]

    async def directory(self, token: str) -> a2a.AgentCard:
        """The gateway's own card: one skill per visible agent (its id is the agent's name). A message
        needs an agent, so clients use the agent's own card (``/agents/<name>/.well-known/agent-card.json``)."""
        card = a2a.AgentCard(
            name="agent-network A2A gateway",
            description=(
                "Hub agents reachable through A2A. Each skill is one agent: fetch its card at "
                "/agents/<skill id>/.well-known/agent-card.json and talk to it through that card."
            ),
            version="1.0.0",
            supported_interfaces=self.addresses.interfaces(""),
            capabilities=a2a.AgentCapabilities(streaming=True),
            default_input_modes=["text/plain"],
            default_output_modes=["text/plain"],
        )
        for agent in await self.visible(token):
            card.skills.add(id=agent.name, name=agent.name, description=agent.description, tags=list(agent.skills))
        _security(card)
        return card
