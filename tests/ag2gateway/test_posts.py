"""AG2 posts travel on the sender's hub ``Connect`` stream (``PostBatch``), not as unary ``PostEnvelope``
calls; a post made while that stream is down goes as ``PostEnvelope``. The hub's own
``agentnet_hub_rpcs_total`` counter says which RPCs it served. An AG2 receipt's ack waits for the
identity's next post to carry it, or goes alone once its delay is over."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from agentnet.v1 import envelope_pb2, hub_pb2

from ag2gateway.config import Ag2GatewayOptions
from ag2gateway.delivery import IdentityStream
from ag2gateway.hub import HubLink
from ag2gateway.server import start_gateway
from servicekit.metrics import MetricsSettings
from tests.ag2gateway.conftest import Ag2Error, Driver, start_driver
from tests.ag2gateway.test_channels import TOKEN, texts
from tests.eventually import assert_eventually
from tests.hubsvc.harness import EV_TEXT, RunningHub, conversation, open_channel, register, running_hub
from tests.scrape import scrape, value

POST_ENVELOPE = "/agentnet.v1.HubService/PostEnvelope"


async def _post_envelope_calls(hub: RunningHub) -> float:
    """How many PostEnvelope calls the hub served so far."""
    server = hub.server.metrics_server
    assert server is not None
    return value(await scrape(server.url), "agentnet_hub_rpcs_total", method=POST_ENVELOPE)


async def test_an_ag2_clients_posts_go_over_its_connect_stream_in_order(tmp_path: Path) -> None:
    async with running_hub(tmp_path / "hub.db", metrics=MetricsSettings(port=0)) as hub:
        gateway = await start_gateway(Ag2GatewayOptions(port=0, hub=hub.target, secret_file=tmp_path / "s"))
        ag2 = await start_driver()
        try:
            await ag2("url", url=gateway.url)
            await ag2("human", name="alice", token=TOKEN.format("alice"))
            await ag2("human", name="bob", token=TOKEN.format("bob"))
            opened = await ag2("open", who="alice", type="conversation", targets=["bob"])
            channel_id = opened["channel_id"]

            async def active() -> bool:
                assert (await ag2("call", name="get_channel", args=[channel_id]))["state"] == "active"
                return True

            await assert_eventually(active, timeout=15)
            before = await _post_envelope_calls(hub)
            sent = [f"text {i}" for i in range(20)]
            ids = [await _send(ag2, channel_id, text) for text in sent]
            assert ids == sorted(ids) and len(set(ids)) == len(ids)  # AG2 ids sort in admission order

            async def bob_has_all() -> bool:
                assert texts(await ag2("received", who="bob")) == sent
                return True

            await assert_eventually(bob_has_all, timeout=15)
            at_once = [f"at once {i}" for i in range(30)]  # 30 requests in flight together
            ids = await ag2("send_many", who="alice", channel_id=channel_id, texts=at_once)
            assert ids == sorted(ids) and len(set(ids)) == len(ids)  # admitted in the order the frames were read

            async def bob_has_them_in_order() -> bool:
                assert texts(await ag2("received", who="bob")) == sent + at_once
                return True

            await assert_eventually(bob_has_them_in_order, timeout=15)
            assert await _post_envelope_calls(hub) == before  # no unary post: all went on alice's stream
        finally:
            await ag2.stop()
            await gateway.stop()


async def _send(ag2: Driver, channel_id: str, text: str) -> str:
    """Alice posts one text through the gateway; its AG2 envelope id."""
    return str((await ag2("send", who="alice", channel_id=channel_id, text=text))["envelope_id"])


async def test_a_post_while_the_stream_is_down_goes_as_post_envelope(tmp_path: Path) -> None:
    async with running_hub(tmp_path / "hub.db", metrics=MetricsSettings(port=0)) as hub:
        alice = await register(hub.target, "alice", human=True)
        bob = await register(hub.target, "bob", human=True)
        await alice.connect()
        await bob.connect()
        channel_id = await open_channel(alice, "conversation", [bob])
        link = HubLink(hub.target, None)
        delivered: list[int] = []

        async def deliver(env: envelope_pb2.Envelope, replay: bool, first: bool) -> None:
            delivered.append(env.seq)

        stream = IdentityStream(link.rpc(alice.credential), alice.agent_id, deliver)
        try:

            def text(body: str) -> envelope_pb2.Envelope:
                return envelope_pb2.Envelope(
                    channel_id=channel_id, event_type=EV_TEXT, event_data_json=f'{{"text": "{body}"}}'
                )

            before = await _post_envelope_calls(hub)
            first = await stream.post(text("unary"))  # not started: no stream to post on
            assert await _post_envelope_calls(hub) == before + 1
            await stream.start()
            second = await stream.post(text("streamed"))
            assert await _post_envelope_calls(hub) == before + 1
            assert second.seq > first.seq > 0 and second.sender_id == alice.agent_id
            many = await asyncio.gather(*(stream.post(text(f"n{i}")) for i in range(50)))  # packed in PostBatches
            assert [e.seq for e in many] == list(range(second.seq + 1, second.seq + 51))  # in the order posted
            assert await _post_envelope_calls(hub) == before + 1
            got = [await bob.next(lambda e: e.event_type == EV_TEXT) for _ in range(52)]
            assert [e.envelope_id for e in got] == [first.envelope_id, second.envelope_id] + [
                e.envelope_id for e in many
            ]
            read = hub_pb2.ReadWalRequest(channel_id=channel_id, from_seq=second.seq, until_seq=second.seq)
            assert [r.envelope.envelope_id async for r in link.rpc(bob.credential).read_wal(read)] == [
                second.envelope_id
            ]  # answered only once committed: the WAL holds it
        finally:
            await stream.close()
            await link.close()
            await alice.close()
            await bob.close()


def _text(channel_id: str, body: str) -> envelope_pb2.Envelope:
    return envelope_pb2.Envelope(channel_id=channel_id, event_type=EV_TEXT, event_data_json=f'{{"text": "{body}"}}')


async def test_a_receipts_ack_rides_in_the_identitys_next_post_or_goes_alone_after_its_delay(tmp_path: Path) -> None:
    """A request/reply loop sends no Ack frame: the ack of what the client receipted goes with its next
    post (applied by the hub before that post is admitted). With no post to carry it, it goes alone."""
    async with running_hub(tmp_path / "hub.db") as hub:
        alice, bob, channel_id = await conversation(hub.target)
        await bob.disconnect()  # bob's hub session is the gateway's stream from here
        link = HubLink(hub.target, None)
        delivered: list[envelope_pb2.Envelope] = []

        async def deliver(env: envelope_pb2.Envelope, replay: bool, first: bool) -> None:
            delivered.append(env)

        def cursor() -> int:
            return hub.core.sessions._sessions[bob.agent_id].cursor(channel_id)

        async def receipted(stream: IdentityStream, body: str) -> int:
            """Alice posts ``body``; once bob's stream has it, ack everything it delivered; its seq."""
            env = await alice.say(channel_id, body)
            await assert_eventually(lambda: any(e.seq == env.seq for e in delivered))
            for e in delivered:
                stream.ack(e.channel_id, e.seq)
            return env.seq

        waits_long = IdentityStream(link.rpc(bob.credential), bob.agent_id, deliver, ack_delay=60.0)
        try:
            await waits_long.start()
            ping = await receipted(waits_long, "ping")
            await asyncio.sleep(0)
            assert waits_long.acks_pending > 0 and cursor() < ping  # not sent at the end of the turn
            await waits_long.post(_text(channel_id, "pong"))
            assert waits_long.acks_pending == 0 and cursor() >= ping  # it rode in the post's frame
        finally:
            await waits_long.close()
        delivered.clear()
        goes_alone = IdentityStream(link.rpc(bob.credential), bob.agent_id, deliver, ack_delay=0.05)
        try:
            await goes_alone.start()
            again = await receipted(goes_alone, "again")

            def acked() -> bool:
                assert goes_alone.acks_pending == 0 and cursor() >= again
                return True

            await assert_eventually(acked)  # no post came: the ack went in a frame of its own
        finally:
            await goes_alone.close()
            await link.close()
            await alice.close()
            await bob.close()


