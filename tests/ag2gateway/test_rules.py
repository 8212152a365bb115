"""An AG2 ``Rule`` (at registration, ``set_rule``, ``get_rule``) maps both ways onto the hub's own rule of
the identity, and the hub enforces it: unmodified AG2 1.2.1 clients in real processes."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import pytest

from ag2gateway.records.rules import default_rule, format_duration, rule_from_ag2, rule_to_ag2
from agentsdk.operator import OperatorClient
from netkernel.errors import InvalidArgument
from tests.ag2gateway.conftest import Ag2Error, Net
from tests.ag2gateway.test_channels import TOKEN

RICH = {
    "version": 1,
    "access": {
        "inbound_from": ["alice", "ops-*"],
        "outbound_to": ["bob"],
        "channel_types": {"initiate": ["consult*", "discussion"], "accept": ["*"]},
    },
    "limits": {
        "max_concurrent_channels": 3,
        "max_concurrent_tasks": 2,
        "channel_ttl_default": "90m",
        "task_ttl_default": "15m",
        "rate": {"per_minute": 120, "burst": 4},
        "delegation_depth": 2,
        "inbox": {"max_pending": 50, "overflow": "reject", "high_water": None},
    },
}


def test_every_enforceable_block_maps_onto_the_hubs_rule_and_back() -> None:
    hub = json.loads(rule_from_ag2(RICH))
    assert hub == {
        "access": {
            "inbound_from": {"names": ["alice", "ops-*"]},
            "peers": {"names": ["bob"]},
            "channel_types": ["consulting", "discussion"],
        },
        "limits": {"max_open_channels": 3, "max_running_tasks": 2, "max_depth": 2, "default_ttl_seconds": 5400},
        "rate": {"posts_per_second": 2.0, "burst": 4},
        "inbox": {"max_pending": 50},
    }
    back = rule_to_ag2(json.dumps(hub))
    expected = json.loads(json.dumps(RICH))
    expected["access"]["channel_types"]["initiate"] = ["consulting", "discussion"]  # the globs, as the types they match
    assert back == expected


def test_ag2s_default_rule_is_what_ag2s_hub_enforces_and_zero_turns_a_cap_off() -> None:
    assert rule_from_ag2(None) == rule_from_ag2(default_rule())  # no rule sent: AG2's Rule(), as AG2's hub stamps
    assert json.loads(rule_from_ag2(None)) == {
        "limits": {"max_depth": 5, "default_ttl_seconds": 7200},
        "inbox": {"max_pending": 1000},
    }
    off = {"limits": {"channel_ttl_default": "", "delegation_depth": 0, "inbox": {"max_pending": 0}}}
    assert rule_from_ag2(off) == ""  # every cap off: no rule of its own
    assert rule_from_ag2({"limits": {"inbox": {"max_pending": 0}}}) == json.dumps(
        {"limits": {"max_depth": 5, "default_ttl_seconds": 7200}}
    )  # a partial rule: AG2's defaults fill the rest, as Rule.from_dict
    assert rule_to_ag2("")["limits"] == {
        "max_concurrent_channels": 0,
        "max_concurrent_tasks": 0,
        "channel_ttl_default": "0s",
        "task_ttl_default": "15m",
        "rate": {"per_minute": 0, "burst": 0},
        "delegation_depth": 0,
        "inbox": {"max_pending": 0, "overflow": "reject", "high_water": None},
    }
    assert [format_duration(s) for s in (7200, 86400, 900, 45, 0)] == ["2h", "1d", "15m", "45s", "0s"]
    assert json.loads(rule_from_ag2({"limits": {"channel_ttl_default": 600}}))["limits"]["default_ttl_seconds"] == 600


@pytest.mark.parametrize(
    ("rule", "says"),
    [
        ({"access": {"channel_types": {"accept": ["consulting"]}}}, "channel_types.accept cannot be enforced"),
        ({"limits": {"inbox": {"overflow": "drop_oldest"}}}, "overflow 'drop_oldest' cannot be enforced"),
        ({"limits": {"inbox": {"high_water": 10}}}, "high_water cannot be enforced"),
        ({"limits": {"channel_ttl_default": "2w"}}, "channel_ttl_default must be a duration"),
        ({"limits": {"max_concurrent_channels": -1}}, r"max_concurrent_channels must be an integer from 0 \(off\)"),
        ({"limits": {"rate": {"per_minute": 10**9}}}, r"per_minute must be an integer from 0 \(off\) to 60000000"),
        ({"limits": {"channel_ttl_default": "400d"}}, "channel_ttl_default must be at most a year"),
        ({"access": {"outbound_to": [""]}}, "outbound_to must be a list of name globs"),
        ({"limits": {"rate": {"per_hour": 5}}}, "rule.limits.rate has no field 'per_hour'"),
        ({"access": {"inbound_from": "alice"}}, "inbound_from must be a list"),
        ({"acess": {}}, "rule has no field 'acess'"),
    ],
)
def test_what_the_hub_cannot_enforce_or_is_not_a_rule_is_refused_naming_it(rule: dict[str, Any], says: str) -> None:
    with pytest.raises(InvalidArgument, match=says):
        rule_from_ag2(rule)


def _pruned(value: Any) -> Any:
    """A rule as the hub stores it, without the empty selector lists it fills in."""
    if isinstance(value, dict):
        return {k: _pruned(v) for k, v in value.items() if v not in ([], None)}
    return value


async def _own_rule(net: Net, agent_id: str) -> dict[str, Any]:
    """The identity's own rule on the hub, read with the operator token."""
    async with OperatorClient(net.hub.target, net.hub.operator_token) as operator:
        response = await operator.get_rule(agent_id)
    return _pruned(json.loads(response.rule_json)) if response.rule_json else {}


