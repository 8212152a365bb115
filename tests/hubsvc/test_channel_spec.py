"""ChannelSpec.derived: what an adapter reads from its knobs on every fold is computed once per spec,
and the shortcuts folds take with it give the same state as computing everything each time."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hubsvc.adapters import ADAPTERS
from hubsvc.adapters.base import ChannelSpec
from hubsvc.adapters.payloads import canonical_json
from hubsvc.adapters.workflow import WorkflowState
from netkernel.envelope import EV_PACKET, Envelope

SPEC = ChannelSpec(channel_id="c", type="conversation", initiator="a", participants=("a", "b"), knobs={"n": 1})


def test_a_derived_value_is_computed_once_per_spec() -> None:
    calls: list[ChannelSpec] = []

    def compute(spec: ChannelSpec) -> int:
        calls.append(spec)
        return int(spec.knobs["n"]) + 1

    assert SPEC.derived(compute) == SPEC.derived(compute) == 2
    assert calls == [SPEC]
    other = replace(SPEC, knobs={"n": 5})  # a new spec derives afresh
    assert other.derived(compute) == 6
    assert len(calls) == 2
    assert SPEC == replace(SPEC)  # the memo is not part of the spec's value


def test_a_computation_that_raises_is_not_kept() -> None:
    spec = replace(SPEC)
    attempts = []

    def compute(spec: ChannelSpec) -> int:
        attempts.append(1)
        raise ValueError("bad knob")

    for _ in range(2):
        with pytest.raises(ValueError):
            spec.derived(compute)
    assert len(attempts) == 2


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)


@given(st.dictionaries(st.text(max_size=8), json_values, max_size=4), st.sampled_from([None, "approve"]))
def test_a_packet_without_context_updates_keeps_the_context_text_a_full_recompute_gives(
    context: dict[str, Any], tool: str | None
) -> None:
    adapter = ADAPTERS["workflow"]
    knobs = {"transitions": [{"condition": {"type": "always"}, "target": {"type": "round_robin"}}], "max_turns": 9}
    spec = ChannelSpec(channel_id="c", type="workflow", initiator="a", participants=("a", "b"), knobs=knobs)
    spec = replace(spec, knobs=adapter.validate_create(spec))
    state = WorkflowState(current_speaker="a", context_json=canonical_json(context))
    env = Envelope("c", "a", None, EV_PACKET, {"routing": {"tool_called": tool}, "body": "b"})
    after = adapter.fold(spec, state, env)
    assert after.context_json == canonical_json(state.context)
    assert (after.turns, after.current_speaker) == (1, "b")
