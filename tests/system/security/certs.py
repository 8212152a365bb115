"""Throwaway certificates for the TLS tests, generated at run time (no key is ever committed).

As a library: :func:`make_ca`, :meth:`CertificateAuthority.server` and
:meth:`CertificateAuthority.client` return PEM bytes; :func:`write_bundle` writes a whole set.

As a command (the Go and TypeScript bridge tests use it)::

    python -m tests.system.security.certs OUTDIR [--client NAME ...] [--days N]

writes, with stable names::

    OUTDIR/ca.pem                           the CA certificate (trust it to verify the server and clients)
    OUTDIR/ca.key                           its key (only for signing more certificates)
    OUTDIR/server.pem, OUTDIR/server.key    server certificate: SAN DNS:localhost, IP:127.0.0.1, IP:::1
    OUTDIR/client-NAME.pem, client-NAME.key a client certificate naming agent NAME
                                            (subject CN=NAME and SAN URI agentnet:agent:NAME)

Keys are EC P-256, written 0600.
"""

from __future__ import annotations

import argparse
import datetime
import ipaddress
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

#: The URI SAN scheme that names an agent in a client certificate (``agentnet:agent:<name>``);
#: the hub's ``--tls-bind-identity`` reads it (servicekit/tls.py).
AGENT_URI_PREFIX = "agentnet:agent:"

_DEFAULT_DAYS = 2


@dataclass(frozen=True)
class KeyPair:
    """A certificate and its private key, both PEM."""

    cert: bytes
    key: bytes


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _window(days: int) -> tuple[datetime.datetime, datetime.datetime]:
    now = datetime.datetime.now(datetime.UTC)
    return now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=days)


@dataclass(frozen=True)
class CertificateAuthority:
    """A throwaway CA that signs server and client certificates."""

    name: str
    key: ec.EllipticCurvePrivateKey
    certificate: x509.Certificate
    days: int = _DEFAULT_DAYS

    @property
    def cert_pem(self) -> bytes:
        """The CA certificate, PEM."""
        return self.certificate.public_bytes(serialization.Encoding.PEM)

    @property
    def key_pem(self) -> bytes:
        """The CA key, PEM."""
        return _key_pem(self.key)

    def _issue(
        self,
        common_name: str,
        sans: Sequence[x509.GeneralName],
        *usages: x509.ObjectIdentifier,
    ) -> KeyPair:
        key = ec.generate_private_key(ec.SECP256R1())
        not_before, not_after = _window(self.days)
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
            .issuer_name(self.certificate.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(not_before)
            .not_valid_after(not_after)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage(list(usages)), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()), critical=False)
        )
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(list(sans)), critical=False)
        cert = builder.sign(self.key, hashes.SHA256())
        return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))

    def server(
        self,
        hosts: Sequence[str] = ("localhost", "127.0.0.1", "::1"),
        *,
        common_name: str = "",
        client_auth: bool = False,
    ) -> KeyPair:
        """A server certificate valid for ``hosts`` (DNS names or IP addresses); ``client_auth``: usable as a
        client certificate too (a hub replica presents its own when it calls the others)."""
        sans: list[x509.GeneralName] = []
        for host in hosts:
            try:
                sans.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                sans.append(x509.DNSName(host))
        usages = [ExtendedKeyUsageOID.SERVER_AUTH, *([ExtendedKeyUsageOID.CLIENT_AUTH] if client_auth else [])]
        return self._issue(common_name or hosts[0], sans, *usages)

    def client(
        self, name: str, *, uri: bool = True, common_name: str | None = None, uris: Sequence[str] = ()
    ) -> KeyPair:
        """A client certificate naming agent ``name``: subject CN ``name`` (or ``common_name``) and,
        with ``uri``, the SAN URI ``agentnet:agent:<name>``; ``uris`` adds more URI SANs."""
        names = [AGENT_URI_PREFIX + name] if uri else []
        sans = [x509.UniformResourceIdentifier(value) for value in [*names, *uris]]
        return self._issue(name if common_name is None else common_name, sans, ExtendedKeyUsageOID.CLIENT_AUTH)


def make_ca(name: str = "agentnet test CA", *, days: int = _DEFAULT_DAYS) -> CertificateAuthority:
    """A new self-signed CA."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    not_before, not_after = _window(days)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return CertificateAuthority(name, key, cert, days)


def write_file(path: Path, data: bytes, *, private: bool = False) -> Path:
    """Write ``data`` to ``path`` (mode 0600 when ``private``), replacing it atomically."""
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.replace(tmp, path)
    return path


@dataclass(frozen=True)
class Bundle:
    """The files :func:`write_bundle` wrote."""

    directory: Path
    ca: CertificateAuthority

    @property
    def ca_cert(self) -> Path:
        """``ca.pem``."""
        return self.directory / "ca.pem"

    @property
    def server_cert(self) -> Path:
        """``server.pem``."""
        return self.directory / "server.pem"

    @property
    def server_key(self) -> Path:
        """``server.key``."""
        return self.directory / "server.key"

    def client_cert(self, name: str) -> Path:
        """``client-<name>.pem``."""
        return self.directory / f"client-{name}.pem"

    def client_key(self, name: str) -> Path:
        """``client-<name>.key``."""
        return self.directory / f"client-{name}.key"


def write_pair(directory: Path, stem: str, pair: KeyPair) -> None:
    """Write ``<stem>.pem`` and ``<stem>.key`` (0600) in ``directory``."""
    write_file(directory / f"{stem}.pem", pair.cert)
    write_file(directory / f"{stem}.key", pair.key, private=True)


def write_bundle(
    directory: Path,
    clients: Sequence[str] = (),
    *,
    ca: CertificateAuthority | None = None,
    hosts: Sequence[str] = ("localhost", "127.0.0.1", "::1"),
) -> Bundle:
    """Write a CA, a server certificate for ``hosts`` and one client certificate per name in ``clients``."""
    directory.mkdir(parents=True, exist_ok=True)
    ca = ca or make_ca()
    write_file(directory / "ca.pem", ca.cert_pem)
    write_file(directory / "ca.key", ca.key_pem, private=True)
    write_pair(directory, "server", ca.server(hosts))
    for name in clients:
        write_pair(directory, f"client-{name}", ca.client(name))
    return Bundle(directory, ca)


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m tests.system.security.certs OUTDIR [--client NAME ...]``: write a throwaway certificate set."""
    parser = argparse.ArgumentParser(
        prog="python -m tests.system.security.certs", description="Write throwaway TLS certificates for tests."
    )
    parser.add_argument("outdir", type=Path, help="directory to write ca.pem, server.pem, server.key, client-*")
    parser.add_argument(
        "--client", action="append", default=[], metavar="NAME", help="also write client-NAME.pem/.key (repeatable)"
    )
    parser.add_argument(
        "--host",
        action="append",
        default=[],
        metavar="HOST",
        help="server certificate name (repeatable; default localhost, 127.0.0.1, ::1)",
    )
    parser.add_argument("--days", type=int, default=_DEFAULT_DAYS, help="validity in days (default 2)")
    args = parser.parse_args(argv)
    bundle = write_bundle(
        args.outdir,
        args.client,
        ca=make_ca(days=args.days),
        hosts=args.host or ("localhost", "127.0.0.1", "::1"),
    )
    print(bundle.directory)


if __name__ == "__main__":
    main()
