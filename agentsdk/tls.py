"""TLS for every connection the SDK opens (hub, knowledge service, A2A, LangGraph apps):
:class:`TlsConfig` and :func:`open_channel`, the one place a gRPC channel and its credentials are built.

``tls=True`` verifies the service against gRPC's default root certificates;
``tls=TlsConfig(ca_file=...)`` against a private CA; ``cert_file`` + ``key_file`` present a
client certificate (mTLS; a hub started with ``--tls-bind-identity`` expects it to name the
agent: subject alternative name URI ``agentnet:agent:<name>`` or subject CN ``<name>``);
``server_name`` verifies the server certificate for that name instead of the target's host.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeAlias

import grpc

from netkernel.options import OptionSpec, add_options, named_specs, option, prefixed

ChannelOption: TypeAlias = tuple[str, int | str]


@dataclass(frozen=True)
class TlsConfig:
    """How the SDK verifies a service and (mTLS) proves who it is."""

    ca_file: str | os.PathLike[str] | None = None
    """PEM CA certificates the server's certificate must chain to; None: gRPC's default roots."""
    cert_file: str | os.PathLike[str] | None = None
    """PEM client certificate chain (mTLS; needs ``key_file``)."""
    key_file: str | os.PathLike[str] | None = None
    """PEM private key of ``cert_file``."""
    server_name: str | None = None
    """The name to verify the server certificate for (and send as SNI) instead of the target's host."""

    def __post_init__(self) -> None:
        if (self.cert_file is None) != (self.key_file is None):
            raise ValueError("TlsConfig needs both cert_file and key_file for a client certificate, or neither")

    def channel_credentials(self) -> grpc.ChannelCredentials:
        """The gRPC channel credentials (files are read now; ValueError names a file that cannot be read)."""
        return grpc.ssl_channel_credentials(
            root_certificates=_read(self.ca_file, "ca_file"),
            private_key=_read(self.key_file, "key_file"),
            certificate_chain=_read(self.cert_file, "cert_file"),
        )

    def channel_options(self) -> list[ChannelOption]:
        """Channel arguments the settings need (the server name override)."""
        return [("grpc.ssl_target_name_override", self.server_name)] if self.server_name else []


TlsSetting: TypeAlias = TlsConfig | bool | None
"""What ``tls=`` accepts: a :class:`TlsConfig`, True (default roots, no client certificate), or
None/False (plaintext)."""


def _read(path: str | os.PathLike[str] | None, what: str) -> bytes | None:
    if path is None:
        return None
    try:
        return Path(path).expanduser().read_bytes()
    except OSError as exc:
        raise ValueError(f"TlsConfig.{what}: cannot read {os.fspath(path)!r}: {exc.strerror}") from None


def tls_config(tls: TlsSetting) -> TlsConfig | None:
    """``tls`` as a :class:`TlsConfig` (None: plaintext)."""
    if tls is None or tls is False:
        return None
    if tls is True:
        return TlsConfig()
    if isinstance(tls, TlsConfig):
        return tls
    raise TypeError(f"tls must be a TlsConfig, True or None, not {type(tls).__name__}")


def open_channel(
    target: str,
    tls: TlsSetting,
    options: Sequence[ChannelOption] = (),
    interceptors: Sequence[grpc.aio.ClientInterceptor] = (),
) -> grpc.aio.Channel:
    """A ``grpc.aio`` channel to ``target``: TLS as ``tls`` says, plaintext without it; ``interceptors``
    wrap its calls (the SDK's client spans)."""
    config = tls_config(tls)
    wrap = list(interceptors) or None
    if config is None:
        return grpc.aio.insecure_channel(target, options=list(options), interceptors=wrap)
    return grpc.aio.secure_channel(
        target, config.channel_credentials(), options=[*options, *config.channel_options()], interceptors=wrap
    )


@dataclass(frozen=True)
class HubTlsFlags:
    """The flags of a process that connects to a hub (the gateways) for TLS to it: each variable is the
    process's prefix and the name given here (``AGENTNET_A2A_HUB_TLS``, ``AGENTNET_AG2_HUB_CA_FILE``)."""

    hub_tls: bool = option(False, "--hub-tls", "HUB_TLS", "connect to the hub over TLS")
    hub_ca_file: str = option(
        "", "--hub-ca-file", "HUB_CA_FILE", "PEM CA the hub's certificate must chain to (implies --hub-tls)"
    )
    hub_cert_file: str = option(
        "", "--hub-cert-file", "HUB_CERT_FILE", "PEM client certificate for mTLS to the hub (with --hub-key-file)"
    )
    hub_key_file: str = option("", "--hub-key-file", "HUB_KEY_FILE", "PEM private key of --hub-cert-file")
    hub_server_name: str = option(
        "",
        "--hub-server-name",
        "HUB_SERVER_NAME",
        "name to verify the hub's certificate for instead of the address's host",
    )


def hub_tls_option_specs(env_prefix: str) -> list[tuple[str, OptionSpec]]:
    """The :class:`HubTlsFlags` as the process with variables under ``env_prefix`` declares them."""
    return prefixed(named_specs(HubTlsFlags), env_prefix)


def add_hub_tls_arguments(parser: argparse.ArgumentParser, env_prefix: str) -> None:
    """Add ``--hub-tls``, ``--hub-ca-file``, ``--hub-cert-file``, ``--hub-key-file`` and
    ``--hub-server-name`` (:class:`HubTlsFlags`) for a process that connects to a hub (the gateways),
    each defaulting to the environment variable ``<env_prefix>HUB_TLS`` … ``<env_prefix>HUB_SERVER_NAME``;
    :func:`hub_tls_from_args` reads them back."""
    add_options(parser, hub_tls_option_specs(env_prefix), HubTlsFlags())


def hub_tls_from_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> TlsConfig | None:
    """The :class:`TlsConfig` the flags of :func:`add_hub_tls_arguments` describe (None: plaintext),
    removing them from ``args``; a client certificate without its key (or the reverse) is a usage
    error that exits."""
    on = args.hub_tls
    ca, cert, key, name = (
        v or None for v in (args.hub_ca_file, args.hub_cert_file, args.hub_key_file, args.hub_server_name)
    )
    for attr, _ in named_specs(HubTlsFlags):
        delattr(args, attr)
    if (cert is None) != (key is None):
        parser.error("--hub-cert-file and --hub-key-file go together: give both for mTLS to the hub, or neither")
    if not (on or ca or cert):
        return None
    return TlsConfig(ca_file=ca, cert_file=cert, key_file=key, server_name=name)
