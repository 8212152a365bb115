"""The field limits' quick pass (``RequestLimits._fits``) never lets through a request the detailed
walk refuses: for any request message of the hub's and the knowledge service's protos (hostile
values from tests/system/fuzz/strategies.py), ``refusal`` gives the walk's refusal, and the quick pass
says True only when the walk finds nothing."""

from __future__ import annotations

import pytest
from agentnet.v1 import connect_pb2, hub_pb2, knowledge_pb2
from google.protobuf.descriptor import Descriptor
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hubsvc.core.options import HubOptions
from hubsvc.field_limits import hub_request_limits
from netkernel.errors import AgentNetError
from servicekit.limits import Bound, FieldLimits, RequestLimits
from tests.system.fuzz.strategies import messages

LIMITS = hub_request_limits(HubOptions())
TIGHT = RequestLimits(
    FieldLimits(max_id_bytes=8, max_text_bytes=24, max_items=3),
    overrides={"agentnet.v1.Envelope.event_data_json": Bound(40)},
    unique=LIMITS.unique,
)
"""Small limits, so generated values land on both sides of each bound (multi-byte characters too)."""

REQUESTS: list[Descriptor] = [
    connect_pb2.ConnectRequest.DESCRIPTOR,
    connect_pb2.Post.DESCRIPTOR,
    hub_pb2.OpenChannelRequest.DESCRIPTOR,
    hub_pb2.RegisterRequest.DESCRIPTOR,
    knowledge_pb2.WriteRequest.DESCRIPTOR,
]


def walk_refusal(limits: RequestLimits, message: object) -> AgentNetError | None:
    try:
        limits._walk(message, "")  # type: ignore[arg-type]
    except AgentNetError as err:
        return err
    return None


@pytest.mark.parametrize("descriptor", REQUESTS, ids=lambda d: d.name)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_the_quick_pass_agrees_with_the_walk(descriptor: Descriptor, data: st.DataObject) -> None:
    message = data.draw(messages(descriptor, {}))
    for limits in (LIMITS, TIGHT):
        expected = walk_refusal(limits, message)
        got = limits.refusal(message)
        assert (got is None) == (expected is None), (got, expected)
        if expected is not None:
            assert got is not None and (got.reason, got.message) == (expected.reason, expected.message)
            assert not limits._fits(message)
