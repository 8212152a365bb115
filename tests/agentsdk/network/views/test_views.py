"""Views: projection of a channel's WAL into one participant's LLM history."""

from __future__ import annotations

import functools

import pytest

from agentsdk.config import events_to_messages
from agentsdk.events import BaseEvent, CompactionSummary, ModelMessage, ModelRequest, TextInput
from agentsdk.network.adapters import adapter_for
from agentsdk.network.views import (
    VIEW_POLICIES,
    FullTranscript,
    NamedTranscript,
    NamedWindowedSummary,
    ViewPolicy,
    WindowedSummary,
    default_name_resolver,
    register_view_policy,
    view_for,
)
from netkernel.envelope import EV_CHANNEL_OPENED, EV_CONTEXT_SET, EV_PACKET, Envelope
from tests.agentsdk.network.views.seed_custom_view import FromOneOnly
from tests.agentsdk.network.views.support import NAMES, env, meta, text

render = adapter_for("conversation").render_envelope
META = meta("discussion", ("a1", "b2", "c3"))


def name_for(agent_id: str) -> str:
    return NAMES.get(agent_id, agent_id)


def lines(events: list[BaseEvent]) -> list[tuple[str, str]]:
    """(kind, text) per event: "me" for ModelMessage, "them" for ModelRequest, "gap" for the placeholder."""
    out: list[tuple[str, str]] = []
    for e in events:
        if isinstance(e, ModelMessage):
            out.append(("me", e.text))
        elif isinstance(e, ModelRequest):
            assert len(e.parts) == 1 and isinstance(e.parts[0], TextInput)
            out.append(("them", e.text))
        elif isinstance(e, CompactionSummary):
            out.append(("gap", str(e.events_dropped)))
        else:  # pragma: no cover - a view emitted something unexpected
            raise AssertionError(f"unexpected event {e!r}")
    return out


async def project(view: ViewPolicy, wal: list[Envelope], who: str = "a1", **kw: object) -> list[tuple[str, str]]:
    return lines(await view.project(wal, participant_id=who, channel=META, render_envelope=render, **kw))  # type: ignore[arg-type]


WAL = [
    env("hub", EV_CHANNEL_OPENED),
    text("a1", "q1"),
    env("b2", "myapp.review_request", {"text": "custom"}),
    text("b2", "r1"),
    env("c3", EV_CONTEXT_SET, {"set": {"k": 1}}),
    env("c3", EV_PACKET, {"routing": {}, "body": "p1"}),
    text("b2", ""),  # renders to None → skipped
    text("a1", "q2"),
]


async def test_full_transcript_roles_order_and_skips() -> None:
    assert await project(FullTranscript(), WAL) == [
        ("me", "q1"),
        ("them", "r1"),
        ("them", "p1"),
        ("me", "q2"),
    ]
    # From bob's seat the roles flip.
    assert await project(FullTranscript(), WAL, "b2") == [
        ("them", "q1"),
        ("me", "r1"),
        ("them", "p1"),
        ("them", "q2"),
    ]


async def test_render_none_is_skipped_by_the_view() -> None:
    def only_bob(e: Envelope) -> str | None:
        return e.text if e.sender_id == "b2" else None

    out = await FullTranscript().project(WAL, participant_id="a1", channel=META, render_envelope=only_bob)
    assert lines(out) == [("them", "r1"), ("them", "")]  # "" is not None, so it is kept


async def test_audience_is_honoured_by_every_builtin() -> None:
    wal = [text("a1", "to bob only", ["b2"]), text("b2", "all"), text("b2", "to alice", ["a1"])]
    for view in (FullTranscript(), WindowedSummary(), NamedTranscript(), NamedWindowedSummary()):
        carol = await project(view, wal, "c3", name_for=name_for)
        assert [t for _, t in carol] == (["[bob]: all"] if "named" in view.name else ["all"]), view
        bob = await project(view, wal, "b2", name_for=name_for)
        assert [k for k, _ in bob] == ["them", "me", "me"], view
        alice = await project(view, wal, "a1")  # the sender always sees what it said
        assert [k for k, _ in alice] == ["me", "them", "them"], view


