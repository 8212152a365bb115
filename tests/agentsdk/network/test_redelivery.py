"""A redelivered envelope the agent already answered gets no second reply (AG2 parity, issue 28).

A real crash: an agent process answers, is killed before its ack leaves, and the identity
resumes in another process (here, this one) from its credential file; the hub delivers the
unacked envelope again and the default handler finds its own reply (FindReply) before
asking the model.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

from agentsdk import Agent
from agentsdk.network import EV_TEXT, Envelope, Hub, HubClient, Passport
from agentsdk.network.agent_client import default_handler
from agentsdk.testing import ScriptedOpenAIServer
from tests.agentsdk.network.llm import llm
from tests.eventually import assert_eventually
from tests.procs import ROOT


async def _line(proc: asyncio.subprocess.Process, prefix: str) -> str:
    assert proc.stdout is not None
    while True:
        raw = await asyncio.wait_for(proc.stdout.readline(), 60)
        assert raw, f"the agent process ended before printing {prefix!r}"
        line = raw.decode().strip()
        if line.startswith(prefix):
            return line


async def test_a_reply_given_before_a_crash_is_not_given_again(
    tmp_path: Path, servers: list[ScriptedOpenAIServer]
) -> None:
    first_llm, first = llm(servers, "the first and only answer")
    second_llm, second = llm(servers, "a second answer (must not be posted)")
    credential_file = tmp_path / "worker.cred"
    async with Hub.open() as hub:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "tests.agentsdk.network.crashing_agent", hub.target, first.base_url or "",
            str(credential_file), cwd=ROOT, stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        try:
            await _line(proc, "READY")
            user = await hub.register_human(Passport(name="user", kind="human"))
            ch = await user.open(type="conversation", target="worker")
            question = await user.send(ch.channel_id, "what is the answer?")
            answered = await _line(proc, "ANSWERED")
            assert answered == f"ANSWERED {question.envelope_id}"
        finally:
            proc.send_signal(signal.SIGKILL)
            await proc.wait()
        assert len(first_llm.requests) == 1

        handled: list[str] = []
        async with HubClient.connect(hub.target) as hc:
            worker = None
            registered = asyncio.Event()

            async def handle(envelope: Envelope) -> None:
                # The redelivery may reach the handler before register() has returned the client.
                await registered.wait()
                assert worker is not None
                await default_handler(envelope, worker)
                handled.append(envelope.envelope_id)

            worker = await hc.register(
                Agent("worker", config=second), Passport(name="worker"), credential_file=credential_file,
                on_envelope=handle,
            )  # fmt: skip
            registered.set()
            # The hub delivers the unacked question again; the handler sees its reply and posts nothing.
            await assert_eventually(lambda: question.envelope_id in handled)
            assert second_llm.requests == []
            replies = [e for e in await user.read_wal(ch.channel_id) if e.event_type == EV_TEXT]
            assert [(e.sender_id, e.text) for e in replies] == [
                (user.agent_id, "what is the answer?"),
                (worker.agent_id, "the first and only answer"),
            ]
            assert replies[1].causation_id == question.envelope_id
            # A new question is answered as usual.
            await user.send(ch.channel_id, "and another?")
            await assert_eventually(lambda: len(second_llm.requests) == 1)
