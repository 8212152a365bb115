"""An expectation's ``ag2.channel.expectation_violated`` notice never makes an SDK agent run an LLM turn."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from agentsdk import Agent
from agentsdk.network import EV_EXPECTATION_VIOLATED, EV_TEXT, Hub, Passport
from agentsdk.testing import ScriptedOpenAIServer
from tests.agentsdk.network.llm import llm
from tests.clock import FakeClock
from tests.eventually import assert_eventually


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def hub(clock: FakeClock) -> AsyncIterator[Hub]:
    async with Hub.open(clock=clock) as h:
        yield h


async def test_the_default_handler_ignores_expectation_notices(
    hub: Hub, clock: FakeClock, servers: list[ScriptedOpenAIServer]
) -> None:
    server, config = llm(servers, rule=lambda req: f"reply {len(server.requests)}")
    alpha = await hub.register(Agent("alpha", config=config), Passport(name="alpha"))
    user = await hub.register_human(Passport(name="user", kind="human"))
    silence = {"expectations": {"max_silence": {"seconds": 60, "action": "notify_channel"}}}
    ch = await user.open(type="conversation", target="alpha", knobs=silence)
    await user.send(ch.channel_id, "hello")
    first = await user.next_envelope(predicate=lambda e: e.event_type == EV_TEXT and e.sender_id != user.agent_id)
    clock.offset += 61
    await hub.core.expectations.fire_due()
    notice = await user.next_envelope(predicate=lambda e: e.event_type == EV_EXPECTATION_VIOLATED)
    assert notice.event_data["expectation"] == "max_silence"
    # alpha acks an envelope once its handler returned: the notice was handled, and ran no turn
    await assert_eventually(lambda: hub.core.sessions._sessions[alpha.agent_id].cursor(ch.channel_id) >= notice.seq)
    assert len(server.requests) == 1
    await user.send(ch.channel_id, "still there?")
    second = await user.next_envelope(
        predicate=lambda e: e.event_type == EV_TEXT and e.sender_id != user.agent_id and e.seq > notice.seq
    )
    assert (first.text, second.text) == ("reply 1", "reply 2")
    assert len(server.requests) == 2
