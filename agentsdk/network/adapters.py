"""The SDK half of each channel adapter: views, rendering, round-end envelopes and ``say``.

The hub half (:mod:`hubsvc.adapters`) enforces turn-taking and decides, per
participant and turn, which adapter tools are offered and which view a channel
type uses by default; DescribeChannel returns both (carried on
:class:`~agentsdk.network.channel.ChannelMetadata`, see ``docs/hub.md``). This
half tells the default handler how to run a turn on a channel of a given type:

* which view the LLM gets by default (:meth:`SdkAdapter.default_view`: the hub's
  ``default_view``) and how envelopes render into it (:meth:`SdkAdapter.render_envelope`);
* what text triggered the turn (:meth:`SdkAdapter.extract_turn_input`);
* which extra tools the LLM is offered this turn (:meth:`SdkAdapter.tools_for`: the
  hub's ``offered_tools``, built as SDK tools);
* what to post when the turn ends (:meth:`SdkAdapter.build_round_envelope`: EV_TEXT
  of the reply body, or — on workflow — an EV_PACKET with routing and context updates).

Workflow routing (:func:`routing_from_events`): the turn's routing is its first routing
call, in the order the LLM made them — a tool that returned a typed
:class:`~agentsdk.routing.Finish` or :class:`~agentsdk.routing.Handoff`, or a tool a
``tool_called`` transition names. A later routing call in the same turn still ran (its
result went to the LLM, it is listed in ``tools_called``) but does not route.

``adapter_for(type)`` returns the (shared, stateless apart from the tool cache)
adapter instance of a channel type.
"""

from __future__ import annotations

import weakref
from collections.abc import Collection, Iterable, Mapping, MutableMapping, Sequence
from typing import Annotated, Any, ClassVar, Protocol

from agentsdk.events import BaseEvent, ToolCallEvent, ToolResultEvent
from agentsdk.network.channel import ChannelMetadata
from agentsdk.network.deps import AGENT_CLIENT_DEP, CHANNEL_DEP
from agentsdk.network.views import ViewPolicy, view_for
from agentsdk.routing import Finish, Handoff
from agentsdk.tools import Inject, Tool
from netkernel.channel_types import CONSULTING_TYPE, CONVERSATION_TYPE, DISCUSSION_TYPE, WORKFLOW_TYPE
from netkernel.envelope import EV_PACKET, EV_TEXT, Envelope, text_envelope
from netkernel.errors import InvalidArgument
from netkernel.images import envelope_images
from netkernel.packet import (
    DEFAULT_FINISH_REASON,
    KIND_FINISH,
    KIND_HANDOFF,
    ROUTING,
    UPDATE_DELETE,
    UPDATE_SET,
    packet_data,
)

__all__ = [
    "ADAPTERS",
    "PENDING_CONTEXT_UPDATES_KEY",
    "ConsultingSdkAdapter",
    "ConversationSdkAdapter",
    "DiscussionSdkAdapter",
    "HubNames",
    "RoundReply",
    "SdkAdapter",
    "WorkflowSdkAdapter",
    "adapter_for",
    "make_say_tool",
    "queue_context_updates",
    "register_adapter",
    "routing_from_events",
    "routing_signal",
    "routing_tools",
    "routing_value",
]

PENDING_CONTEXT_UPDATES_KEY = "pending_context_updates"
"""Key in the turn's channel-state dict under which tools queue workflow context updates
(``{"set": {...}, "delete": [...]}``); the workflow round-end packet carries them."""


class HubNames(Protocol):
    """The name directory :meth:`SdkAdapter.build_round_envelope` may use (a :class:`~agentsdk.network.HubClient`)."""

    def id_for(self, name_or_id: str) -> str:
        """The agent id of a known passport name (ids and unknown names pass through)."""
        ...


class RoundReply(Protocol):
    """What :meth:`SdkAdapter.build_round_envelope` needs of a turn's outcome (an :class:`~agentsdk.agent.Reply`)."""

    @property
    def body(self) -> str:
        """The final assistant text."""
        ...

    @property
    def halted(self) -> bool:
        """True when the turn was halted (nothing to post)."""
        ...