async def test_every_post_envelope_gets_its_answer_and_frees_its_request_slot(tmp_path: Path) -> None:
    """Each ``post_envelope`` is answered, with its AG2 id or AG2's error for a refusal (by the gateway or
    by the hub), and the answer frees its slot of ``--max-requests``: with 2 slots, many more posts and
    refusals than that, one after another and at once, all get their answers, in order."""
    async with running_hub(tmp_path / "hub.db") as hub:
        options = Ag2GatewayOptions(port=0, hub=hub.target, secret_file=tmp_path / "s", max_requests=2)
        gateway = await start_gateway(options)
        ag2 = await start_driver()
        try:
            await ag2("url", url=gateway.url)
            alice = await ag2("human", name="alice", token=TOKEN.format("alice"))
            await ag2("human", name="bob", token=TOKEN.format("bob"))
            channel_id = (await ag2("open", who="alice", type="conversation", targets=["bob"]))["channel_id"]

            async def active() -> bool:
                assert (await ag2("call", name="get_channel", args=[channel_id]))["state"] == "active"
                return True

            await assert_eventually(active, timeout=15)

            def post(sender: str, channel: str = channel_id) -> dict[str, object]:
                envelope = {"channel_id": channel, "sender_id": sender, "audience": None, "event_type": EV_TEXT}
                return {"envelope": {**envelope, "event_data": {"text": "x"}}}

            for _ in range(3):
                with pytest.raises(Ag2Error, match="AccessDeniedError"):  # an identity not bound to the connection
                    await ag2("rpc", name="post_envelope", params=post("f" * 32))
                with pytest.raises(Ag2Error, match="ProtocolError: bad params for 'post_envelope'"):
                    await ag2("rpc", name="post_envelope", params={})
                with pytest.raises(Ag2Error, match="NotFoundError"):  # refused by the hub: no such channel
                    await ag2("rpc", name="post_envelope", params=post(alice["agent_id"], "0" * 32))
            one_by_one = [await _send(ag2, channel_id, f"one {i}") for i in range(5)]
            at_once = await ag2("send_many", who="alice", channel_id=channel_id, texts=[f"many {i}" for i in range(20)])
            ids = one_by_one + at_once
            assert ids == sorted(ids) and len(set(ids)) == 25

            async def bob_has_all() -> bool:
                assert texts(await ag2("received", who="bob")) == [f"one {i}" for i in range(5)] + [
                    f"many {i}" for i in range(20)
                ]
                return True

            await assert_eventually(bob_has_all, timeout=15)
        finally:
            await ag2.stop()
            await gateway.stop()
