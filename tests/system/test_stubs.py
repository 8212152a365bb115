"""Stubs of all four flavours compile and import, and the contract's key
properties hold on the wire (event_data ints stay ints; broadcast vs explicit audience)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_python_grpcio_stubs_import() -> None:
    from agentnet.v1 import hub_pb2, hub_pb2_grpc, knowledge_pb2, knowledge_pb2_grpc

    assert hub_pb2_grpc.HubServiceStub and knowledge_pb2_grpc.KnowledgeServiceStub
    assert "Connect" in hub_pb2.DESCRIPTOR.services_by_name["HubService"].methods_by_name
    assert "Watch" in knowledge_pb2.DESCRIPTOR.services_by_name["KnowledgeService"].methods_by_name


def test_python_betterproto_stubs_import_and_round_trip() -> None:
    from agentnet.v1 import envelope_pb2
    from agentnet_betterproto.agentnet import v1 as bp

    assert bp.HubServiceStub and bp.KnowledgeServiceStub
    env = bp.Envelope(channel_id="c1", event_type="ag2.msg.text", event_data_json='{"text":"hi"}', seq=7)
    parsed = envelope_pb2.Envelope.FromString(bytes(env))
    assert (parsed.channel_id, parsed.seq, parsed.event_data_json) == ("c1", 7, '{"text":"hi"}')


def test_event_data_keeps_ints_and_audience_distinguishes_broadcast() -> None:
    from agentnet.v1 import envelope_pb2

    data = {"n": 3, "big": 2**62, "f": 1.5, "nested": {"xs": [1, 2, {"y": None}]}, "s": "ü"}
    env = envelope_pb2.Envelope(event_data_json=json.dumps(data))
    back = envelope_pb2.Envelope.FromString(env.SerializeToString())
    assert json.loads(back.event_data_json) == data
    assert isinstance(json.loads(back.event_data_json)["n"], int)
    assert not back.HasField("audience")  # broadcast
    explicit = envelope_pb2.Envelope(audience=envelope_pb2.Audience(agent_ids=[]))
    assert envelope_pb2.Envelope.FromString(explicit.SerializeToString()).HasField("audience")


def test_go_stubs_build() -> None:
    subprocess.run(["go", "build", "./..."], cwd=ROOT / "gen" / "go", check=True)
    subprocess.run(["go", "vet", "./..."], cwd=ROOT / "gen" / "go", check=True)


def test_typescript_stubs_typecheck() -> None:
    tsc = ROOT / "gen" / "ts" / "node_modules" / ".bin" / "tsc"
    assert tsc.exists(), "run `make node-deps` (make test does) to install gen/ts/node_modules"
    subprocess.run([str(tsc), "--noEmit", "-p", "."], cwd=ROOT / "gen" / "ts", check=True)


def test_generated_code_does_not_depend_on_checkout_location() -> None:
    out = subprocess.run(
        [sys.executable, "-c", "import agentnet.v1.hub_pb2 as m; print(m.__name__)"],
        cwd="/",
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "agentnet.v1.hub_pb2"
