"""The released a2a-sdk client, unmodified, uses hub agents through the gateway."""

from __future__ import annotations

import asyncio

import pytest
from a2a.types import a2a_pb2 as a2a

from agentsdk import Agent, ScriptedConfig
from agentsdk.a2a import A2ASettings
from agentsdk.network import Passport
from tests.a2agateway.conftest import Net, collect, user_message
from tests.eventually import assert_eventually

ENABLED = A2ASettings(enabled=True, skills=["policy-lookup"], description="Looks up insurance policies")


async def test_the_card_describes_the_agent_and_the_listing_lists_the_visible_ones(net: Net) -> None:
    await net.hub.register(Agent("policy", config=ScriptedConfig([])), Passport(name="policy"), a2a=ENABLED)
    await net.hub.register(
        Agent("hidden", config=ScriptedConfig([])), Passport(name="hidden", project="other"), a2a=ENABLED
    )
    card = await net.card("policy")
    assert card.name == "policy" and card.description == "Looks up insurance policies"
    assert [s.id for s in card.skills] == ["policy-lookup"]
    assert {(i.protocol_binding, i.tenant) for i in card.supported_interfaces} == {
        ("JSONRPC", "policy"),
        ("GRPC", "policy"),
    }
    assert card.security_schemes["hubCredential"].http_auth_security_scheme.scheme == "bearer"
    assert card.capabilities.streaming
    import httpx

    async with httpx.AsyncClient() as http:
        listing = (await http.get(f"{net.gateway.url}/agents", headers={"Authorization": f"Bearer {net.token}"})).json()
        assert [c["name"] for c in listing["agents"]] == ["policy"]  # not "hidden": another project
        hidden = await http.get(
            f"{net.gateway.url}/agents/hidden/.well-known/agent-card.json",
            headers={"Authorization": f"Bearer {net.token}"},
        )
        assert hidden.status_code == 404
        anonymous = await http.get(f"{net.gateway.url}/agents")
        assert anonymous.status_code == 401 and "Bearer" in anonymous.json()["error"]["message"]


async def test_a_blocking_send_completes_with_the_answer(net: Net, binding: str) -> None:
    def answer(messages: list[dict[str, str]], _tools: object) -> str:
        return "covered: " + str(messages[-1]["content"]).split()[-1]

    await net.hub.register(Agent("policy", config=ScriptedConfig([answer])), Passport(name="policy"), a2a=ENABLED)
    client = await net.client("policy", binding)
    [response] = await collect(client, a2a.SendMessageRequest(message=user_message("Look up POL-123")))
    task = response.task
    assert task.status.state == a2a.TASK_STATE_COMPLETED
    assert [p.text for a in task.artifacts for p in a.parts] == ["covered: POL-123"]
    assert task.id and task.context_id
    got = await client.get_task(a2a.GetTaskRequest(id=task.id))
    assert got.status.state == a2a.TASK_STATE_COMPLETED and got.artifacts[0].parts[0].text == "covered: POL-123"


