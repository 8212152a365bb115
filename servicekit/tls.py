"""Transport security shared by the hub and the knowledge service: TLS settings from flags, the
bind check (no plaintext on a non-loopback address without ``--insecure``), server credentials
that pick up a certificate replaced on disk without a restart, and the agent a verified client
certificate names.

How a client certificate names an agent (read by the hub's ``--tls-bind-identity``): by its
subject alternative name URI ``agentnet:agent:<name>``; a certificate without such a URI names
the agent in its subject common name (CN). A certificate with two different ``agentnet:agent:``
URIs names no agent.
"""

from __future__ import annotations

import argparse
import ipaddress
import logging
import os
import ssl
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import grpc

from netkernel.options import OptionSpec, add_options, named_specs, option, prefixed

log = logging.getLogger("agentnet.service")

#: The URI SAN scheme naming an agent in a client certificate: ``agentnet:agent:<passport name>``.
AGENT_URI_PREFIX = "agentnet:agent:"


class TlsConfigError(ValueError):
    """The TLS settings cannot be used (the message says what to fix)."""


@dataclass(frozen=True)
class ServerTls:
    """A service's TLS settings: its certificate chain and key, and (mTLS) the CA its clients'
    certificates must chain to."""

    cert_file: Path
    """PEM certificate chain the service presents (``--tls-cert``)."""
    key_file: Path
    """PEM private key of that certificate (``--tls-key``)."""
    client_ca_file: Path | None = None
    """PEM CA bundle; when set every client must present a certificate it verifies (``--tls-client-ca``)."""

    @property
    def mutual(self) -> bool:
        """Whether clients must present a verified certificate."""
        return self.client_ca_file is not None

    def check(self) -> None:
        """Raise :class:`TlsConfigError` unless the files are readable and usable (see :func:`load_material`)."""
        load_material(self)

    def files(self) -> tuple[Path, ...]:
        """The files these settings read."""
        return (self.cert_file, self.key_file, *((self.client_ca_file,) if self.client_ca_file else ()))


@dataclass(frozen=True)
class TlsMaterial:
    """The bytes of one checked, consistent set of TLS files."""

    cert: bytes
    key: bytes
    client_ca: bytes | None


