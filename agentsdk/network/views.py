"""Views: what each LLM sees of a channel's history.

A :class:`ViewPolicy` projects the WAL slice a participant may see into the
:class:`~agentsdk.events.BaseEvent` s the framework feeds into the LLM turn as
pre-populated history. The channel's adapter supplies ``render_envelope`` (so
views stay adapter-neutral) and optionally ``name_for`` (agent id → name).

Built-ins (every one honours audience through :func:`netkernel.envelope.readable_by`
and projects only substantive envelopes whose rendering is not ``None``; lifecycle
and custom event types never appear):

* :class:`FullTranscript` — everything, in order;
* :class:`WindowedSummary` — the last ``recent_n``, after a :class:`~agentsdk.events.CompactionSummary`
  placeholder counting what was left out and naming who said it;
* :class:`NamedTranscript` / :class:`NamedWindowedSummary` — the same with every
  line from someone else prefixed ``[<sender name>]: ``.

Which of them a channel type uses by default is the hub's decision: DescribeChannel
names it (``default_view``, see the table in ``docs/network.md``) and
:func:`view_for` builds it.

Own envelopes become :class:`~agentsdk.events.ModelMessage` (the assistant's
voice); everyone else's become ``ModelRequest([TextInput(text), *images])``: the images an
envelope carries (``event_data["images"]``, :mod:`netkernel.images`) follow its text as
:class:`~agentsdk.events.ImageInput` parts (:func:`request_parts`), so the model sees them. An
assistant message holds text only, so the images of one's own envelopes are not projected.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from agentsdk.events import BaseEvent, CompactionSummary, ImageInput, ModelMessage, ModelRequest, RequestPart, TextInput
from agentsdk.network.channel import ChannelMetadata
from netkernel.channel_types import (
    VIEW_FULL_TRANSCRIPT,
    VIEW_NAMED_TRANSCRIPT,
    VIEW_NAMED_WINDOWED_SUMMARY,
    VIEW_WINDOWED_SUMMARY,
)
from netkernel.envelope import SUBSTANTIVE_EVENT_TYPES, Envelope, readable_by
from netkernel.images import envelope_images

__all__ = [
    "VIEW_POLICIES",
    "EnvelopeRenderer",
    "FullTranscript",
    "NameResolver",
    "NamedTranscript",
    "NamedWindowedSummary",
    "ViewPolicy",
    "WindowedSummary",
    "default_name_resolver",
    "register_view_policy",
    "request_parts",
    "view_for",
]

EnvelopeRenderer = Callable[[Envelope], str | None]
"""Renders an envelope as the text the LLM sees, or ``None`` to leave it out (supplied by the adapter)."""

NameResolver = Callable[[str], str]
"""Maps an agent id to the label shown in named views (e.g. ``HubClient.name_for``)."""


def default_name_resolver(agent_id: str) -> str:
    """The identity resolver: labels a sender by its agent id."""
    return agent_id


@runtime_checkable
class ViewPolicy(Protocol):
    """Projects a channel's WAL into one participant's LLM history.

    Implement it structurally or subclass it explicitly (``class MyView(ViewPolicy)``);
    give each view a unique ``name``.
    """

    name: str
    """Unique registry name, e.g. ``"full_transcript"``."""

    async def project(
        self,
        wal: list[Envelope],
        *,
        participant_id: str,
        channel: ChannelMetadata,
        render_envelope: EnvelopeRenderer,
        name_for: NameResolver = default_name_resolver,
    ) -> list[BaseEvent]:
        """Return the history events ``participant_id`` sees of ``wal`` (in admission order)."""
        ...


def _projectable(
    wal: Sequence[Envelope], participant_id: str, render_envelope: EnvelopeRenderer
) -> list[tuple[Envelope, str]]:
    """(envelope, rendered text) for every visible substantive envelope that renders to text.

    Visible = broadcast, addressed to ``participant_id``, or sent by it.
    """
    out: list[tuple[Envelope, str]] = []
    for env in wal:
        if env.event_type not in SUBSTANTIVE_EVENT_TYPES:
            continue
        if not readable_by(env, participant_id):
            continue  # addressed to others (a sender always sees what it said)
        text = render_envelope(env)
        if text is None:
            continue
        out.append((env, text))
    return out


def request_parts(env: Envelope, text: str) -> list[RequestPart]:
    """The parts of a user turn for ``env`` rendered as ``text``: the text (when not empty), then
    one :class:`~agentsdk.events.ImageInput` per image the envelope carries."""
    parts: list[RequestPart] = [TextInput(text)] if text else []
    parts.extend(ImageInput.from_event_data(item) for item in envelope_images(env))
    return parts or [TextInput(text)]


def _to_event(env: Envelope, text: str, participant_id: str, name_for: NameResolver | None) -> BaseEvent:
    """Own lines → ModelMessage; others → ModelRequest (text, then images), prefixed with the
    sender's name when named."""
    if env.sender_id == participant_id:
        return ModelMessage(text)
    if name_for is not None:
        label = f"[{name_for(env.sender_id)}]:"
        text = f"{label} {text}" if text else label
    return ModelRequest(request_parts(env, text))


def _check_recent_n(recent_n: int) -> int:
    # bool is an int subclass; recent_n=True is always a mistake.
    if isinstance(recent_n, bool) or not isinstance(recent_n, int) or recent_n < 1:
        raise ValueError(f"recent_n must be a positive integer (how many recent envelopes to show); got {recent_n!r}")
    return recent_n


