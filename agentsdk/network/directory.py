"""What a hub client knows of the identities on the hub: their names (learnt from registrations,
channels and listings) and the entries ``list_agents`` returns."""

from __future__ import annotations

from dataclasses import dataclass

from netkernel.identity import PassportKind


@dataclass(frozen=True)
class AgentSummary:
    """One entry of ``list_agents``."""

    agent_id: str
    name: str
    kind: PassportKind
    description: str
    capabilities: list[str]
    online: bool


class NameBook:
    """Passport names by agent id and agent ids by name, as a client learns them."""

    def __init__(self) -> None:
        self._names: dict[str, str] = {}
        self._ids: dict[str, str] = {}

    def learn(self, agent_id: str, name: str) -> None:
        """``agent_id`` is called ``name``."""
        self._names[agent_id] = name
        self._ids[name] = agent_id

    def forget(self, agent_id: str) -> None:
        """Drop an identity that was unregistered."""
        name = self._names.pop(agent_id, None)
        if name is not None and self._ids.get(name) == agent_id:
            del self._ids[name]

    def name_for(self, agent_id: str, *, default: str | None = None) -> str:
        """The passport name of ``agent_id`` when known; else ``default``, or the id itself when no
        default is given (AG2's ``name_for``: a safe ``NameResolver`` for views, even for an identity
        unregistered meanwhile)."""
        name = self._names.get(agent_id)
        if name is not None:
            return name
        return default if default is not None else agent_id

    def id_for(self, name_or_id: str) -> str:
        """The agent id of a known name (ids pass through)."""
        return self._ids.get(name_or_id, name_or_id)