class Gate:
    """An agent turn that waits until released (a task that stays running while the test acts)."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    async def __call__(self, messages: list[dict[str, str]], _tools: object) -> str:
        self.entered.set()
        await self.release.wait()
        return "released: " + str(messages[-1]["content"]).split()[-1]


async def test_a_non_blocking_send_returns_working_and_get_task_sees_it_complete(net: Net, binding: str) -> None:
    gate = Gate()
    await net.hub.register(Agent("slow", config=ScriptedConfig([gate])), Passport(name="slow"), a2a=ENABLED)
    client = await net.client("slow", binding)
    request = a2a.SendMessageRequest(
        message=user_message("work on W-1"), configuration=a2a.SendMessageConfiguration(return_immediately=True)
    )
    [response] = await collect(client, request)
    assert response.task.status.state == a2a.TASK_STATE_WORKING
    await gate.entered.wait()
    assert (await client.get_task(a2a.GetTaskRequest(id=response.task.id))).status.state == a2a.TASK_STATE_WORKING
    gate.release.set()

    async def completed() -> a2a.Task:
        task = await client.get_task(a2a.GetTaskRequest(id=response.task.id))
        assert task.status.state == a2a.TASK_STATE_COMPLETED
        return task

    task = await assert_eventually(completed)
    assert task.artifacts[0].parts[0].text == "released: W-1"


async def test_list_tasks_lists_the_callers_tasks_with_the_agent(net: Net, binding: str) -> None:
    await net.hub.register(Agent("policy", config=ScriptedConfig(["one", "two"])), Passport(name="policy"), a2a=ENABLED)
    client = await net.client("policy", binding)
    first = (await collect(client, a2a.SendMessageRequest(message=user_message("first"))))[0].task
    second_msg = user_message("second", context_id=first.context_id)
    second = (await collect(client, a2a.SendMessageRequest(message=second_msg)))[0].task
    assert second.context_id == first.context_id and second.id != first.id
    listed = await client.list_tasks(a2a.ListTasksRequest(include_artifacts=True))
    assert {t.id for t in listed.tasks} == {first.id, second.id} and listed.total_size == 2
    assert {t.status.state for t in listed.tasks} == {a2a.TASK_STATE_COMPLETED}
    assert {t.artifacts[0].parts[0].text for t in listed.tasks} == {"one", "two"}
    page = await client.list_tasks(a2a.ListTasksRequest(page_size=1))
    assert len(page.tasks) == 1 and page.next_page_token
    rest = await client.list_tasks(a2a.ListTasksRequest(page_size=1, page_token=page.next_page_token))
    assert {page.tasks[0].id, rest.tasks[0].id} == {first.id, second.id} and not rest.next_page_token
    done = await client.list_tasks(a2a.ListTasksRequest(status=a2a.TASK_STATE_FAILED))
    assert list(done.tasks) == []


async def test_a_task_a_send_returned_ended_reads_back_ended(net: Net, binding: str) -> None:
    """The hub records a call's outcome just after the answer's commit: a blocking send (or a stream's
    last event) only tells the client the task ended once GetTask and ListTasks say so too."""
    await net.hub.register(
        Agent("policy", config=ScriptedConfig([f"answer {i}" for i in range(6)])), Passport(name="policy"), a2a=ENABLED
    )
    for i in range(3):
        client = await net.client("policy", binding)
        task = (await collect(client, a2a.SendMessageRequest(message=user_message(f"question {i}"))))[0].task
        got = await client.get_task(a2a.GetTaskRequest(id=task.id))
        assert (got.status.state, list(got.artifacts)) == (a2a.TASK_STATE_COMPLETED, list(task.artifacts))
        streamed = await net.client("policy", binding, streaming=True)
        responses = await collect(streamed, a2a.SendMessageRequest(message=user_message(f"streamed {i}")))
        assert responses[-1].status_update.status.state == a2a.TASK_STATE_COMPLETED
        listed = await client.list_tasks(a2a.ListTasksRequest(include_artifacts=True, page_size=1))
        [newest] = listed.tasks
        assert newest.id == responses[0].task.id and newest.status.state == a2a.TASK_STATE_COMPLETED
        assert [p.text for a in newest.artifacts for p in a.parts] == [f"answer {2 * i + 1}"]


async def test_a_streamed_send_sends_working_then_the_artifact_then_completed(net: Net, binding: str) -> None:
    await net.hub.register(Agent("policy", config=ScriptedConfig(["all good"])), Passport(name="policy"), a2a=ENABLED)
    client = await net.client("policy", binding, streaming=True)
    responses = await collect(client, a2a.SendMessageRequest(message=user_message("check")))
    kinds = [r.WhichOneof("payload") for r in responses]
    assert kinds == ["task", "status_update", "artifact_update", "status_update"]
    assert responses[1].status_update.status.state == a2a.TASK_STATE_WORKING
    assert responses[2].artifact_update.artifact.parts[0].text == "all good"
    assert responses[3].status_update.status.state == a2a.TASK_STATE_COMPLETED
    ids = [
        (r.status_update if r.HasField("status_update") else r.artifact_update).metadata["eventId"]
        for r in responses[1:]
    ]
    assert len(set(ids)) == 3


async def test_cancel_task_cancels_a_running_task(net: Net, binding: str) -> None:
    gate = Gate()
    await net.hub.register(Agent("slow", config=ScriptedConfig([gate])), Passport(name="slow"), a2a=ENABLED)
    client = await net.client("slow", binding)
    request = a2a.SendMessageRequest(
        message=user_message("long job"), configuration=a2a.SendMessageConfiguration(return_immediately=True)
    )
    task = (await collect(client, request))[0].task
    await gate.entered.wait()
    cancelled = await client.cancel_task(a2a.CancelTaskRequest(id=task.id))
    assert cancelled.status.state == a2a.TASK_STATE_CANCELED
    assert (await client.get_task(a2a.GetTaskRequest(id=task.id))).status.state == a2a.TASK_STATE_CANCELED
    with pytest.raises(Exception, match="cannot be cancelled"):
        await client.cancel_task(a2a.CancelTaskRequest(id=task.id))
    gate.release.set()


async def test_input_required_then_the_follow_up_message_continues_the_same_task(net: Net, binding: str) -> None:
    from agentsdk.events import ToolCall

    def approve(messages: list[dict[str, str]], _tools: object) -> str:
        return "approved by " + str(messages[-1]["content"]).split()[-1]

    script = ScriptedConfig(
        [ToolCall("r1", "request_input", {"question": "Who approves refunds over $500?"}), "asked", approve]
    )
    await net.hub.register(Agent("refunds", config=script), Passport(name="refunds"), a2a=ENABLED)
    client = await net.client("refunds", binding)
    asked = (await collect(client, a2a.SendMessageRequest(message=user_message("Refund $900"))))[0].task
    assert asked.status.state == a2a.TASK_STATE_INPUT_REQUIRED
    assert asked.status.message.parts[0].text == "Who approves refunds over $500?"
    follow_up = user_message("Approver: Dana", task_id=asked.id, context_id=asked.context_id)
    done = (await collect(client, a2a.SendMessageRequest(message=follow_up)))[0].task
    assert (done.id, done.context_id) == (asked.id, asked.context_id)
    assert done.status.state == a2a.TASK_STATE_COMPLETED
    assert done.artifacts[-1].parts[0].text == "approved by Dana"
    with pytest.raises(Exception, match="only an input-required task takes another message"):
        await collect(client, a2a.SendMessageRequest(message=user_message("again", task_id=asked.id)))


async def test_an_agent_the_caller_may_not_see_refuses_and_no_token_is_refused(net: Net, binding: str) -> None:
    await net.hub.register(Agent("policy", config=ScriptedConfig([])), Passport(name="policy"), a2a=ENABLED)
    client = await net.client("policy", binding)
    await net.hub.register(
        Agent("private", config=ScriptedConfig([])),
        Passport(name="private"),
        a2a=A2ASettings(enabled=True, allowed_callers=["ops-*"]),
    )
    # A client built from policy's card, but naming "private" as the tenant: refused as unknown.
    request = a2a.SendMessageRequest(message=user_message("hi"), tenant="private")
    with pytest.raises(Exception, match="no agent 'private' you may call"):
        await collect(client, request)
    anonymous = await net.client("policy", binding, token="")
    with pytest.raises(Exception) as refused:
        await collect(anonymous, a2a.SendMessageRequest(message=user_message("hi")))
    expected = (
        "HTTP Error 401" if binding == "JSONRPC" else "UNAUTHENTICATED: this gateway needs 'Authorization: Bearer"
    )
    assert expected in str(refused.value)


def event_id(response: a2a.StreamResponse) -> str:
    """The gateway's eventId of a status or artifact event."""
    event = response.status_update if response.HasField("status_update") else response.artifact_update
    return str(event.metadata["eventId"])