MAX_NAMED_SPEAKERS = 10
"""Most speakers a windowed view's placeholder names; more are counted (``and 3 others``)."""


def _omitted_summary(
    omitted: Sequence[Envelope], shown: int, participant_id: str, name_for: NameResolver
) -> CompactionSummary:
    """The placeholder for the envelopes cut from the window: how many, and who said them.

    Speakers are named (``name_for``; the participant itself as ``you``), sorted, at most
    :data:`MAX_NAMED_SPEAKERS` of them."""
    names = sorted({"you" if e.sender_id == participant_id else name_for(e.sender_id) for e in omitted})
    listed = ", ".join(names[:MAX_NAMED_SPEAKERS])
    if len(names) > MAX_NAMED_SPEAKERS:
        rest = len(names) - MAX_NAMED_SPEAKERS
        listed += f" and {rest} other{'s' if rest != 1 else ''}"
    count = len(omitted)
    turns = "turn" if count == 1 else "turns"
    return CompactionSummary(
        summary=f"{count} earlier {turns} of this channel omitted (from {listed}); the last {shown} follow.",
        events_dropped=count,
    )


class FullTranscript(ViewPolicy):
    """Every visible substantive envelope, in order; speakers told apart only by role (two parties)."""

    name = VIEW_FULL_TRANSCRIPT
    _named = False

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    async def project(
        self,
        wal: Sequence[Envelope],
        *,
        participant_id: str,
        channel: ChannelMetadata,
        render_envelope: EnvelopeRenderer,
        name_for: NameResolver = default_name_resolver,
    ) -> list[BaseEvent]:
        """All of ``participant_id``'s visible substantive envelopes as history events."""
        resolver = name_for if self._named else None
        return [
            _to_event(env, text, participant_id, resolver)
            for env, text in _projectable(wal, participant_id, render_envelope)
        ]


class NamedTranscript(FullTranscript):
    """Like :class:`FullTranscript`, but lines from others are prefixed ``[<sender name>]: ``."""

    name = VIEW_NAMED_TRANSCRIPT
    _named = True


class WindowedSummary(ViewPolicy):
    """The last ``recent_n`` visible substantive envelopes, after a placeholder counting the omitted
    ones and naming their speakers."""

    name = VIEW_WINDOWED_SUMMARY
    _named = False

    def __init__(self, recent_n: int = 10) -> None:
        self.recent_n = _check_recent_n(recent_n)
        """How many of the most recent envelopes are shown."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(recent_n={self.recent_n})"

    async def project(
        self,
        wal: Sequence[Envelope],
        *,
        participant_id: str,
        channel: ChannelMetadata,
        render_envelope: EnvelopeRenderer,
        name_for: NameResolver = default_name_resolver,
    ) -> list[BaseEvent]:
        """The window; a leading :class:`CompactionSummary` if any were cut.

        The placeholder says how many were left out (``events_dropped``) and names who said
        them (``name_for``, you as ``you``), e.g. ``"3 earlier turns of this channel omitted
        (from analyst, you); the last 10 follow."``"""
        items = _projectable(wal, participant_id, render_envelope)
        resolver = name_for if self._named else None
        omitted = max(len(items) - self.recent_n, 0)
        out: list[BaseEvent] = []
        if omitted:
            cut = [env for env, _ in items[:omitted]]
            out.append(_omitted_summary(cut, self.recent_n, participant_id, name_for))
        out.extend(_to_event(env, text, participant_id, resolver) for env, text in items[omitted:])
        return out


class NamedWindowedSummary(WindowedSummary):
    """Like :class:`WindowedSummary`, but lines from others are prefixed ``[<sender name>]: ``."""

    name = VIEW_NAMED_WINDOWED_SUMMARY
    _named = True


VIEW_POLICIES: dict[str, Callable[..., ViewPolicy]] = {
    FullTranscript.name: FullTranscript,
    WindowedSummary.name: WindowedSummary,
    NamedTranscript.name: NamedTranscript,
    NamedWindowedSummary.name: NamedWindowedSummary,
}
"""View factories by name (adapters name their default view here)."""


def register_view_policy(name: str, factory: Callable[..., ViewPolicy]) -> None:
    """Make a custom view available to :func:`view_for` (and so to per-channel overrides) under ``name``."""
    if name in VIEW_POLICIES and VIEW_POLICIES[name] is not factory:
        raise ValueError(f"a view policy named {name!r} is already registered; pick a unique name")
    VIEW_POLICIES[name] = factory


def _accepts_recent_n(factory: Callable[..., ViewPolicy]) -> bool:
    try:
        return "recent_n" in inspect.signature(factory).parameters
    except (TypeError, ValueError):  # builtins / C callables without a signature
        return False


def view_for(name: str, recent_n: int | None = None) -> ViewPolicy:
    """Instantiate the registered view ``name``.

    ``recent_n`` is passed to views that take it (the windowed ones; ``None`` keeps
    their default) and ignored by the others. Raises ``ValueError`` for an unknown name.
    """
    factory = VIEW_POLICIES.get(name)
    if factory is None:
        known = ", ".join(sorted(VIEW_POLICIES))
        raise ValueError(f"unknown view policy {name!r}; registered views: {known}")
    if recent_n is not None and _accepts_recent_n(factory):
        return factory(recent_n=recent_n)
    return factory()
