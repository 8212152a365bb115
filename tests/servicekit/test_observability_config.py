"""--metrics-port / --metrics-host and the OTEL_* tracing settings of both services, and a real
``python -m hubsvc`` serving its metrics on the port it was given."""

from __future__ import annotations

import urllib.request
from pathlib import Path

import pytest

from hubsvc.config import parse_args as hub_args
from knowledgesvc.config import parse_args as knowledge_args
from servicekit.metrics import MetricsSettings
from servicekit.tracing import tracer_provider_from_env
from tests.procs import serving
from tests.redis_server import free_port

ROOT = Path(__file__).resolve().parents[2]


def test_metrics_are_off_by_default_and_loopback_when_on(monkeypatch: pytest.MonkeyPatch) -> None:
    assert hub_args([]).metrics is None
    assert knowledge_args([]).metrics is None
    assert hub_args(["--metrics-port", "9464"]).metrics == MetricsSettings(port=9464, host="127.0.0.1")
    assert knowledge_args(["--metrics-port", "9465", "--metrics-host", "0.0.0.0"]).metrics == MetricsSettings(
        port=9465, host="0.0.0.0"
    )
    monkeypatch.setenv("AGENTNET_HUB_METRICS_PORT", "9466")
    monkeypatch.setenv("AGENTNET_KNOWLEDGE_METRICS_PORT", "9467")
    assert hub_args([]).metrics == MetricsSettings(port=9466)
    assert knowledge_args([]).metrics == MetricsSettings(port=9467)
    assert hub_args(["--metrics-port", "0"]).metrics is None  # the flag wins over the environment


@pytest.mark.parametrize("parse", [hub_args, knowledge_args])
def test_a_bad_metrics_port_is_a_usage_error(parse: object, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse(["--metrics-port", "70000"])  # type: ignore[operator]
    assert "--metrics-port (AGENTNET_" in (err := capsys.readouterr().err) and "must be in [0, 65535] (0 = off)" in err


def test_tracing_is_off_unless_an_exporter_is_named() -> None:
    assert tracer_provider_from_env("agentnet-hub", {}) is None
    assert tracer_provider_from_env("agentnet-hub", {"OTEL_TRACES_EXPORTER": "none"}) is None
    on = {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317"}
    assert tracer_provider_from_env("agentnet-hub", {**on, "OTEL_SDK_DISABLED": "true"}) is None
    provider = tracer_provider_from_env("agentnet-hub", on)
    assert provider is not None
    assert provider.resource.attributes["service.name"] == "agentnet-hub"
    provider.shutdown()


def test_an_unusable_tracing_setting_says_what_to_set() -> None:
    with pytest.raises(ValueError, match="use otlp, console or none"):
        tracer_provider_from_env("agentnet-hub", {"OTEL_TRACES_EXPORTER": "zipkin"})
    with pytest.raises(ValueError, match="OTEL_EXPORTER_OTLP_PROTOCOL=grpc"):
        tracer_provider_from_env(
            "agentnet-hub", {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}
        )


def test_the_hub_process_serves_metrics_on_its_metrics_port(tmp_path: Path) -> None:
    port = free_port()
    with serving("hubsvc", ["--data-dir", str(tmp_path), "--metrics-port", str(port)], cwd=ROOT) as hub:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
            text = response.read().decode()
        assert "agentnet_hub_connected_streams 0.0" in text
        assert 'agentnet_hub_store_write_queue_bundles{store="sqlite"}' in text
        assert hub.terminate() == 0
