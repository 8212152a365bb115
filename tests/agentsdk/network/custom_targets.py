"""Custom transition targets the tests register: in the test process (an embedded hub) and in a hub
process (``--transition-targets tests.agentsdk.network.custom_targets:TARGETS``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from agentsdk.network import CustomTarget, TargetChoice, TurnView


@dataclass(frozen=True)
class Rota(CustomTarget):
    """The next speaker is ``order[turns % len(order)]`` (names); after ``stop_after`` turns, end with ``reason``."""

    type: ClassVar[str] = "test.rota"
    order: list[str] = field(default_factory=list)
    stop_after: int = 100
    reason: str = "rota_done"

    def __post_init__(self) -> None:
        if not self.order:
            raise ValueError("order names at least one participant")

    def resolve(self, turn: TurnView) -> TargetChoice:
        if turn.turns >= self.stop_after:
            return TargetChoice(end_reason=self.reason)
        return TargetChoice(next_speaker=self.order[turn.turns % len(self.order)])


TARGETS = [Rota]
