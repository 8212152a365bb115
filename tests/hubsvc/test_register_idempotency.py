"""Register / RegisterHuman with an idempotency key: a retry after a lost reply gets the same
identity and credential; the key reused with other content is refused (on every store)."""

from __future__ import annotations

from typing import Any

import grpc
import pytest
from agentnet.v1 import hub_pb2, hub_pb2_grpc, identity_pb2

from netkernel.errors import AlreadyExists, InvalidArgument
from tests.hubsvc.harness import RPC_DEADLINE, Participant, RunningHub, call
from tests.hubsvc.test_replicas import Replicas, on_redis, replicas

__all__ = ["on_redis", "replicas"]  # the replica fixtures

KEY = "5f0c1b52-1d4e-4c8a-9a57-3f1f6a2d9b10"


async def register(hub: RunningHub, name: str, key: str = "", human: bool = False, **resume: Any) -> Any:
    async with grpc.aio.insecure_channel(hub.target) as ch:
        stub = hub_pb2_grpc.HubServiceStub(ch)
        passport = identity_pb2.Passport(name=name)
        claims = identity_pb2.Resume(**resume)
        if human:
            request = hub_pb2.RegisterHumanRequest(passport=passport, resume=claims, idempotency_key=key)
            return await call(stub.RegisterHuman(request, timeout=RPC_DEADLINE), deadline=RPC_DEADLINE)
        request = hub_pb2.RegisterRequest(passport=passport, resume=claims, idempotency_key=key)
        return await call(stub.Register(request, timeout=RPC_DEADLINE), deadline=RPC_DEADLINE)


async def test_a_retried_register_returns_the_same_identity_and_credential(hub: RunningHub) -> None:
    first = await register(hub, "ann", KEY, claimed_capabilities=["review"])
    again = await register(hub, "ann", KEY, claimed_capabilities=["review"])
    assert (again.agent.agent_id, again.credential) == (first.agent.agent_id, first.credential)
    me = Participant(hub.target, again.agent, again.credential)
    described = await me.rpc("DescribeAgent", hub_pb2.DescribeAgentRequest(agent_id="ann"))
    assert described.agent.agent_id == first.agent.agent_id  # the credential works
    listed = await me.rpc("ListAgents", hub_pb2.ListAgentsRequest())
    assert [a.name for a in listed.agents].count("ann") == 1  # one identity, not two
    # The same key with other content is refused, naming the key; nothing is registered.
    with pytest.raises(InvalidArgument, match="idempotency_key") as err:
        await register(hub, "ann", KEY, claimed_capabilities=["other"])
    assert err.value.metadata["field"] == "idempotency_key"
    with pytest.raises(InvalidArgument, match="idempotency_key"):
        await register(hub, "bea", KEY)
    with pytest.raises(AlreadyExists):  # without the key a taken name stays taken
        await register(hub, "ann")
    other = await register(hub, "bea", "another-key-0123456789")
    assert other.agent.agent_id != first.agent.agent_id


async def test_register_human_takes_a_key_too_and_short_keys_are_refused(hub: RunningHub) -> None:
    first = await register(hub, "hal", KEY, human=True)
    again = await register(hub, "hal", KEY, human=True)
    assert (again.agent.agent_id, again.credential) == (first.agent.agent_id, first.credential)
    with pytest.raises(InvalidArgument, match="at least 16"):
        await register(hub, "short", "abc")


async def test_a_retry_through_another_replica_gets_the_same_identity(replicas: Replicas) -> None:
    first_hub, second_hub = await replicas.start(), await replicas.start()
    first = await register(first_hub, "ann", KEY)
    again = await register(second_hub, "ann", KEY)  # the retry reached another replica
    assert (again.agent.agent_id, again.credential) == (first.agent.agent_id, first.credential)
    me = Participant(second_hub.target, again.agent, again.credential)
    listed = await me.rpc("ListAgents", hub_pb2.ListAgentsRequest())
    assert [a.name for a in listed.agents].count("ann") == 1
