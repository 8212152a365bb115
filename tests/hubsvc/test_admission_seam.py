"""Admission is one call (``Admission.admit``, docs/architecture.md): a channel's seed and a post pass
the same checks, so the same cause gets the same refusal — class (gRPC status), reason, message and
metadata — whichever way the envelope came in, and a refused seed creates nothing."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from agentnet.v1 import hub_pb2

from hubsvc.governance.policy import InboxRule, PeerSelector, Policy, Rule, RuleEntry
from netkernel.errors import AgentNetError, InboxFull, InvalidArgument
from tests.hubsvc.harness import EV_TEXT, RunningHub, make_envelope, open_channel, register, running_hub

Post = tuple[dict[str, Any], dict[str, Any]]
"""An envelope's event_data and its other fields."""


def negative_depth(_: RunningHub, cause: str) -> Post:
    # Answering a stored envelope of depth 0: a reply inherits its cause's depth, which must not
    # lift a negative one past the check.
    return {"text": "from below"}, {"depth": -1, "causation_id": cause}


def forged_dispatch(_: RunningHub, cause: str) -> Post:
    return {"text": "do it", "a2a": {"execution_id": "not-the-hubs"}}, {}


def bob_inbox_full(hub: RunningHub, cause: str) -> Post:
    entry = RuleEntry(id="bob-inbox", match=PeerSelector(names=("bob",)), rule=Rule(inbox=InboxRule(max_pending=1)))
    hub.set_policy(Policy(rules=(entry,)))
    return {"text": "one too many"}, {}


CAUSES: dict[str, tuple[Callable[[RunningHub, str], Post], type[AgentNetError]]] = {
    "negative depth": (negative_depth, InvalidArgument),
    "forged A2A dispatch": (forged_dispatch, InvalidArgument),
    "recipient's inbox full": (bob_inbox_full, InboxFull),
}


@pytest.mark.parametrize("cause", CAUSES)
async def test_a_refused_seed_and_a_refused_post_give_the_same_error(tmp_path: Path, cause: str) -> None:
    make_post, expected = CAUSES[cause]
    async with running_hub(tmp_path / "hub.db") as hub:
        alice = await register(hub.target, "alice")
        bob = await register(hub.target, "bob")
        for p in (alice, bob):
            await p.connect()
        try:
            channel_id = await open_channel(alice, "conversation", [bob])
            first = await alice.post(channel_id, EV_TEXT, {"text": "the one bob's inbox cap allows"})
            data, fields = make_post(hub, first.envelope_id)
            live = {ch.channel_id for ch in hub.live_channels()}

            with pytest.raises(expected) as post_refused:
                await alice.post(channel_id, EV_TEXT, data, **fields)
            seed = make_envelope("", EV_TEXT, data, **fields)
            request = hub_pb2.OpenChannelRequest(type="conversation", targets=[bob.name], seed_envelope=seed)
            with pytest.raises(expected) as seed_refused:
                await alice.rpc("OpenChannel", request)

            post_error, seed_error = post_refused.value, seed_refused.value
            assert (seed_error.reason, seed_error.message, seed_error.metadata) == (
                post_error.reason,
                post_error.message,
                post_error.metadata,
            )
            assert {ch.channel_id for ch in hub.live_channels()} == live  # the refused seed opened nothing
        finally:
            for p in (alice, bob):
                await p.close()
