"""``Stream``: the ordered event history of one conversation."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from agentsdk.events import BaseEvent, event_from_dict, new_id

__all__ = ["Stream"]


@dataclass(slots=True)
class Stream:
    """The ordered history of one conversation.

    Passed to :meth:`agentsdk.agent.Agent.ask`, its events are the history the model
    sees (the network layer pre-populates it with a projection of a channel) and the
    turn's new events are appended to it.
    """

    stream_id: str = field(default_factory=new_id)
    """Identifier of the conversation (used e.g. for ``/log/{stream_id}.jsonl``)."""
    events: list[BaseEvent] = field(default_factory=list)
    """The events, oldest first."""

    def append(self, event: BaseEvent) -> None:
        """Add one event at the end."""
        self.events.append(event)

    def extend(self, events: Iterable[BaseEvent]) -> None:
        """Add events at the end, in order."""
        self.events.extend(events)

    def __iter__(self) -> Iterator[BaseEvent]:
        return iter(self.events)

    def __len__(self) -> int:
        return len(self.events)

    def to_jsonl(self) -> str:
        """One JSON object per line (``BaseEvent.to_dict``), newline-terminated; empty for no events."""
        return "".join(json.dumps(e.to_dict(), ensure_ascii=False) + "\n" for e in self.events)

    @classmethod
    def from_jsonl(cls, text: str, *, stream_id: str | None = None) -> Stream:
        """Read :meth:`to_jsonl` output back (blank lines are skipped).

        Raises ``ValueError`` naming the line number for a line that is not a known event.
        """
        events: list[BaseEvent] = []
        for lineno, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
                if not isinstance(data, dict):
                    raise ValueError("not a JSON object")
                events.append(event_from_dict(data))
            except (ValueError, TypeError) as exc:
                raise ValueError(f"line {lineno}: {exc}") from exc
        return cls(stream_id=stream_id or new_id(), events=events)