async def test_named_views_prefix_other_senders_only() -> None:
    for view in (NamedTranscript(), NamedWindowedSummary(recent_n=10)):
        assert await project(view, WAL, name_for=name_for) == [
            ("me", "q1"),
            ("them", "[bob]: r1"),
            ("them", "[carol]: p1"),
            ("me", "q2"),
        ]
        # Default resolver: the agent id.
        assert (await project(view, WAL))[1] == ("them", "[b2]: r1")
    assert default_name_resolver("xyz") == "xyz"


async def test_unnamed_views_ignore_name_for() -> None:
    assert (await project(FullTranscript(), WAL, name_for=name_for))[1] == ("them", "r1")
    assert (await project(WindowedSummary(), WAL, name_for=name_for))[1] == ("them", "r1")


async def test_windowed_summary_window_and_placeholder() -> None:
    wal = [text("a1" if i % 2 == 0 else "b2", f"m{i}") for i in range(7)]
    assert await project(WindowedSummary(recent_n=7), wal) == [
        ("me" if i % 2 == 0 else "them", f"m{i}") for i in range(7)
    ]
    out = await WindowedSummary(recent_n=3).project(wal, participant_id="a1", channel=META, render_envelope=render)
    assert lines(out) == [("gap", "4"), ("me", "m4"), ("them", "m5"), ("me", "m6")]
    summary = out[0]
    assert isinstance(summary, CompactionSummary)
    assert "4 earlier turns" in summary.summary and "last 3" in summary.summary


async def test_windowed_placeholders_name_the_omitted_speakers() -> None:
    # Who said what was cut, not only how much: names through name_for, the reader as "you", sorted.
    wal = [text(s, f"m{i}") for i, s in enumerate(["c3", "a1", "b2", "c3", "b2"])]
    for view in (WindowedSummary(recent_n=2), NamedWindowedSummary(recent_n=2)):
        out = await view.project(wal, participant_id="a1", channel=META, render_envelope=render, name_for=name_for)
        summary = out[0]
        assert isinstance(summary, CompactionSummary) and summary.events_dropped == 3
        assert summary.summary == "3 earlier turns of this channel omitted (from bob, carol, you); the last 2 follow."
    # Without a resolver the speakers are their agent ids.
    out = await WindowedSummary(recent_n=4).project(wal, participant_id="a1", channel=META, render_envelope=render)
    assert isinstance(out[0], CompactionSummary) and "(from c3)" in out[0].summary


async def test_windowed_placeholder_names_a_bounded_number_of_speakers() -> None:
    from agentsdk.network.views import MAX_NAMED_SPEAKERS

    speakers = [f"p{i:02d}" for i in range(MAX_NAMED_SPEAKERS + 3)]
    wal = [text(s, f"from {s}") for s in speakers] + [text("a1", "mine")]
    out = await WindowedSummary(recent_n=1).project(wal, participant_id="a1", channel=META, render_envelope=render)
    summary = out[0]
    assert isinstance(summary, CompactionSummary)
    assert ", ".join(speakers[:MAX_NAMED_SPEAKERS]) + " and 3 others)" in summary.summary
    assert speakers[-1] not in summary.summary


async def test_window_counts_only_what_the_participant_could_see() -> None:
    # Invisible, lifecycle and unrenderable envelopes neither fill the window nor count as omitted.
    wal = [
        text("a1", "m0"),
        text("b2", "secret", ["c3"]),
        env("hub", EV_CHANNEL_OPENED),
        text("b2", "m1"),
        text("b2", ""),
        text("a1", "m2"),
    ]
    assert await project(WindowedSummary(recent_n=2), wal) == [("gap", "1"), ("them", "m1"), ("me", "m2")]
    one = await project(WindowedSummary(recent_n=2), wal[:4])
    assert one == [("me", "m0"), ("them", "m1")]
    single = await WindowedSummary(recent_n=1).project(
        [text("a1", "x"), text("b2", "y")], participant_id="a1", channel=META, render_envelope=render
    )
    assert isinstance(single[0], CompactionSummary) and "1 earlier turn " in single[0].summary


