"""Hub addresses: one ``host:port``, or several replicas to fail over between.

:func:`hub_target` turns what ``HubClient.connect`` was given into one gRPC target, so that
gRPC's own ``pick_first`` policy does the failover: it connects to the first address that
answers and, when that connection breaks, tries the addresses again in order.

* One string without a comma is passed to gRPC unchanged (``localhost:50051``,
  ``dns:///hub.example:50051`` — a DNS name with several A/AAAA records fails over the same
  way — ``ipv4:…``, ``unix:…``).
* Several addresses (a list, or one comma-separated string) must be IP literals of one family,
  ``127.0.0.1:5001`` or ``[::1]:5001``: they become ``ipv4:a:p,b:q`` / ``ipv6:[a]:p,[b]:q``.
  gRPC cannot list several host *names* in one target; give them one DNS name instead.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass

from netkernel.errors import InvalidArgument

_SCHEMES = ("dns:", "ipv4:", "ipv6:", "unix:", "unix-abstract:", "vsock:", "passthrough:")

HubTargets = str | Sequence[str]
"""What ``HubClient.connect`` accepts: ``"host:port"``, ``"a:p,b:q"``, or ``["a:p", "b:q"]``."""


@dataclass(frozen=True)
class HubTarget:
    """The gRPC target for a hub and the addresses it was made of."""

    grpc_target: str
    """The string handed to gRPC (``ipv4:a:p,b:q`` for several addresses)."""
    addresses: tuple[str, ...]
    """The addresses as given (one element for a single target)."""

    @property
    def several(self) -> bool:
        """True when gRPC fails over between several listed addresses."""
        return len(self.addresses) > 1


def hub_target(targets: HubTargets) -> HubTarget:
    """``targets`` as one gRPC target; InvalidArgument says what is wrong with a bad list."""
    if isinstance(targets, str):
        parts = [p.strip() for p in targets.split(",")] if "," in targets and not targets.startswith(_SCHEMES) else []
        if not parts:
            if not targets.strip():
                raise InvalidArgument("the hub target is empty: give 'host:port' or a list of 'host:port' addresses")
            return HubTarget(targets.strip(), (targets.strip(),))
    else:
        parts = [p.strip() if isinstance(p, str) else p for p in targets]
        if not all(isinstance(p, str) for p in parts):
            raise InvalidArgument(f"hub targets must be 'host:port' strings, got {parts!r}")
        if len(parts) == 1:
            return hub_target(parts[0])
    if not parts:
        raise InvalidArgument("the list of hub targets is empty: give at least one 'host:port'")
    hosts = [_address(p) for p in parts]
    families = {ipaddress.ip_address(h).version for h, _ in hosts}
    if len(families) > 1:
        raise InvalidArgument(
            f"hub targets {parts!r} mix IPv4 and IPv6 addresses: gRPC fails over within one family; list one family"
        )
    if families == {4}:
        return HubTarget("ipv4:" + ",".join(f"{h}:{p}" for h, p in hosts), tuple(parts))
    return HubTarget("ipv6:" + ",".join(f"[{h}]:{p}" for h, p in hosts), tuple(parts))


def _address(text: str) -> tuple[str, int]:
    """``(ip, port)`` of one of several targets; InvalidArgument unless it is ``IP:port`` / ``[IPv6]:port``."""
    host, sep, port_text = text.rpartition(":")
    if text.startswith(_SCHEMES):
        raise InvalidArgument(
            f"hub target {text!r} has a gRPC scheme: with several targets give plain 'IP:port' addresses, "
            "or pass one gRPC target string alone"
        )
    if not sep or not host:
        raise InvalidArgument(f"hub target {text!r} needs 'IP:port' (e.g. 127.0.0.1:50051 or [::1]:50051)")
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise InvalidArgument(f"hub target {text!r}: the port must be a number from 1 to 65535")
    bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        ipaddress.ip_address(bare)
    except ValueError:
        raise InvalidArgument(
            f"hub target {text!r}: several targets must be IP addresses, not host names (gRPC cannot list "
            "several names in one target); use one DNS name with several addresses, 'dns:///NAME:PORT', instead"
        ) from None
    return bare, int(port_text)
