"""Custom workflow transition targets: the registry both the hub and the SDK read (AG2's ``register_target``).

A workflow graph names its targets by type (``{"type": "round_robin"}``). A custom target is a
dataclass with a ``type`` name and a ``resolve(turn)`` method; registered under that name, a graph may
name it with its arguments as JSON (``{"type": "by_topic", "args": {"topics": {...}}}``), so the graph
stays data: stored in the channel's knobs, folded again by a restarted hub, read back by any client.

The hub builds the target from its arguments when the channel opens (a bad argument is refused
then, naming it) and calls ``resolve`` on every turn the transition decides, inside the channel's
fold: ``resolve`` must be a pure function of its :class:`TurnView` and the target's arguments (no
clock, no I/O, no randomness), or a restarted hub would fold the same WAL to another speaker.

The registry is process-wide, as AG2's default ``TransitionRegistry``: an embedded hub
(``agentsdk.network.Hub.open``) sees what the program registered; a hub process loads its
targets with ``--transition-targets package.module:attribute`` (every replica the same ones).
"""

from __future__ import annotations

import dataclasses
import importlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from netkernel.errors import InvalidArgument

BUILTIN_TARGET_TYPES = ("agent", "round_robin", "stay", "revert_to_initiator", "terminate")
"""The hub's own target types; a custom target may not take one of these names."""

_NAME = re.compile(r"[a-z][a-z0-9_.-]{0,63}")


@dataclass(frozen=True)
class TurnView:
    """What a custom target sees of the turn it decides: pure data, the same on every fold."""

    speaker: str
    """Agent id of the participant whose envelope ended the turn."""
    participants: tuple[str, ...]
    """Agent ids in participant order (the initiator first)."""
    initiator: str
    names: Mapping[str, str]
    """Agent id -> passport name, for every participant."""
    context: Mapping[str, Any]
    """The workflow's context vars after this turn's updates."""
    turns: int
    """Substantive turns taken so far, this one included."""
    tool: str | None
    """The routing tool the speaker called this turn (None: none)."""


@dataclass(frozen=True)
class TargetChoice:
    """What a custom target decided: who speaks next (a participant's id or name), or ``end_reason``
    to end the workflow (the channel closes with it)."""

    next_speaker: str | None = None
    end_reason: str | None = None


class CustomTargetType(Protocol):
    """What the registry takes: a dataclass type with a ``type`` name whose instances ``resolve``."""

    type: str

    def resolve(self, turn: TurnView) -> TargetChoice:
        """The decision for ``turn``."""
        ...


class TargetRegistry:
    """Custom target classes by ``type`` name. Registering a name again replaces the class, as AG2's."""

    def __init__(self) -> None:
        self._targets: dict[str, type[CustomTargetType]] = {}

    def register(self, cls: type[CustomTargetType]) -> type[CustomTargetType]:
        """Register ``cls`` under ``cls.type``; returns ``cls`` (usable as a class decorator).

        Raises InvalidArgument when ``cls`` is not a dataclass with a ``resolve`` method, or its
        ``type`` is not a lower-case name (``[a-z][a-z0-9_.-]``, at most 64) or is a built-in type."""
        name = getattr(cls, "type", None)
        if not isinstance(name, str) or not _NAME.fullmatch(name) or name in BUILTIN_TARGET_TYPES:
            raise InvalidArgument(
                f"custom transition target {cls!r} has type {name!r}: give it a ClassVar 'type', a lower-case "
                f"name of at most 64 characters ([a-z][a-z0-9_.-]) that is not one of {', '.join(BUILTIN_TARGET_TYPES)}"
            )
        if not dataclasses.is_dataclass(cls) or not callable(getattr(cls, "resolve", None)):
            raise InvalidArgument(
                f"custom transition target {name!r} ({cls!r}) must be a dataclass (its fields are its JSON "
                "arguments) with a resolve(turn) method returning a TargetChoice"
            )
        self._targets[name] = cls
        return cls

    def get(self, name: str) -> type[CustomTargetType] | None:
        """The class registered under ``name``, None when there is none."""
        return self._targets.get(name)

    def names(self) -> list[str]:
        """Every registered name, sorted."""
        return sorted(self._targets)

    def build(self, name: str, args: Mapping[str, Any]) -> CustomTargetType:
        """An instance of the class registered under ``name`` with ``args`` as its fields.

        Raises KeyError when nothing is registered under ``name``, and TypeError / ValueError
        (from the class) when the arguments do not fit it."""
        return self._targets[name](**args)


TARGETS = TargetRegistry()
"""The process-wide registry (AG2's ``TransitionRegistry.default()``)."""


def register_target(cls: type[CustomTargetType]) -> type[CustomTargetType]:
    """Register a custom transition target class on :data:`TARGETS` (AG2's ``register_target``)."""
    return TARGETS.register(cls)


def target_args(target: object) -> dict[str, Any]:
    """A custom target's arguments: its dataclass fields as a JSON-ready dict."""
    return {f.name: getattr(target, f.name) for f in dataclasses.fields(target)}  # type: ignore[arg-type]


def load_targets(spec: str) -> list[str]:
    """Import and register what ``package.module:attribute`` names (a class, or an iterable of
    classes), for each comma-separated entry of ``spec``; returns the names registered.

    Raises InvalidArgument saying which entry could not be imported or registered."""
    loaded: list[str] = []
    for entry in (part.strip() for part in spec.split(",")):
        if not entry:
            continue
        module_name, _, attr = entry.partition(":")
        if not module_name or not attr:
            raise InvalidArgument(f"--transition-targets entry {entry!r}: give package.module:attribute")
        try:
            value = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as err:
            raise InvalidArgument(f"--transition-targets entry {entry!r} cannot be imported: {err}") from None
        classes: Iterable[Any] = value if isinstance(value, list | tuple | set | frozenset) else [value]
        for cls in classes:
            loaded.append(TARGETS.register(cls).type)
    return loaded
