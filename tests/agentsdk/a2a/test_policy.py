"""Which destinations ``--a2a-outbound-allow`` lets the hub call (the check itself, no network)."""

from __future__ import annotations

import pytest

from hubsvc.core.remote_a2a import OutboundPolicy, card_location, name_from_card
from netkernel.errors import FailedPrecondition, InvalidArgument, PermissionDenied


def allowed(patterns: tuple[str, ...], url: str) -> bool:
    try:
        OutboundPolicy(patterns).check(url, "URL")
    except PermissionDenied:
        return False
    return True


def test_empty_allow_list_refuses_everything() -> None:
    with pytest.raises(FailedPrecondition, match="--a2a-outbound-allow"):
        OutboundPolicy(()).check("https://agents.example.com/", "card URL")


@pytest.mark.parametrize(
    ("patterns", "url", "expected"),
    [
        (("agents.example.com",), "https://agents.example.com/.well-known/agent-card.json", True),
        (("agents.example.com",), "http://AGENTS.example.com:8080/a2a", True),  # no port = any port
        (("agents.example.com",), "https://agents.example.com.evil.net/", False),
        (("agents.example.com",), "https://user@evil.net/?agents.example.com", False),
        (("*.internal:8443",), "https://billing.internal:8443/a2a", True),
        (("*.internal:8443",), "https://billing.internal/a2a", False),  # https default port 443
        (("*.internal:443",), "https://billing.internal/a2a", True),
        (("*.internal:80",), "http://billing.internal/a2a", True),
        (("127.0.0.1:50*",), "127.0.0.1:5051", True),  # a gRPC interface: host:port without a scheme
        (("127.0.0.1:50*",), "127.0.0.1:6051", False),
        (("[::1]",), "http://[::1]:9000/a2a", True),
        (("[::1]:9000",), "http://[::1]:9000/a2a", True),
        (("[::1]:9000",), "http://[::1]:9001/a2a", False),
        (("a.example", "b.example"), "https://b.example/", True),
    ],
)
def test_patterns(patterns: tuple[str, ...], url: str, expected: bool) -> None:
    assert allowed(patterns, url) is expected


def test_a_url_without_a_host_is_invalid() -> None:
    with pytest.raises(InvalidArgument, match="names no host"):
        OutboundPolicy(("*",)).check("https:///path", "card URL")


def test_card_locations_and_names() -> None:
    assert card_location("https://h/agent") == "https://h/agent/.well-known/agent-card.json"
    assert card_location("https://h/") == "https://h/.well-known/agent-card.json"
    assert card_location("https://h/cards/weather.json") == "https://h/cards/weather.json"
    assert name_from_card("Weather Agent (beta)") == "Weather-Agent-beta"
    assert name_from_card("***") == "remote-agent"
