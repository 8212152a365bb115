"""Nested calls an agent makes at once while answering one A2A call share one call token.

The hub caps the call tokens one execution holds (``a2a_max_tokens``), so the SDK must not
ask for a token per nested call: concurrent calls of one dispatch wait for a single
``RefreshCallToken``, and after an expiry for a single replacement.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from agentsdk import Agent, tool
from agentsdk.a2a import A2ASettings, current_dispatch
from agentsdk.events import ToolCall
from agentsdk.network import AgentClient, Hub, Passport
from agentsdk.testing import ScriptedOpenAIServer
from hubsvc.core.options import HubOptions
from tests.agentsdk.network.llm import llm
from tests.clock import FakeClock

ENABLED = A2ASettings(enabled=True)
FAN_OUT = 5


async def test_concurrent_nested_calls_share_one_call_token_under_a_small_cap(
    servers: list[ScriptedOpenAIServer],
) -> None:
    clock = FakeClock()
    options = HubOptions(a2a_token_ttl=300, a2a_max_tokens=2)
    async with Hub.open(clock=clock, options=options) as hub:
        _c_llm, c_config = llm(servers, rule=lambda _request: "C's answer")
        c = await hub.register(Agent("c", config=c_config), Passport(name="c", project="acme"), a2a=ENABLED)
        holder: dict[str, AgentClient] = {}
        tokens: list[str] = []

        @tool
        async def fan_out() -> str:
            """Ask C several questions at once, twice (the token expires in between)."""
            b_a2a = holder["b"].a2a
            assert b_a2a is not None
            answers: list[str] = []
            for _ in range(2):
                calls = [b_a2a.invoke_agent(c.agent_id, f"question {i}") for i in range(FAN_OUT)]
                answers += [r.status for r in await asyncio.gather(*calls)]
                dispatch = current_dispatch()
                assert dispatch is not None
                tokens.append(dispatch.call_token)
                clock.offset += 301  # the shared token expires: the next round replaces it once
            return json.dumps(answers)

        def b_script(request: dict[str, Any]) -> Any:
            results = [m for m in request["messages"] if m["role"] == "tool"]
            return ToolCall("f", "fan_out", {}) if not results else "B: " + results[0]["content"]

        _b_llm, b_config = llm(servers, rule=b_script)
        holder["b"] = b = await hub.register(
            Agent("b", config=b_config, tools=[fan_out]), Passport(name="b", project="acme"), a2a=ENABLED
        )
        a = await hub.register(Agent("a", config=llm(servers)[1]), Passport(name="a", project="acme"), a2a=ENABLED)
        assert a.a2a is not None
        top = await a.a2a.invoke_agent(b.agent_id, "fan out")
        assert top.status == "completed", top
        assert json.loads(top.result.removeprefix("B: ")) == ["completed"] * (2 * FAN_OUT)
        assert len(tokens) == 2 and tokens[0] != tokens[1]
