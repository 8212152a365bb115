"""The SDK's receive and send paths without a coroutine per message: a HumanClient hands an envelope
to plain callbacks and the pull queue within the delivery's dispatch (awaiting only what returns an
awaitable), and ``send`` returns the admitted envelope without parsing its event_data back. Both keep
what the slower paths did: order, error isolation, the pull queue, the envelope as the hub wrote it."""

from __future__ import annotations

import asyncio
import logging

import pytest

from agentsdk.events import ImageInput
from agentsdk.network.hub_client import Hub
from netkernel.envelope import EV_TEXT, Envelope
from netkernel.identity import Passport
from tests.eventually import assert_eventually

PICTURE = "https://example.com/cat.png"


async def test_plain_and_async_callbacks_keep_their_order_and_the_pull_queue_follows(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with Hub.open() as hub:
        a = await hub.register_human(Passport(name="a", kind="human"))
        b = await hub.register_human(Passport(name="b", kind="human"))
        seen: list[str] = []

        def plain(env: Envelope) -> None:
            if env.event_type == EV_TEXT:
                seen.append(f"plain:{env.text}")

        def failing(env: Envelope) -> None:
            raise RuntimeError("boom")

        async def slow(env: Envelope) -> None:
            if env.event_type == EV_TEXT:
                await asyncio.sleep(0.01)  # the channel's next envelope waits for this one
                seen.append(f"slow:{env.text}")

        def after(env: Envelope) -> None:
            if env.event_type == EV_TEXT:
                seen.append(f"after:{env.text}")

        for callback in (plain, failing, slow, after):
            b.on_envelope(callback)
        ch = await a.open(type="conversation", target="b")
        with caplog.at_level(logging.ERROR, logger="agentnet.sdk"):
            for i in range(3):
                await a.send(ch.channel_id, f"m{i}")
            await assert_eventually(lambda: len(seen) == 9)
        # Every callback for m0 (the slow one awaited) before any for m1, the failing one logged and
        # skipped; the pull queue has every envelope too, in order.
        assert seen == [f"{name}:m{i}" for i in range(3) for name in ("plain", "slow", "after")]
        pulled = [
            (await b.next_envelope(predicate=lambda e: e.event_type == EV_TEXT, timeout=1)).text for _ in range(3)
        ]
        assert pulled == ["m0", "m1", "m2"]
        assert sum("envelope callback" in r.getMessage() and "failing" in r.getMessage() for r in caplog.records) >= 3


async def test_a_puller_waiting_is_woken_by_an_envelope_handed_over_without_a_coroutine() -> None:
    async with Hub.open() as hub:
        a = await hub.register_human(Passport(name="a", kind="human"))
        b = await hub.register_human(Passport(name="b", kind="human"))
        b.on_envelope(lambda env: None)
        ch = await a.open(type="conversation", target="b")
        waiting = asyncio.create_task(b.next_envelope(predicate=lambda e: e.event_type == EV_TEXT, timeout=10))
        await asyncio.sleep(0.05)  # the puller waits before the envelope arrives
        sent = await a.send(ch.channel_id, "wake up")
        got = await waiting
        assert got == sent


async def test_send_returns_the_envelope_as_the_hub_wrote_it() -> None:
    async with Hub.open() as hub:
        a = await hub.register_human(Passport(name="a", kind="human"))
        b = await hub.register_human(Passport(name="b", kind="human"))
        ch = await a.open(type="conversation", target="b")
        plain = await a.send(ch.channel_id, "héllo \U0001f600", causation_id="c-1", task_id="t-1")
        with_image = await a.send(ch.channel_id, "look", images=[ImageInput(url=PICTURE)])
        addressed = await ch.send("to b", audience=["b"], priority="urgent")
        wal = {e.envelope_id: e for e in await a.read_wal(ch.channel_id)}
        for sent in (plain, with_image, addressed):
            assert sent.seq > 0 and sent.envelope_id and sent.idempotency_key
            assert sent == wal[sent.envelope_id]  # every field, event_data included
        assert plain.event_data == {"text": "héllo \U0001f600"}
        assert addressed.audience == [b.agent_id] and addressed.priority == "urgent"
        # The returned event_data belongs to the caller: changing it changes nothing already sent.
        plain.event_data["text"] = "changed"
        got = await b.next_envelope(predicate=lambda e: e.event_type == EV_TEXT, timeout=10)
        assert got.text == "héllo \U0001f600"
