"""Field-limit refusals (hubsvc/field_limits.py) are audited like every other refusal, and bounded."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from agentnet.v1 import hub_pb2

from hubsvc.core.options import HubOptions
from netkernel.errors import InvalidArgument, PayloadTooLarge
from tests.hubsvc.harness import assert_eventually, conversation, list_audit, make_envelope, running_hub

LIMIT = 2048
BIG = "x" * (LIMIT * 8)


async def rows(hub: Any, kind: str, count: int) -> list[tuple[str, str, dict[str, Any], int]]:
    """The ``count`` audit records of ``kind``: (actor, subject, detail, size of the detail JSON)."""

    async def found() -> list[tuple[str, str, dict[str, Any], int]]:
        records = await list_audit(hub, kind=kind, limit=100)
        assert len(records) == count
        return [(r.actor_id, r.subject_id, json.loads(r.detail_json), len(r.detail_json)) for r in records]

    result: list[tuple[str, str, dict[str, Any], int]] = await assert_eventually(found)
    return result


async def test_field_limit_refusals_are_audited_without_the_payload(tmp_path: Path) -> None:
    options = HubOptions(max_event_data_bytes=LIMIT, max_text_bytes=LIMIT)
    async with running_hub(tmp_path / "hub.db", options) as hub:
        alice, bob, channel_id = await conversation(hub.target)
        big = make_envelope(channel_id, "ag2.msg.text", {"text": BIG})
        with pytest.raises(PayloadTooLarge):
            await alice.rpc("PostEnvelope", hub_pb2.PostEnvelopeRequest(envelope=big))
        with pytest.raises(PayloadTooLarge):  # the same post over the Connect stream
            await alice.say(channel_id, BIG)
        with pytest.raises(PayloadTooLarge):
            await alice.rpc("Say", hub_pb2.SayRequest(channel_id=channel_id, content=BIG))
        with pytest.raises(InvalidArgument):
            await bob.rpc("DescribeChannel", hub_pb2.DescribeChannelRequest(channel_id="c" * LIMIT))
        posts = await rows(hub, "post_refused", 2)
        for actor, subject, detail, size in posts:
            assert (actor, subject) == (alice.agent_id, channel_id)
            assert detail["reason"] == "PAYLOAD_TOO_LARGE" and detail["event_type"] == "ag2.msg.text"
            assert detail["field"] == "envelope.event_data_json" and detail["limit"] == str(LIMIT)
            assert size < LIMIT  # bounded: the payload is not in the row
        requests = {
            subject: (actor, detail, size) for actor, subject, detail, size in await rows(hub, "request_refused", 2)
        }
        actor, detail, size = requests["Say"]
        assert actor == alice.agent_id and detail["reason"] == "PAYLOAD_TOO_LARGE" and detail["field"] == "content"
        assert size < LIMIT
        actor, detail, size = requests["DescribeChannel"]
        assert actor == bob.agent_id and detail["reason"] == "INVALID_ARGUMENT" and detail["field"] == "channel_id"
        assert size < LIMIT
        for p in (alice, bob):
            await p.close()