def _channel_id_of(channel: Any) -> str | None:
    """The id of a Channel / ChannelMetadata / id string (None when there is none)."""
    if channel is None:
        return None
    if isinstance(channel, str):
        return channel or None
    value = getattr(channel, "channel_id", None)
    return value if isinstance(value, str) and value else None


def make_say_tool(client: Any = None) -> Tool:
    """Build the adapter-owned ``say`` tool.

    The LLM sees ``say(content, audience?, channel_id?)``; the current channel
    (``CHANNEL_DEP``) and the client (``AGENT_CLIENT_DEP``) are injected. ``client``
    is the fallback used when the dependencies carry no client.
    """

    async def say(
        content: str,
        audience: list[str] | None = None,
        channel_id: str | None = None,
        *,
        channel: Annotated[Any, Inject(CHANNEL_DEP)] = None,
        agent_client: Annotated[Any, Inject(AGENT_CLIENT_DEP)] = None,
    ) -> str:
        """Post an extra message to the current channel (or another channel you participate in).

        Your normal reply is already posted when your turn ends; use this only for an
        additional message or to speak in a different channel.

        Args:
            content: The message text.
            audience: Names (or agent ids) of the participants to address; omit to broadcast to everyone.
            channel_id: Another channel you participate in; omit for the current channel.
        """
        sender = agent_client if agent_client is not None else client
        if sender is None:
            raise RuntimeError("say needs a network client (it runs inside an agent's channel turn)")
        target = channel_id or _channel_id_of(channel)
        if target is None:
            raise ValueError("there is no current channel; pass channel_id to say where to post")
        env = await sender.send(target, content, audience=audience)
        who = "everyone" if audience is None else ", ".join(audience)
        posted_id = getattr(env, "envelope_id", "")
        return f"posted to channel {target} (to {who})" + (f"; envelope {posted_id}" if posted_id else "")

    return Tool(say)


def routing_tools(knobs: Mapping[str, Any]) -> set[str] | None:
    """Tool names that workflow transitions route on (``tool_called`` conditions, including ``and``).

    ``None`` when the knobs carry no transitions (so any tool may be the routing one).
    """
    transitions = knobs.get("transitions")
    if not isinstance(transitions, list):
        return None
    names: set[str] = set()

    def walk(condition: Any) -> None:
        if not isinstance(condition, Mapping):
            return
        if condition.get("type") == "tool_called" and isinstance(condition.get("tool"), str):
            names.add(condition["tool"])
        nested = condition.get("and")
        if isinstance(nested, list):
            for sub in nested:
                walk(sub)

    for transition in transitions:
        if isinstance(transition, Mapping):
            walk(transition.get("condition"))
    return names


def routing_value(route: Handoff | Finish, tool: str | None = None) -> dict[str, Any]:
    """The packet ``routing`` keys of a typed routing value (``tool``: the call that returned it)."""
    if isinstance(route, Finish):
        out: dict[str, Any] = {"kind": KIND_FINISH, "close_reason": route.reason}
        if route.summary:
            out["summary"] = route.summary
        return out
    out = {"kind": KIND_HANDOFF, "target": route.target}
    if route.reason:
        out["reason"] = route.reason
    return out


def routing_from_events(events: Iterable[BaseEvent], routing: Collection[str] | None = None) -> dict[str, Any]:
    """The packet ``routing`` object from a turn's events: the first routing call wins.

    ``tools_called`` lists (once each, in first-call order) the tools that ran without
    an error result. ``tool_called`` is the first of them that routes: one that returned a
    :class:`~agentsdk.routing.Finish` / :class:`~agentsdk.routing.Handoff` (its value adds
    ``kind`` and ``target`` / ``close_reason``, ``summary``, ``reason``), or one named in
    ``routing`` (any tool when ``routing`` is ``None``), whose call's string ``reason``
    argument, if any, becomes ``reason``. ``None`` when no call routes. A later routing call
    of the same turn ran, and is listed in ``tools_called``, but does not route.
    """
    calls: list[ToolCallEvent] = []
    results: dict[str, ToolResultEvent] = {}
    for event in events:
        if isinstance(event, ToolCallEvent):
            calls.append(event)
        elif isinstance(event, ToolResultEvent):
            results[event.call_id] = event
    ran = [c for c in calls if not (c.call_id in results and results[c.call_id].is_error)]
    out: dict[str, Any] = {"tool_called": None, "tools_called": list(dict.fromkeys(c.name for c in ran))}
    for call in ran:
        result = results.get(call.call_id)
        route = result.routing if result is not None else None
        if route is not None:
            out["tool_called"] = call.name
            out.update(routing_value(route))
            return out
        if routing is None or call.name in routing:
            out["tool_called"] = call.name
            reason = call.arguments.get("reason") if isinstance(call.arguments, Mapping) else None
            if isinstance(reason, str) and reason:
                out["reason"] = reason
            return out
    return out