async def test_named_windowed_summary_prefixes_inside_the_window() -> None:
    wal = [text(s, f"m{i}") for i, s in enumerate(["a1", "b2", "c3", "b2", "c3"])]
    assert await project(NamedWindowedSummary(recent_n=2), wal, name_for=name_for) == [
        ("gap", "3"),
        ("them", "[bob]: m3"),
        ("them", "[carol]: m4"),
    ]


@pytest.mark.parametrize("bad", [0, -1, True, 2.5])
def test_recent_n_must_be_positive(bad: object) -> None:
    with pytest.raises(ValueError, match="recent_n"):
        WindowedSummary(recent_n=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="recent_n"):
        NamedWindowedSummary(recent_n=bad)  # type: ignore[arg-type]


async def test_empty_wal_projects_nothing() -> None:
    for view in (FullTranscript(), WindowedSummary(), NamedTranscript(), NamedWindowedSummary()):
        assert await project(view, []) == []


def test_names_are_unique_and_registered() -> None:
    views = [FullTranscript(), WindowedSummary(), NamedTranscript(), NamedWindowedSummary()]
    assert [v.name for v in views] == [
        "full_transcript",
        "windowed_summary",
        "named_transcript",
        "named_windowed_summary",
    ]
    for v in views:
        assert isinstance(v, ViewPolicy)
        assert type(view_for(v.name)) is type(v)
        assert VIEW_POLICIES[v.name] is type(v)


def test_view_for_recent_n() -> None:
    w = view_for("windowed_summary", 12)
    assert isinstance(w, WindowedSummary) and w.recent_n == 12
    assert view_for("windowed_summary").recent_n == 10  # type: ignore[attr-defined]
    nw = view_for("named_windowed_summary", recent_n=6)
    assert isinstance(nw, NamedWindowedSummary) and nw.recent_n == 6
    assert isinstance(view_for("full_transcript", 5), FullTranscript)  # ignored by full views
    assert repr(w) == "WindowedSummary(recent_n=12)"
    with pytest.raises(ValueError, match=r"unknown view policy 'nope'.*full_transcript"):
        view_for("nope")


async def test_projection_maps_to_chat_roles() -> None:
    wal = [text(s, f"m{i}") for i, s in enumerate(["a1", "b2", "a1", "b2"])]
    history = await WindowedSummary(recent_n=2).project(wal, participant_id="a1", channel=META, render_envelope=render)
    roles = [m["role"] for m in events_to_messages([], history)]
    assert roles == ["system", "assistant", "user"]


async def test_seed_custom_view_from_one_only() -> None:
    view: ViewPolicy = FromOneOnly("b2")  # an explicit subclass of the Protocol is a ViewPolicy
    assert isinstance(view, ViewPolicy) and isinstance(view, FromOneOnly) and view.name == "from_one_only"
    assert await project(view, WAL) == [("them", "r1")]
    assert await project(FromOneOnly("a1"), WAL) == [("me", "q1"), ("me", "q2")]
    # Works as the per-channel view the default handler would use, with the adapter's renderer.
    packet_bob = env("b2", EV_PACKET, {"body": "not text"})
    assert await project(view, [*WAL, packet_bob], name_for=name_for) == [("them", "r1")]


async def test_custom_view_can_be_registered() -> None:
    register_view_policy("from_bob", functools.partial(FromOneOnly, "b2"))
    try:
        view = view_for("from_bob", recent_n=3)  # recent_n ignored: the factory does not take it
        assert isinstance(view, FromOneOnly) and view.sender_id == "b2"
        with pytest.raises(ValueError, match="already registered"):
            register_view_policy("from_bob", FullTranscript)
    finally:
        VIEW_POLICIES.pop("from_bob", None)