def _read(path: Path, what: str, flag: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise TlsConfigError(f"cannot read the {what} {path} ({flag}): {exc.strerror}") from None


def load_material(tls: ServerTls) -> TlsMaterial:
    """Read and check the files of ``tls``: the certificate and key must parse and belong together,
    the client CA must hold at least one certificate. Raises :class:`TlsConfigError`."""
    cert = _read(tls.cert_file, "TLS certificate", "--tls-cert")
    key = _read(tls.key_file, "TLS key", "--tls-key")
    client_ca = _read_ca(tls.client_ca_file, "client CA", "--tls-client-ca") if tls.client_ca_file else None
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(tls.cert_file, tls.key_file)
    except ssl.SSLError as exc:
        raise TlsConfigError(
            f"the TLS certificate {tls.cert_file} and key {tls.key_file} are not a usable PEM certificate and "
            f"its matching private key ({exc.reason or exc}); check --tls-cert and --tls-key"
        ) from None
    except OSError as exc:
        raise TlsConfigError(f"cannot load the TLS certificate and key: {exc}") from None
    return TlsMaterial(cert, key, client_ca)


def _read_ca(path: Path, what: str, flag: str) -> bytes:
    """The PEM CA bundle at ``path``, checked to hold at least one usable certificate (else
    :class:`TlsConfigError` naming ``flag``)."""
    data = _read(path, what, flag)
    try:
        ssl.create_default_context(cadata=data.decode("ascii", "replace"))
    except (ssl.SSLError, ValueError) as exc:
        raise TlsConfigError(f"the {what} file {path} holds no usable PEM certificate ({exc}); check {flag}") from None
    return data


def peer_credentials(tls: ServerTls, ca_file: Path | None, ca_flag: str) -> grpc.ChannelCredentials:
    """The credentials a service dials its peers with (replicas of one service calling each other):
    their certificates verified against the PEM bundle ``ca_file`` (None: gRPC's default roots), and
    this service's own certificate and key presented, for peers that require client certificates.
    Raises :class:`TlsConfigError` (naming ``ca_flag``) when the bundle cannot be used."""
    material = load_material(tls)
    roots = _read_ca(ca_file, "CA", ca_flag) if ca_file is not None else None
    return grpc.ssl_channel_credentials(
        root_certificates=roots, private_key=material.key, certificate_chain=material.cert
    )


def _fingerprint(paths: Sequence[Path]) -> tuple[tuple[int, int, int], ...] | None:
    """What changes when a file is replaced or rewritten (inode, size, mtime); None if one is missing."""
    marks = []
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            return None
        marks.append((st.st_ino, st.st_size, st.st_mtime_ns))
    return tuple(marks)


class CertificateReloader:
    """The certificate-configuration fetcher of :func:`server_credentials`.

    gRPC calls it before each new TLS handshake. It re-reads the files when their inode, size or
    modification time changed since the configuration in use was loaded, and returns the new
    configuration (None: keep the current one). A half-replaced set (a new certificate beside the
    old key) or an unreadable file keeps the current configuration, with one warning per state, and is
    tried again on the next handshake; connections already open are not affected."""

    def __init__(self, tls: ServerTls) -> None:
        self._tls = tls
        self._lock = threading.Lock()
        self._loaded = _fingerprint(tls.files())
        self.initial = self._configuration(load_material(tls))
        self._warned: object = None
        self.reloads = 0
        """How many times a changed set of files was put in use."""

    @staticmethod
    def _configuration(material: TlsMaterial) -> grpc.ServerCertificateConfiguration:
        return grpc.ssl_server_certificate_configuration([(material.key, material.cert)], material.client_ca)

    def __call__(self) -> grpc.ServerCertificateConfiguration | None:
        """The new configuration when the files changed, else None."""
        with self._lock:
            current = _fingerprint(self._tls.files())
            if current is None or current == self._loaded:
                if current is None and self._warned != "missing":
                    self._warned = "missing"
                    log.warning("a TLS file of %s is missing; new connections keep the loaded certificate", self._tls)
                return None
            try:
                material = load_material(self._tls)
            except TlsConfigError as exc:
                if self._warned != current:
                    self._warned = current
                    log.warning("TLS files changed but cannot be used yet (%s); keeping the loaded certificate", exc)
                return None
            if _fingerprint(self._tls.files()) != current:  # replaced again while reading: next handshake retries
                return None
            self._loaded = current
            self._warned = None
            self.reloads += 1
            log.info("TLS certificate reloaded from %s", self._tls.cert_file)
            return self._configuration(material)


def server_credentials(tls: ServerTls) -> tuple[grpc.ServerCredentials, CertificateReloader]:
    """Server credentials for ``tls`` that follow the files: new handshakes use a certificate, key or
    client CA replaced on disk (see :class:`CertificateReloader`). With a client CA, a client
    certificate is required and verified. Raises :class:`TlsConfigError` for unusable files."""
    reloader = CertificateReloader(tls)
    credentials = grpc.dynamic_ssl_server_credentials(
        reloader.initial, reloader, require_client_authentication=tls.mutual
    )
    return credentials, reloader


# -- configuration --------------------------------------------------------------------------------


def is_loopback(host: str) -> bool:
    """Whether ``host`` only accepts connections from this machine (127.0.0.0/8, ::1, localhost).
    The wildcard addresses 0.0.0.0 and :: are not loopback: they listen on every interface."""
    name = host.strip().strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class ServerTlsFlags:
    """The flags of a served port's transport security, shared by every service: each variable is the
    service's prefix and the name given here (``AGENTNET_HUB_TLS_CERT``, ``AGENTNET_KNOWLEDGE_INSECURE``)."""

    tls_cert: Path | None = option(
        None,
        "--tls-cert",
        "TLS_CERT",
        "PEM certificate chain to serve TLS with (needs --tls-key); reloaded when replaced",
        parse=Path,
    )
    tls_key: Path | None = option(
        None, "--tls-key", "TLS_KEY", "PEM private key of --tls-cert; reloaded when replaced", parse=Path
    )
    tls_client_ca: Path | None = option(
        None,
        "--tls-client-ca",
        "TLS_CLIENT_CA",
        "PEM CA bundle: require and verify a client certificate signed by it (mTLS; needs --tls-cert)",
        parse=Path,
    )
    insecure: bool = option(
        False,
        "--insecure",
        "INSECURE",
        "allow serving plaintext (no TLS) on a non-loopback address; anyone on the network can read "
        "and replay credentials",
    )


def tls_option_specs(env_prefix: str) -> list[tuple[str, OptionSpec]]:
    """The :class:`ServerTlsFlags` as the service with variables under ``env_prefix`` declares them."""
    return prefixed(named_specs(ServerTlsFlags), env_prefix)


def add_tls_arguments(parser: argparse.ArgumentParser, env_prefix: str) -> None:
    """Add ``--tls-cert``, ``--tls-key``, ``--tls-client-ca`` and ``--insecure`` (:class:`ServerTlsFlags`),
    each defaulting to the environment variable ``<env_prefix>TLS_CERT`` … ``<env_prefix>INSECURE``."""
    add_options(parser, tls_option_specs(env_prefix), ServerTlsFlags())


def tls_settings(
    host: str, cert: Path | None, key: Path | None, client_ca: Path | None, *, insecure: bool
) -> ServerTls | None:
    """The TLS settings the flags describe (None: plaintext), or :class:`TlsConfigError` when they are
    incomplete, or when plaintext would be served on a non-loopback ``host`` without ``insecure``."""
    if (cert is None) != (key is None):
        given, missing = ("--tls-cert", "--tls-key") if key is None else ("--tls-key", "--tls-cert")
        raise TlsConfigError(f"{given} needs {missing}: pass both the certificate and its private key")
    if cert is None or key is None:
        if client_ca is not None:
            raise TlsConfigError("--tls-client-ca needs --tls-cert and --tls-key: mTLS runs over TLS")
        if not insecure and not is_loopback(host):
            raise TlsConfigError(
                f"refusing to serve plaintext on {host}, which is reachable from other machines: pass "
                "--tls-cert and --tls-key to serve TLS, listen on 127.0.0.1, or pass --insecure to accept "
                "that credentials travel unencrypted"
            )
        return None
    return ServerTls(cert, key, client_ca)


def tls_from_args(parser: argparse.ArgumentParser, args: argparse.Namespace, host: str) -> ServerTls | None:
    """:func:`tls_settings` of parsed :func:`add_tls_arguments` flags; a bad combination is a usage error."""
    try:
        return tls_settings(host, args.tls_cert, args.tls_key, args.tls_client_ca, insecure=args.insecure)
    except TlsConfigError as exc:
        parser.error(str(exc))


# -- the peer's certificate -----------------------------------------------------------------------


def certificate_agent(auth_context: Mapping[str, Sequence[bytes]]) -> str | None:
    """The agent a verified client certificate names (see the module docstring), or None when the
    connection carries no client certificate or it names no agent unambiguously."""
    uris = {
        value.decode("utf-8", "replace")[len(AGENT_URI_PREFIX) :]
        for value in auth_context.get("peer_uri", ())  # the certificate's URI subject alternative names
        if value.decode("utf-8", "replace").startswith(AGENT_URI_PREFIX)
    }
    if len(uris) == 1:
        return uris.pop() or None
    if uris:
        return None
    names = auth_context.get("x509_common_name", ())
    if len(names) != 1:
        return None
    return names[0].decode("utf-8", "replace") or None