def queue_context_updates(
    state: MutableMapping[str, Any],
    *,
    set: Mapping[str, Any] | None = None,
    delete: Iterable[str] | None = None,
) -> None:
    """Queue workflow context updates in the turn's channel-state dict (``ChannelStateInject``).

    The round-end EV_PACKET carries everything queued this turn. A later ``set`` of a
    key cancels its queued delete and vice versa.
    """
    pending = state.setdefault(PENDING_CONTEXT_UPDATES_KEY, {UPDATE_SET: {}, UPDATE_DELETE: []})
    set_part: dict[str, Any] = pending.setdefault(UPDATE_SET, {})
    delete_part: list[str] = pending.setdefault(UPDATE_DELETE, [])
    for key, value in (set or {}).items():
        set_part[key] = value
        if key in delete_part:
            delete_part.remove(key)
    for key in delete or ():
        set_part.pop(key, None)
        if key not in delete_part:
            delete_part.append(key)


def _pending_updates(state: Mapping[str, Any] | None) -> tuple[dict[str, Any], list[str]]:
    pending = (state or {}).get(PENDING_CONTEXT_UPDATES_KEY)
    if not isinstance(pending, Mapping):
        return {}, []
    set_part = pending.get(UPDATE_SET)
    delete_part = pending.get(UPDATE_DELETE)
    return (
        dict(set_part) if isinstance(set_part, Mapping) else {},
        [k for k in delete_part if isinstance(k, str)] if isinstance(delete_part, list | tuple) else [],
    )


