"""The outbound flags on a real hub process: ``--a2a-outbound-allow`` turns outbound calls on, and the
flags and environment variables parse (and refuse bad values)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentsdk import Agent, ScriptedConfig
from agentsdk.a2a import A2ASettings
from agentsdk.errors import FailedPrecondition
from agentsdk.network import HubClient, Passport
from hubsvc.config import parse_args
from tests.agentsdk.a2a.remote_agent import serve_remote_agent
from tests.procs import start_service


@pytest.mark.parametrize("allow", ["127.0.0.1", ""])
async def test_a_hub_process_calls_out_only_when_allowed(tmp_path: Path, allow: str) -> None:
    hub = start_service("hubsvc", ["--data-dir", str(tmp_path), "--a2a-outbound-allow", allow], cwd=tmp_path)
    try:
        async with serve_remote_agent("GRPC") as remote, HubClient.connect(hub.target) as hc:
            router = await hc.register(
                Agent("router", config=ScriptedConfig([])), Passport(name="router"), a2a=A2ASettings(enabled=True)
            )
            assert router.a2a is not None
            if not allow:
                with pytest.raises(FailedPrecondition, match="--a2a-outbound-allow"):
                    await hc.register_remote_a2a_agent(remote.card_url)
                assert remote.http_requests == []
                return
            outside = await hc.register_remote_a2a_agent(remote.card_url)
            resp = await router.a2a.invoke_agent(outside.agent_id, "over gRPC")
            assert (resp.status, resp.result) == ("completed", "echo: over gRPC")
    finally:
        hub.terminate()


def test_outbound_flags_and_environment(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    for var in [v for v in os.environ if v.startswith("AGENTNET_")]:
        monkeypatch.delenv(var)
    defaults = parse_args([]).options()
    assert (defaults.a2a_outbound_allow, defaults.a2a_outbound_max_bytes) == ((), 1024 * 1024)
    assert defaults.a2a_outbound_connect_timeout == 10.0
    flags = parse_args(
        [
            "--a2a-outbound-allow",
            "agents.example.com, *.internal:8443,",
            "--a2a-outbound-max-bytes",
            "4096",
            "--a2a-outbound-connect-timeout",
            "2.5",
        ]
    ).options()
    assert flags.a2a_outbound_allow == ("agents.example.com", "*.internal:8443")
    assert (flags.a2a_outbound_max_bytes, flags.a2a_outbound_connect_timeout) == (4096, 2.5)
    monkeypatch.setenv("AGENTNET_HUB_A2A_OUTBOUND_ALLOW", "a.example")
    monkeypatch.setenv("AGENTNET_HUB_A2A_OUTBOUND_MAX_BYTES", "100")
    env = parse_args([]).options()
    assert (env.a2a_outbound_allow, env.a2a_outbound_max_bytes) == (("a.example",), 100)
    for flag, bad in (("--a2a-outbound-max-bytes", "0"), ("--a2a-outbound-connect-timeout", "0")):
        with pytest.raises(SystemExit):
            parse_args([flag, bad])
        assert f"{flag} (AGENTNET_HUB_A2A_OUTBOUND_" in capsys.readouterr().err