async def test_a_dropped_subscription_resumes_after_its_last_event_without_loss_or_repeat(
    net: Net, binding: str
) -> None:
    gate = Gate()
    await net.hub.register(Agent("slow", config=ScriptedConfig([gate])), Passport(name="slow"), a2a=ENABLED)
    request = a2a.SendMessageRequest(
        message=user_message("job J-7"), configuration=a2a.SendMessageConfiguration(return_immediately=True)
    )
    task_id = (await collect(await net.client("slow", binding), request))[0].task.id
    await gate.entered.wait()
    client = await net.client("slow", binding, streaming=True)

    first = client.subscribe(a2a.SubscribeToTaskRequest(id=task_id)).__aiter__()
    snapshot = await anext(first)
    working = await anext(first)
    assert snapshot.task.status.state == a2a.TASK_STATE_WORKING
    assert working.status_update.status.state == a2a.TASK_STATE_WORKING
    await first.aclose()  # the connection drops mid-task

    gate.release.set()  # the task goes on without a subscriber
    from a2a.client import ClientCallContext

    resume = ClientCallContext(service_parameters={"Last-Event-ID": event_id(working)})
    rest = [r async for r in client.subscribe(a2a.SubscribeToTaskRequest(id=task_id), context=resume)]
    assert [r.WhichOneof("payload") for r in rest] == ["artifact_update", "status_update"]
    assert rest[0].artifact_update.artifact.parts[0].text == "released: J-7"
    assert rest[1].status_update.status.state == a2a.TASK_STATE_COMPLETED
    assert len({event_id(working), *map(event_id, rest)}) == 3

    # Resuming after the artifact gives exactly the last event; after the last, nothing.
    after_artifact = ClientCallContext(service_parameters={"Last-Event-ID": event_id(rest[0])})
    last = [r async for r in client.subscribe(a2a.SubscribeToTaskRequest(id=task_id), context=after_artifact)]
    assert [event_id(r) for r in last] == [event_id(rest[1])]
    after_last = ClientCallContext(service_parameters={"Last-Event-ID": event_id(rest[1])})
    assert [r async for r in client.subscribe(a2a.SubscribeToTaskRequest(id=task_id), context=after_last)] == []