class SdkAdapter:
    """The SDK half of a channel type; subclass per type and register with :func:`register_adapter`."""

    type: ClassVar[str] = ""
    """Channel type name, e.g. ``"consulting"``."""

    def __init__(self) -> None:
        self._tool_cache: weakref.WeakKeyDictionary[Any, list[Tool]] = weakref.WeakKeyDictionary()

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    # -- views ---------------------------------------------------------------------------

    def default_view(self, metadata: ChannelMetadata) -> ViewPolicy:
        """A fresh instance of the view the hub named as this channel's default (``metadata.default_view``).

        The full transcript for metadata not built from DescribeChannel.
        """
        return view_for(metadata.default_view.policy, metadata.default_view.recent_n)

    def render_envelope(self, env: Envelope) -> str | None:
        """The text the LLM sees for ``env``: EV_TEXT's text, EV_PACKET's body (``""`` when it has
        none but carries images, which the views add as image parts); None for anything else or empty."""
        if env.event_type not in (EV_TEXT, EV_PACKET):
            return None
        return env.text or ("" if envelope_images(env) else None)

    def extract_turn_input(self, envelope: Envelope) -> str:
        """The text that triggered this turn (EV_TEXT's text or EV_PACKET's body; ``""`` otherwise)."""
        return envelope.text

    # -- envelopes -----------------------------------------------------------------------

    def build_text_envelope(
        self,
        *,
        channel_id: str,
        sender_id: str,
        text: str,
        audience: list[str] | None = None,
        causation_id: str | None = None,
    ) -> Envelope:
        """An EV_TEXT envelope (``audience`` are agent ids; None = broadcast)."""
        return text_envelope(channel_id, sender_id, text, audience=audience, causation_id=causation_id)

    def build_packet_envelope(
        self,
        *,
        channel_id: str,
        sender_id: str,
        body: str,
        tool_called: str | None = None,
        context_set: Mapping[str, Any] | None = None,
        context_delete: Sequence[str] | None = None,
        tools_called: Sequence[str] | None = None,
        reason: str | None = None,
        handoff: Handoff | None = None,
        finish: Finish | None = None,
    ) -> Envelope:
        """A workflow EV_PACKET: routing, context updates and body in one envelope.

        ``tools_called`` defaults to ``[tool_called]`` (or ``[]``); ``reason`` says why (the
        packet's ``routing.reason``). A typed ``handoff`` (the next speaker) or ``finish``
        (end the workflow with its close reason) decides the turn on the hub instead of the
        transitions; give at most one.
        """
        if handoff is not None and finish is not None:
            raise ValueError("give either handoff= or finish=, not both: a packet routes one way")
        called = list(tools_called) if tools_called is not None else ([tool_called] if tool_called else [])
        routing: dict[str, Any] = {"tool_called": tool_called, "tools_called": called}
        if reason:
            routing["reason"] = reason
        route = handoff if handoff is not None else finish
        if route is not None:
            routing.update(routing_value(route))
        return Envelope(
            channel_id=channel_id,
            sender_id=sender_id,
            audience=None,
            event_type=EV_PACKET,
            event_data=packet_data(body, routing, context_set, context_delete),
        )

    def build_round_envelope(
        self,
        *,
        metadata: ChannelMetadata,
        sender_id: str,
        reply: RoundReply,
        events: Sequence[BaseEvent] | None = None,
        state: Mapping[str, Any] | None = None,
        hub: HubNames | None = None,
    ) -> Envelope | None:
        """What to post when the turn ends: EV_TEXT of the reply body; None when halted or empty.

        ``hub`` (the client's :class:`~agentsdk.network.HubClient`, ``client.hub``) is the name
        directory; the workflow adapter resolves a Handoff's target name with it."""
        if reply.halted or not reply.body:
            return None
        return self.build_text_envelope(channel_id=metadata.channel_id, sender_id=sender_id, text=reply.body)

    # -- tools ---------------------------------------------------------------------------

    def tools_for(
        self, client: Any, metadata: ChannelMetadata, state: Mapping[str, Any] | None, participant_id: str
    ) -> list[Tool]:
        """The adapter tools the hub offered ``participant_id`` this turn (``metadata.offered_tools``), as SDK tools.

        Only the names the SDK builds (``say``) count; nothing when the metadata was not
        built from DescribeChannel for ``participant_id``. ``state`` (the adapter state JSON)
        is there for custom adapters. The tools are built once per (adapter, client) and reused.
        """
        if participant_id != metadata.offered_to:
            return []
        built = {t.name: t for t in self._cached_tools(client)}
        return [built[name] for name in metadata.offered_tools if name in built]

    def _cached_tools(self, client: Any) -> list[Tool]:
        try:
            cached = self._tool_cache.get(client)
        except TypeError:  # not weak-referenceable: build fresh each time
            return [make_say_tool(client)]
        if cached is None:
            cached = [make_say_tool(client)]
            self._tool_cache[client] = cached
        return cached


class ConsultingSdkAdapter(SdkAdapter):
    """Consulting (strict one question, one reply)."""

    type = CONSULTING_TYPE


class ConversationSdkAdapter(SdkAdapter):
    """Conversation (free-form, two parties)."""

    type = CONVERSATION_TYPE


class DiscussionSdkAdapter(SdkAdapter):
    """Discussion (round robin)."""

    type = DISCUSSION_TYPE


def routing_signal(routing: Any) -> str | None:
    """The line a reader sees for a packet's routing decision, or None when it carries none to show.

    ``[handed off via <tool>] <reason>`` for a routing call with a reason or a Handoff,
    ``[finished via <tool>: <close reason>] <summary>`` for a Finish."""
    if not isinstance(routing, Mapping):
        return None
    tool = routing.get("tool_called") if isinstance(routing.get("tool_called"), str) else None
    reason = routing.get("reason") if isinstance(routing.get("reason"), str) else ""
    if routing.get("kind") == KIND_FINISH:
        close = routing.get("close_reason") if isinstance(routing.get("close_reason"), str) else DEFAULT_FINISH_REASON
        summary = routing.get("summary") if isinstance(routing.get("summary"), str) else ""
        head = f"[finished via {tool}: {close}]" if tool else f"[finished: {close}]"
        return f"{head} {summary}".rstrip()
    if routing.get("kind") == KIND_HANDOFF or reason:
        head = f"[handed off via {tool}]" if tool else "[handed off]"
        return f"{head} {reason}".rstrip()
    return None


