"""Where the ``agentnet`` command connects and with which secret, from options and the environment.

Secrets never need to be on the command line: the operator token is read from a file
(``--token-file`` / ``AGENTNET_OPERATOR_TOKEN_FILE``, default ``<data-dir>/hub-operator.token``,
where ``python -m hubsvc`` and ``make serve`` write it) or ``AGENTNET_OPERATOR_TOKEN``; an agent's
credential from its SDK credential file (``--credential-file`` / ``AGENTNET_CREDENTIAL_FILE``) or
``AGENTNET_CREDENTIAL``; the knowledge service's token from ``--knowledge-token-file`` /
``AGENTNET_KNOWLEDGE_TOKEN_FILE`` (default ``<data-dir>/knowledge.token``) or
``AGENTNET_KNOWLEDGE_TOKEN``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from agentsdk.network.credentials import CredentialFile
from agentsdk.tls import TlsConfig, TlsSetting

DEFAULT_HUB = "127.0.0.1:50051"
DEFAULT_KNOWLEDGE = "127.0.0.1:50052"


class SettingsError(Exception):
    """A setting is missing or unusable; the message says what to do."""


@dataclass(frozen=True)
class Settings:
    """What the command line was told (options win over environment variables)."""

    hub: str = DEFAULT_HUB
    knowledge: str = DEFAULT_KNOWLEDGE
    data_dir: Path = Path("data")
    token_file: Path | None = None
    credential_file: Path | None = None
    knowledge_token_file: Path | None = None
    namespace: str = "default"
    tls: bool = False
    tls_ca: Path | None = None
    tls_cert: Path | None = None
    tls_key: Path | None = None
    tls_server_name: str = ""
    timeout: float = 30.0

    def tls_setting(self) -> TlsSetting:
        """The SDK's TLS setting (None: plaintext)."""
        if not (self.tls or self.tls_ca or self.tls_cert or self.tls_key or self.tls_server_name):
            return None
        if bool(self.tls_cert) != bool(self.tls_key):
            raise SettingsError("--tls-cert and --tls-key go together: give both for mTLS, or neither.")
        return TlsConfig(
            ca_file=self.tls_ca,
            cert_file=self.tls_cert,
            key_file=self.tls_key,
            server_name=self.tls_server_name or None,
        )

    def secret(self) -> tuple[str, bool]:
        """(the bearer secret, whether it is an agent credential rather than the operator token)."""
        credential = self._agent_credential()
        if credential:
            return credential, True
        return self.operator_token(), False

    def operator_token(self) -> str:
        """The hub's operator token: ``AGENTNET_OPERATOR_TOKEN``, or the token file (``--token-file``,
        default ``<data-dir>/hub-operator.token``)."""
        env_token = os.environ.get("AGENTNET_OPERATOR_TOKEN", "").strip()
        if env_token and self.token_file is None:
            return env_token
        path = self.token_file or self.data_dir / "hub-operator.token"
        try:
            token = path.read_text(encoding="utf-8").strip()
        except OSError as err:
            raise SettingsError(
                f"cannot read the operator token from {path} ({err.strerror or err}): point --token-file "
                "(or AGENTNET_OPERATOR_TOKEN_FILE) at the hub's hub-operator.token, set --data-dir to the hub's "
                "data directory, or set AGENTNET_OPERATOR_TOKEN."
            ) from None
        if not token:
            raise SettingsError(f"the operator token file {path} is empty: it should hold the hub's operator token.")
        return token

    def as_agent(self) -> bool:
        """Whether the command runs as an agent (a credential file or ``AGENTNET_CREDENTIAL`` is given)."""
        return self.credential_file is not None or bool(os.environ.get("AGENTNET_CREDENTIAL", "").strip())

    def _agent_credential(self) -> str:
        if self.credential_file is not None:
            saved = CredentialFile(self.credential_file).load()
            if saved is None:
                raise SettingsError(
                    f"no agent credential in {self.credential_file}: give the file an SDK register(..., "
                    "credential_file=...) wrote."
                )
            return saved.credential
        return os.environ.get("AGENTNET_CREDENTIAL", "").strip()

    def knowledge_token(self) -> str:
        """The knowledge service's bearer token."""
        env_token = os.environ.get("AGENTNET_KNOWLEDGE_TOKEN", "").strip()
        if env_token and self.knowledge_token_file is None:
            return env_token
        path = self.knowledge_token_file or self.data_dir / "knowledge.token"
        try:
            token = path.read_text(encoding="utf-8").split()
        except OSError as err:
            raise SettingsError(
                f"cannot read the knowledge token from {path} ({err.strerror or err}): point --knowledge-token-file "
                "(or AGENTNET_KNOWLEDGE_TOKEN_FILE) at a token the knowledge service grants, or set "
                "AGENTNET_KNOWLEDGE_TOKEN."
            ) from None
        if not token:
            raise SettingsError(f"the knowledge token file {path} is empty.")
        return token[0]
