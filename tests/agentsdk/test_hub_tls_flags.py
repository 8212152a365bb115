"""The gateways' flags for TLS to the hub (agentsdk.tls.add_hub_tls_arguments): one set of flags and
variables, read the same way by the A2A and the AG2 gateway."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from a2agateway.config import parse_options as a2a_options
from ag2gateway.config import parse_options as ag2_options
from agentsdk.tls import TlsConfig

GATEWAYS: dict[str, tuple[Callable[[list[str]], Any], str]] = {
    "a2agateway": (a2a_options, "AGENTNET_A2A_"),
    "ag2gateway": (ag2_options, "AGENTNET_AG2_"),
}


@pytest.fixture(params=sorted(GATEWAYS))
def gateway(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> tuple[Callable[[list[str]], Any], str]:
    """One gateway's option parser and its variables' prefix, with none of them set."""
    parse, prefix = GATEWAYS[request.param]
    for name in ("HUB_TLS", "HUB_CA_FILE", "HUB_CERT_FILE", "HUB_KEY_FILE", "HUB_SERVER_NAME"):
        monkeypatch.delenv(prefix + name, raising=False)
    return parse, prefix


def test_plaintext_unless_asked(gateway: tuple[Callable[[list[str]], Any], str]) -> None:
    parse, _ = gateway
    assert parse([]).hub_tls is None
    assert parse(["--hub-server-name", "hub.internal"]).hub_tls is None  # a name alone turns nothing on


def test_flags_build_the_tls_config(gateway: tuple[Callable[[list[str]], Any], str]) -> None:
    parse, _ = gateway
    assert parse(["--hub-tls"]).hub_tls == TlsConfig()
    assert parse(["--hub-ca-file", "ca.pem", "--hub-server-name", "hub.internal"]).hub_tls == TlsConfig(
        ca_file="ca.pem", server_name="hub.internal"
    )
    mtls = parse(["--hub-cert-file", "me.pem", "--hub-key-file", "me.key"]).hub_tls
    assert mtls == TlsConfig(cert_file="me.pem", key_file="me.key")


def test_variables_are_the_defaults(
    gateway: tuple[Callable[[list[str]], Any], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    parse, prefix = gateway
    monkeypatch.setenv(prefix + "HUB_TLS", "yes")
    assert parse([]).hub_tls == TlsConfig()
    monkeypatch.setenv(prefix + "HUB_CA_FILE", "ca.pem")
    assert parse(["--hub-ca-file", "other.pem"]).hub_tls == TlsConfig(ca_file="other.pem")  # the flag wins


def test_a_certificate_without_its_key_is_a_usage_error(
    gateway: tuple[Callable[[list[str]], Any], str], capsys: pytest.CaptureFixture[str]
) -> None:
    parse, _ = gateway
    for args in (["--hub-cert-file", "me.pem"], ["--hub-key-file", "me.key"]):
        with pytest.raises(SystemExit) as exited:
            parse(args)
        assert exited.value.code == 2
        assert "--hub-cert-file and --hub-key-file go together" in capsys.readouterr().err