async def test_a_rule_given_at_registration_is_the_hubs_rule_and_set_rule_get_rule_round_trip(net: Net) -> None:
    bob_process = await net.another_process()
    bob = await bob_process("human", name="bob", token=TOKEN.format("bob"), rule=RICH)
    assert await _own_rule(net, bob["agent_id"]) == json.loads(rule_from_ag2(RICH))
    got = await bob_process("call", name="get_rule", args=[bob["agent_id"]])
    assert got["limits"] == RICH["limits"] and got["access"]["inbound_from"] == ["alice", "ops-*"]

    await bob_process("set_rule", who="bob", rule={"limits": {"inbox": {"max_pending": 0}, "delegation_depth": 0}})
    assert await _own_rule(net, bob["agent_id"]) == {"limits": {"default_ttl_seconds": 7200}}
    assert (await bob_process("call", name="get_rule", args=[bob["agent_id"]]))["limits"]["inbox"]["max_pending"] == 0

    carol = await net.ag2("human", name="carol", token=TOKEN.format("carol"))  # registered without a rule
    assert await _own_rule(net, carol["agent_id"]) == json.loads(rule_from_ag2(None))


async def test_the_hub_enforces_an_ag2_rules_access_limits_and_ttl_default(net: Net) -> None:
    bob_process = await net.another_process()
    await bob_process("human", name="bob", token=TOKEN.format("bob"), rule={"access": {"inbound_from": ["alice"]}})
    await net.ag2("human", name="carol", token=TOKEN.format("carol"))
    with pytest.raises(Ag2Error, match=r"AccessDeniedError: .*'bob' does not accept invitations from you \('carol'"):
        await net.ag2("open", who="carol", type="conversation", targets=["bob"])

    limited = {"access": {"channel_types": {"initiate": ["conv*"]}}, "limits": {"max_concurrent_channels": 1}}
    limited["limits"]["channel_ttl_default"] = "1h"
    await net.ag2("human", name="alice", token=TOKEN.format("alice"), rule=limited)
    with pytest.raises(Ag2Error, match=r"does not let you open a 'consulting' channel; it allows: conversation"):
        await net.ag2("open", who="alice", type="consulting", targets=["bob"])
    opened = await net.ag2("open", who="alice", type="conversation", targets=["bob"])
    meta = opened["metadata"]
    lifetime = datetime.fromisoformat(meta["expires_at"]) - datetime.fromisoformat(meta["created_at"])
    assert round(lifetime.total_seconds()) == 3600  # channel_ttl_default "1h"
    with pytest.raises(Ag2Error, match=r"allows you at most 1 open channels"):
        await net.ag2("open", who="alice", type="conversation", targets=["bob"])