class WorkflowSdkAdapter(SdkAdapter):
    """Workflow (transition graph): the round end is an EV_PACKET carrying routing and context updates."""

    type = WORKFLOW_TYPE

    def render_envelope(self, env: Envelope) -> str | None:
        """As the base adapter, with a packet's routing decision (:func:`routing_signal`) as a first line, so
        the next speaker reads why the turn came to it."""
        body = super().render_envelope(env)
        if env.event_type != EV_PACKET:
            return body
        signal = routing_signal(env.event_data.get(ROUTING))
        if signal is None:
            return body
        return f"{signal}\n{body}" if body else signal

    def extract_turn_input(self, envelope: Envelope) -> str:
        """The packet as :meth:`render_envelope` shows it (its routing line, then its body); EV_TEXT's text."""
        if envelope.event_type == EV_PACKET:
            return self.render_envelope(envelope) or ""
        return super().extract_turn_input(envelope)

    def build_round_envelope(
        self,
        *,
        metadata: ChannelMetadata,
        sender_id: str,
        reply: RoundReply,
        events: Sequence[BaseEvent] | None = None,
        state: Mapping[str, Any] | None = None,
        hub: HubNames | None = None,
    ) -> Envelope | None:
        """An EV_PACKET: routing from this turn's tool calls, queued context updates, the body.

        Posted even with an empty body when a call routes or context updates are queued; None
        when halted, and for a silent round — no body, no routing call, nothing queued — as AG2
        posts nothing for it: the turn stays with the speaker (no transition runs).
        ``events`` defaults to ``reply.events``; context updates come from
        ``state[PENDING_CONTEXT_UPDATES_KEY]`` (see :func:`queue_context_updates`). With
        ``hub``, a Handoff's target given as a known passport name is sent as its agent id
        (the hub accepts either; the id is exact).
        """
        if reply.halted:
            return None
        turn_events: Iterable[BaseEvent] = events if events is not None else getattr(reply, "events", [])
        routing = routing_from_events(turn_events, routing_tools(metadata.knobs))
        if hub is not None and isinstance(routing.get("target"), str):
            routing["target"] = hub.id_for(routing["target"])
        context_set, context_delete = _pending_updates(state)
        if not reply.body and routing["tool_called"] is None and not context_set and not context_delete:
            return None
        env = self.build_packet_envelope(
            channel_id=metadata.channel_id,
            sender_id=sender_id,
            body=reply.body,
            tool_called=routing["tool_called"],
            tools_called=routing["tools_called"],
            context_set=context_set,
            context_delete=context_delete,
        )
        env.event_data[ROUTING] = routing  # with the first routing call's reason and typed value
        return env


ADAPTERS: dict[str, SdkAdapter] = {
    a.type: a for a in (ConsultingSdkAdapter(), ConversationSdkAdapter(), DiscussionSdkAdapter(), WorkflowSdkAdapter())
}
"""SDK adapters by channel type."""


def register_adapter(adapter: SdkAdapter) -> None:
    """Register the SDK half of a custom channel type (replaces any adapter of that type)."""
    if not adapter.type:
        raise ValueError(f"{type(adapter).__name__} has no channel type name; set its `type` class attribute")
    ADAPTERS[adapter.type] = adapter


def adapter_for(channel_type: str) -> SdkAdapter:
    """The SDK adapter of ``channel_type``; InvalidArgument naming the known types if there is none."""
    adapter = ADAPTERS.get(channel_type)
    if adapter is None:
        known = ", ".join(sorted(ADAPTERS))
        raise InvalidArgument(
            f"no SDK adapter for channel type {channel_type!r}; known types: {known}. "
            "Register one with agentsdk.network.adapters.register_adapter(...).",
            metadata={"channel_type": channel_type},
        )
    return adapter
