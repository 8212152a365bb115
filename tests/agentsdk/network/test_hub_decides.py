"""The SDK takes what the hub decides: the adapter tools it offers a participant and the
default view come from DescribeChannel, checked turn by turn against a real hub."""

from __future__ import annotations

from typing import Any

import pytest
from agentnet.v1 import hub_pb2

from agentsdk.network import Hub, HumanClient, Passport, resolve_view_policy
from agentsdk.network.adapters import adapter_for

ROUND_ROBIN = {"transitions": [{"condition": {"type": "always"}, "target": {"type": "round_robin"}}]}

# (type, participants (opener first), knobs, who speaks in turn,
#  who is offered say before each turn and after the last, default view (policy, recent_n))
SCENARIOS: list[tuple[str, str, dict[str, Any], str, list[str], tuple[str, int]]] = [
    ("consulting", "ab", {}, "ab", ["a", "b", ""], ("full_transcript", 0)),
    ("conversation", "ab", {"max_turns": 3}, "aab", ["ab", "ab", "ab", ""], ("windowed_summary", 10)),
    ("discussion", "abc", {"max_rounds": 1}, "abc", ["a", "b", "c", ""], ("named_windowed_summary", 6)),
    ("workflow", "abcd", {**ROUND_ROBIN, "max_turns": 2}, "ab", ["", "", ""], ("named_windowed_summary", 8)),
]


async def offered_say(client: HumanClient, channel_id: str, view: tuple[str, int]) -> bool:
    """Whether the SDK offers ``client`` say now; asserts it is exactly the hub's answer, and so is the view."""
    hub_said = await client.rpc.describe_channel(hub_pb2.DescribeChannelRequest(channel_id=channel_id))
    metadata, state, _ = await client.channel_info(channel_id)
    tools = adapter_for(metadata.type).tools_for(client, metadata, state, client.agent_id)
    assert [t.name for t in tools] == list(hub_said.offered_tools)
    hub_view = (hub_said.default_view.policy, hub_said.default_view.recent_n)
    policy = resolve_view_policy(client, metadata)
    assert (policy.name, getattr(policy, "recent_n", 0)) == hub_view == view
    return bool(tools)


@pytest.mark.parametrize(
    ("channel_type", "names", "knobs", "speakers", "offered", "view"), SCENARIOS, ids=[s[0] for s in SCENARIOS]
)
async def test_say_and_the_default_view_follow_describe_channel(
    hub: Hub,
    channel_type: str,
    names: str,
    knobs: dict[str, Any],
    speakers: str,
    offered: list[str],
    view: tuple[str, int],
) -> None:
    clients = {n: await hub.register_human(Passport(name=f"{channel_type}-{n}", kind="human")) for n in names}
    opener = clients[names[0]]
    channel = await opener.open(type=channel_type, target=[c.name for c in list(clients.values())[1:]], knobs=knobs)
    seen = []
    for turn in [*speakers, None]:
        seen.append("".join([n for n, c in clients.items() if await offered_say(c, channel.channel_id, view)]))
        if turn is not None:
            await clients[turn].send(channel.channel_id, f"turn of {turn}")
    assert seen == offered
    metadata, _, _ = await opener.channel_info(channel.channel_id)
    assert metadata.state == "closed"  # the last turn ended the channel