async def test_the_hub_enforces_an_ag2_rules_inbox_cap_rate_and_delegation_depth(net: Net) -> None:
    bob_process = await net.another_process()
    await bob_process("human", name="bob", token=TOKEN.format("bob"), rule={"limits": {"inbox": {"max_pending": 2}}})
    paced = {"limits": {"rate": {"per_minute": 1, "burst": 3}}}
    await net.ag2("human", name="alice", token=TOKEN.format("alice"), rule=paced)
    opened = await net.ag2("open", who="alice", type="conversation", targets=["bob"])
    channel_id = opened["channel_id"]
    await net.ag2("send", who="alice", channel_id=channel_id, text="one")
    await net.ag2("send", who="alice", channel_id=channel_id, text="two")
    with pytest.raises(Ag2Error, match=r"INBOX_FULL"):  # bob answered neither: his cap of 2 is reached
        await net.ag2("send", who="alice", channel_id=channel_id, text="three")
    await bob_process("send", who="bob", channel_id=channel_id, text="both read")  # bob answers: his inbox empties
    await net.ag2("send", who="alice", channel_id=channel_id, text="three")  # alice's burst of 3 is now spent
    with pytest.raises(Ag2Error, match=r"RATE_LIMITED"):
        await net.ag2("send", who="alice", channel_id=channel_id, text="four")
    wal = await bob_process("call", name="read_wal", args=[channel_id])
    assert [e["event_data"].get("text") for e in wal if e["event_type"] == "ag2.msg.text"] == [
        "one",
        "two",
        "both read",
        "three",
    ]


async def test_an_envelope_deeper_than_delegation_depth_is_refused(net: Net) -> None:
    bob_process = await net.another_process()
    bob = await bob_process("human", name="bob", token=TOKEN.format("bob"))
    alice = await net.ag2("human", name="alice", token=TOKEN.format("alice"), rule={"limits": {"delegation_depth": 1}})
    opened = await net.ag2("open", who="alice", type="conversation", targets=["bob"])

    def envelope(depth: int) -> dict[str, Any]:
        return {
            "channel_id": opened["channel_id"],
            "sender_id": alice["agent_id"],
            "audience": [bob["agent_id"]],
            "event_type": "ag2.msg.text",
            "event_data": {"text": f"depth {depth}"},
            "depth": depth,
        }

    await net.ag2("rpc", name="post_envelope", params={"envelope": envelope(1)})
    with pytest.raises(
        Ag2Error, match=r"DEPTH_EXCEEDED: delegation depth 2 exceeds the limit of 1 \(max_depth of rule .own.\)"
    ):
        await net.ag2("rpc", name="post_envelope", params={"envelope": envelope(2)})


async def test_a_rule_the_hub_cannot_enforce_refuses_the_registration_and_registers_nothing(net: Net) -> None:
    drop_oldest = {"limits": {"inbox": {"overflow": "drop_oldest"}}}
    with pytest.raises(Ag2Error, match=r"ProtocolError: .*overflow 'drop_oldest' cannot be enforced"):
        await net.ag2("human", name="bob", token=TOKEN.format("bob"), rule=drop_oldest)
    assert await net.ag2("rpc", name="find_agent_id", params={"name": "bob"}) is None
