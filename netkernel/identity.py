"""Passport and Resume: who an agent is and what it claims it can do.

Dataclasses for the SDK, plus conversion to and from the
wire messages in ``agentnet.v1.identity_pb2``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentnet.v1 import identity_pb2

from netkernel.wire import PASSPORT_KIND, PassportKindName

PassportKind = PassportKindName | None
"""What sort of participant an identity is (None = agent)."""


PASSPORT_KINDS: tuple[str, ...] = tuple(PASSPORT_KIND.by_name)
"""The passport kinds a hub registers (``Passport.kind``; None means ``"agent"``)."""


def kind_to_wire(kind: PassportKind) -> identity_pb2.PassportKind.ValueType:
    """Wire enum value of a passport kind string (None = UNSPECIFIED)."""
    return identity_pb2.PASSPORT_KIND_UNSPECIFIED if kind is None else PASSPORT_KIND.to_wire(kind)


def kind_from_wire(value: identity_pb2.PassportKind.ValueType) -> PassportKind:
    """Passport kind string of a wire enum value (None for UNSPECIFIED)."""
    return PASSPORT_KIND.by_value.get(value)


@dataclass
class Passport:
    """An agent's public, stable identity."""

    name: str
    kind: PassportKind = None
    owner: str = ""
    provider: str = ""
    model: str = ""
    project: str = ""
    description: str = ""
    labels: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # A typo (kind="humna") fails here, where it was written, not at registration.
        if self.kind is not None and self.kind not in PASSPORT_KIND.by_name:
            allowed = ", ".join(repr(k) for k in PASSPORT_KIND.by_name)
            raise ValueError(f"Passport.kind must be one of {allowed} or None (= 'agent'); got {self.kind!r}")

    def to_wire(self) -> identity_pb2.Passport:
        """The wire message."""
        return identity_pb2.Passport(
            name=self.name,
            kind=kind_to_wire(self.kind),
            owner=self.owner,
            provider=self.provider,
            model=self.model,
            project=self.project,
            description=self.description,
            labels=self.labels,
        )

    @classmethod
    def from_wire(cls, msg: identity_pb2.Passport) -> Passport:
        """Build from the wire message."""
        return cls(
            name=msg.name,
            kind=kind_from_wire(msg.kind),
            owner=msg.owner,
            provider=msg.provider,
            model=msg.model,
            project=msg.project,
            description=msg.description,
            labels=dict(msg.labels),
        )


@dataclass(frozen=True)
class ObservedStat:
    """The hub's track record of one capability (AG2's ``ObservedStat``): how the identity's tasks
    tagged with it ended."""

    n: int = 0
    completed: int = 0
    failed: int = 0
    expired: int = 0
    cancelled: int = 0
    success_rate: float = 0.0
    """``completed / n``."""
    last_latency_ms: int = 0
    """Start to end of the latest task that ended, in milliseconds."""
    last_updated: float | None = None
    """When the latest task ended (epoch seconds)."""


@dataclass
class Resume:
    """What an agent claims it can do (searched by ``peers(action="find")``), and what the hub
    observed it do (``observed``, ``last_updated``: stamped by the hub, read-only)."""

    claimed_capabilities: list[str] = field(default_factory=list)
    domains: list[str] = field(default_factory=list)
    summary: str = ""
    examples: list[str] = field(default_factory=list)
    tools: list[str] = field(default_factory=list)
    languages: list[str] = field(default_factory=list)
    observed: dict[str, ObservedStat] = field(default_factory=dict, compare=False)
    """Per capability, how the identity's tasks tagged with it ended (the hub's, never sent by a client)."""
    last_updated: float | None = field(default=None, compare=False)
    """When ``observed`` last changed (epoch seconds; None = never)."""

    def to_wire(self) -> identity_pb2.Resume:
        """The wire message."""
        return identity_pb2.Resume(
            claimed_capabilities=self.claimed_capabilities,
            domains=self.domains,
            summary=self.summary,
            examples=self.examples,
            tools=self.tools,
            languages=self.languages,
        )

    @classmethod
    def from_wire(cls, msg: identity_pb2.Resume) -> Resume:
        """Build from the wire message."""
        return cls(
            claimed_capabilities=list(msg.claimed_capabilities),
            domains=list(msg.domains),
            summary=msg.summary,
            examples=list(msg.examples),
            tools=list(msg.tools),
            languages=list(msg.languages),
            observed={
                capability: ObservedStat(
                    stat.n,
                    stat.completed,
                    stat.failed,
                    stat.expired,
                    stat.cancelled,
                    stat.success_rate,
                    stat.last_latency_ms,
                    _seconds(stat.last_updated) if stat.HasField("last_updated") else None,
                )
                for capability, stat in msg.observed.items()
            },
            last_updated=_seconds(msg.last_updated) if msg.HasField("last_updated") else None,
        )


@dataclass
class ResumeExample:
    """One piece of work an agent did (AG2's ``ResumeExample``), for ``client.add_example(...)``.

    The hub keeps a resume's examples as lines of text: an example is stored as :meth:`line`."""

    title: str
    outcome: str = ""
    """``completed``, ``failed`` or free-form."""
    task_id: str | None = None
    channel_id: str | None = None
    when: str | None = None
    note: str = ""

    def line(self) -> str:
        """The example as one line: ``title — outcome (note) [task …, channel …, when …]``."""
        text = self.title.strip()
        if self.outcome:
            text += f" — {self.outcome}"
        if self.note:
            text += f" ({self.note})"
        refs = [f"{k} {v}" for k, v in (("task", self.task_id), ("channel", self.channel_id), ("when", self.when)) if v]
        if refs:
            text += f" [{', '.join(refs)}]"
        return " ".join(text.split())


def _seconds(ts: Any) -> float:
    """A protobuf Timestamp as epoch seconds."""
    return float(ts.seconds) + float(ts.nanos) / 1e9
