"""docs/governance.md "Rate limits" and "Inbox caps": the policies and the SDK example run as written."""

from __future__ import annotations

import re
from typing import Any

import yaml

from agentsdk.network import Hub, HubClient
from hubsvc.governance.policy import Policy
from netkernel.identity import Passport
from tests.clock import FakeClock
from tests.procs import ROOT

DOC = (ROOT / "docs" / "governance.md").read_text()


def section(title: str) -> str:
    """The text of one ``### title`` subsection."""
    start = DOC.index(f"### {title}\n")
    end = DOC.find("\n#", start + 4)
    return DOC[start : end if end != -1 else None]


def blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", text, re.DOTALL)


def policy_of(title: str) -> Policy:
    return Policy.model_validate(yaml.safe_load(blocks(section(title), "yaml")[0]))


def example() -> dict[str, Any]:
    """The names the SDK example defines (``backoff``, ``tell``)."""
    names: dict[str, Any] = {}
    exec(compile(blocks(section("Rate limits"), "python")[0], "governance.md", "exec"), names)
    return names


async def test_rate_limits_example_policy_and_sdk_code() -> None:
    ex = example()
    clock = FakeClock(frozen=True)  # tokens arrive only when the test moves the clock
    async with Hub.open(clock=clock) as hub, HubClient.connect(hub.target, rate_limit_backoff=ex["backoff"]) as hc:
        bot = await hc.register_human(Passport(name="bot-1", kind="human"))
        ann = await hc.register_human(Passport(name="ann", kind="human"))
        ch = await bot.open(type="conversation", target="ann")
        hub.core.governance.replace(policy_of("Rate limits"))
        # bot-* : burst 2, then refused (the frozen clock never refills within the back-off's bound).
        assert [await ex["tell"](bot, ch.channel_id, f"m{i}") for i in range(2)] == ["sent", "sent"]
        assert await ex["tell"](bot, ch.channel_id, "m2") == "gave up; next token in 1.000s"
        clock.offset += 1.0
        assert await ex["tell"](bot, ch.channel_id, "m3") == "sent"
        # Everyone else: the default's burst of 20.
        assert [await ex["tell"](ann, ch.channel_id, f"a{i}") for i in range(20)] == ["sent"] * 20
        assert (await ex["tell"](ann, ch.channel_id, "a20")).startswith("gave up; next token in 0.200s")


async def test_inbox_caps_example_policy() -> None:
    ex = example()
    async with Hub.open() as hub, HubClient.connect(hub.target) as hc:
        sender = await hc.register_human(Passport(name="sender", kind="human"))
        reader = await hc.register_human(Passport(name="reader", kind="human"))
        ch = await sender.open(type="conversation", target="reader")
        hub.core.governance.replace(policy_of("Inbox caps"))
        await reader.disconnect()  # offline: whatever is posted for the reader now waits for it
        waiting = hub.core.inboxes.pending(reader.agent_id)
        for i in range(50 - waiting):
            assert await ex["tell"](sender, ch.channel_id, f"m{i}") == "sent"
        assert hub.core.inboxes.pending(reader.agent_id) == 50
        assert await ex["tell"](sender, ch.channel_id, "one more") == "not now: reader has not caught up"
