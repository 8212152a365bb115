"""The network tools' arguments as pydantic models: one source for the JSON schemas
(ListTools, and the SDK's plugin tools) and for the validation (CallTool, and the SDK
before a call leaves the process).

The five plugin tools (identity-level, any channel) and the adapter tool ``say``
take the actions and arguments listed in ``docs/network.md``.
"""

from __future__ import annotations

import copy
import functools
import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from netkernel.channel_types import DEFAULT_WAIT_SECONDS, ChannelTypeName


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PeersArgs(_Args):
    """Discover other agents. action="find" lists peers (not you) filtered by query / capability;
    action="describe" returns one peer's {passport, resume, skill_md}."""

    action: Literal["find", "describe"]
    query: str | None = Field(None, description="find: case-insensitive text to match")
    capability: str | None = Field(None, description="find: a capability the peer must claim")
    sort_by: Literal["name", "registered_at", "last_seen"] | None = None
    limit: int = Field(20, ge=1, le=1000)
    name: str | None = Field(None, description="describe: the peer's name")


class ChannelsArgs(_Args):
    """Channel lifecycle. action="list" (state), "open" (type, target, knobs?, intent?, ttl?, message? — the
    message is sent as the first envelope once the channel is OPENED), "info" (channel_id), "close"
    (channel_id, default the current channel)."""

    action: Literal["list", "open", "info", "close"]
    state: Literal["active", "all"] = "active"
    type: ChannelTypeName | None = None
    target: str | list[str] | None = Field(None, description="open: peer name, or names for discussion/workflow")
    knobs: dict[str, Any] | None = Field(None, description="open: adapter options")
    intent: str | None = None
    ttl: float | None = Field(None, gt=0, description="open: channel lifetime in seconds")
    message: str | None = Field(None, description="open: first message, sent on your behalf once OPENED")
    channel_id: str | None = None


class TasksArgs(_Args):
    """Tasks. Active (inside your own task): action="progress" (payload), "complete" (result?).
    Observation: "list" (scope, state, limit), "status" (task_id), "wait" (task_id, timeout, poll_interval),
    "cancel" (task_id, reason?): ask the owner of a task that is yours or in a channel you are in to cancel it."""

    action: Literal["progress", "complete", "list", "status", "wait", "cancel"]
    payload: Any = Field(None, description="progress: any JSON value")
    result: Any = Field(None, description="complete: any JSON value")
    scope: Literal["own", "all"] = "own"
    state: Literal["active", "all"] = "active"
    limit: int = Field(20, ge=1, le=1000)
    task_id: str | None = None
    timeout: float = Field(DEFAULT_WAIT_SECONDS, gt=0)
    poll_interval: float = Field(0.1, gt=0)
    reason: str | None = Field(None, description="cancel: why, shown to the task's owner")


class ContextArgs(_Args):
    """Past content. action="search" (query, scope, limit): excerpts whose text contains the query
    (case-insensitive); "quote" (speaker, recent_n, channel_id?): that speaker's latest texts."""

    action: Literal["search", "quote"]
    query: str | None = None
    scope: Literal["channel", "knowledge"] = "channel"
    limit: int = Field(10, ge=1, le=1000)
    speaker: str | None = None
    recent_n: int = Field(1, ge=1, le=1000)
    channel_id: str | None = None


class DelegateArgs(_Args):
    """One-shot consultation: opens a consulting channel with target, sends prompt, waits for the single
    reply and returns its text. Safe to call during any turn."""

    target: str = Field(description="peer name")
    prompt: str
    capability: str | None = None
    timeout: float = Field(DEFAULT_WAIT_SECONDS, gt=0)


class SayArgs(_Args):
    """Post a text message (EV_TEXT) into the current channel, or into another channel you participate in
    (channel_id). audience: peer names to address (omit to broadcast)."""

    content: str
    audience: list[str] | None = None
    channel_id: str | None = None


PLUGIN_TOOLS: dict[str, type[_Args]] = {
    "peers": PeersArgs,
    "channels": ChannelsArgs,
    "tasks": TasksArgs,
    "context": ContextArgs,
    "delegate": DelegateArgs,
}
ADAPTER_TOOLS: dict[str, type[_Args]] = {"say": SayArgs}
ALL_TOOLS: dict[str, type[_Args]] = {**PLUGIN_TOOLS, **ADAPTER_TOOLS}


def description(model: type[BaseModel]) -> str:
    """The tool description (the model's docstring on one line)."""
    return " ".join((model.__doc__ or "").split())


def parameters_schema(model: type[BaseModel]) -> dict[str, Any]:
    """JSON schema of the arguments object (a copy of its own: the caller may change it)."""
    return copy.deepcopy(_schema(model))


@functools.lru_cache(maxsize=64)
def parameters_schema_json(model: type[BaseModel]) -> str:
    """:func:`parameters_schema` as JSON text."""
    return json.dumps(_schema(model))


@functools.lru_cache(maxsize=64)
def _schema(model: type[BaseModel]) -> dict[str, Any]:
    """The schema, built once per model: pydantic takes milliseconds to build one, and every
    agent registered (its five plugin tools) and every ListTools answer asked for them again."""
    schema = model.model_json_schema()
    schema.pop("description", None)
    schema.pop("title", None)
    return schema