async def test_message_metadata_travels_as_custom_headers_and_a2a_keys_are_refused(net: Net, binding: str) -> None:
    from google.protobuf import struct_pb2

    from agentsdk.a2a import get_current_custom_headers

    def echo(_messages: object, _tools: object) -> str:
        headers = get_current_custom_headers()
        return f"{headers.get('x-tenant')} {headers.get('x-a2a-extensions')}"

    await net.hub.register(Agent("policy", config=ScriptedConfig([echo])), Passport(name="policy"), a2a=ENABLED)
    client = await net.client("policy", binding)
    metadata = struct_pb2.Struct()
    metadata.update({"x-tenant": "acme"})
    message = user_message("hi", metadata=metadata, extensions=["https://example.com/ext/v1"])
    task = (await collect(client, a2a.SendMessageRequest(message=message)))[0].task
    assert task.artifacts[0].parts[0].text == "acme https://example.com/ext/v1"
    reserved = struct_pb2.Struct()
    reserved.update({"A2A-Token": "x"})
    with pytest.raises(Exception, match="reserved 'a2a-' prefix"):
        await collect(client, a2a.SendMessageRequest(message=user_message("hi", metadata=reserved)))
    look_alike = struct_pb2.Struct()
    look_alike.update({" a2a-token": "x"})  # a leading space: not an HTTP header name at all
    with pytest.raises(Exception, match="not an HTTP header name"):
        await collect(client, a2a.SendMessageRequest(message=user_message("hi", metadata=look_alike)))
    assert len((await client.list_tasks(a2a.ListTasksRequest())).tasks) == 1  # the refused sends started nothing


async def test_tasks_outlive_the_gateway_that_started_them(net: Net, binding: str) -> None:
    from a2agateway.config import GatewayOptions
    from a2agateway.server import start_gateway

    gate = Gate()
    await net.hub.register(Agent("slow", config=ScriptedConfig([gate])), Passport(name="slow"), a2a=ENABLED)
    request = a2a.SendMessageRequest(
        message=user_message("job K-1"), configuration=a2a.SendMessageConfiguration(return_immediately=True)
    )
    task_id = (await collect(await net.client("slow", binding), request))[0].task.id
    await gate.entered.wait()
    await net.gateway.stop()  # the gateway that started the task goes away
    net.gateway = await start_gateway(GatewayOptions(port=0, grpc_port=0, hub=net.hub.target))
    client = await net.client("slow", binding)
    assert (await client.get_task(a2a.GetTaskRequest(id=task_id))).status.state == a2a.TASK_STATE_WORKING
    gate.release.set()

    async def completed() -> bool:
        task = await client.get_task(a2a.GetTaskRequest(id=task_id))
        assert task.status.state == a2a.TASK_STATE_COMPLETED
        return task.artifacts[0].parts[0].text == "released: K-1"

    await assert_eventually(completed)


async def test_a_request_body_over_the_limit_is_refused_with_what_to_do(net: Net) -> None:
    import httpx

    limit = net.gateway.options.max_request_bytes
    async with httpx.AsyncClient() as http:
        response = await http.post(
            f"{net.gateway.url}/a2a",
            content=b"x" * (limit + 1),
            headers={"Authorization": f"Bearer {net.token}", "Content-Type": "application/json"},
        )
    assert response.status_code == 413
    error = response.json()["error"]
    assert error["code"] == -32600 and "--max-request-bytes" in error["message"]


async def test_a_grpc_message_over_the_limit_is_resource_exhausted(net: Net) -> None:
    await net.hub.register(Agent("policy", config=ScriptedConfig([])), Passport(name="policy"), a2a=ENABLED)
    client = await net.client("policy", "GRPC")
    huge = "x" * (net.gateway.options.max_request_bytes + 1)
    with pytest.raises(Exception, match="RESOURCE_EXHAUSTED"):
        await collect(client, a2a.SendMessageRequest(message=user_message(huge)))
    assert list((await client.list_tasks(a2a.ListTasksRequest())).tasks) == []
