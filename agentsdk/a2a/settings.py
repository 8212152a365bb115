"""A2A settings: the ``a2a:`` section of an ``agent.yaml``, or a registration argument."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml
from agentnet.v1 import a2a_pb2
from pydantic import BaseModel, ConfigDict, Field, ValidationError


class A2ASettings(BaseModel):
    """Whether and to whom an agent is discoverable and invocable, and what it advertises."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    enabled: bool = False
    """A2A is off unless enabled: a disabled agent is invisible and refuses calls (and gets no A2A tools)."""
    allowed_callers: list[str] = Field(default_factory=list)
    """Names or glob patterns (``"billing-*"``) of agents that may call this one; empty = anyone in the project."""
    description: str = ""
    """Shown in discovery results (the passport description when empty)."""
    skills: list[str] = Field(default_factory=list)
    """Skills offered (discovery filter ``skills``; ``invoke_agent(skill=...)`` must name one of them)."""
    capabilities: list[str] = Field(default_factory=list)
    """Capabilities offered (discovery filter ``capabilities``)."""
    input_modes: list[str] = Field(default_factory=list)
    """Input modes accepted, e.g. ``["text"]`` (discovery filter ``input_modes``)."""

    @classmethod
    def from_yaml(cls, path: str | os.PathLike[str]) -> A2ASettings:
        """The ``a2a:`` section of an ``agent.yaml`` (disabled defaults when the section is absent).

        Raises ``ValueError`` naming the file and the bad field for invalid YAML or settings.
        """
        file = Path(path)
        try:
            document: Any = yaml.safe_load(file.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as exc:
            raise ValueError(f"{file}: not valid YAML: {exc}") from None
        if not isinstance(document, dict):
            raise ValueError(f"{file}: expected a mapping at the top level, found {type(document).__name__}")
        section = document.get("a2a") or {}
        try:
            return cls.model_validate(section)
        except ValidationError as exc:
            problems = "; ".join(f"a2a.{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
            raise ValueError(f"{file}: invalid a2a settings: {problems}") from None

    @classmethod
    def coerce(cls, value: A2ASettings | str | os.PathLike[str]) -> A2ASettings:
        """Settings as given, or loaded from an ``agent.yaml`` path."""
        return value if isinstance(value, A2ASettings) else cls.from_yaml(value)

    def to_wire(self) -> a2a_pb2.A2ASettings:
        """The wire message."""
        return a2a_pb2.A2ASettings(**self.model_dump())

    @classmethod
    def from_wire(cls, message: a2a_pb2.A2ASettings) -> A2ASettings:
        """From the wire message."""
        return cls(
            enabled=message.enabled,
            allowed_callers=list(message.allowed_callers),
            description=message.description,
            skills=list(message.skills),
            capabilities=list(message.capabilities),
            input_modes=list(message.input_modes),
        )
