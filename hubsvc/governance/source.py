"""Where the policy comes from: a file the hub loads at start and reloads when it changes.

:class:`PolicySource` loads the policy once (an invalid file at start is a
``ValueError`` the caller turns into a clear exit) and, while the hub runs, polls the
file's modification time every ``interval`` seconds. A changed file that validates is
put in force at once (audited ``policy_loaded`` with its SHA-256); one that does not is
logged and audited ``policy_reload_failed``, and the policy in force stays.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hubsvc.governance.governor import Governance
from hubsvc.governance.policy import Policy, load_policy

log = logging.getLogger("agentnet.hub")

Audit = Callable[[str, str, str, dict[str, Any]], None]


def policy_hash(text: bytes) -> str:
    """SHA-256 of a policy's text, as hex (names the version in force in the audit log)."""
    return hashlib.sha256(text).hexdigest()


class PolicySource:
    """The policy file of a hub (or a fixed :class:`Policy` given in code) and its reloads."""

    def __init__(self, policy: Policy | Path | str | None) -> None:
        self.path: Path | None = None
        self.given = policy is not None
        """A policy was given (an absent one is the empty policy, and is not audited)."""
        self._stamp: tuple[int, int, int] | None = None
        if policy is None or isinstance(policy, Policy):
            self.policy = policy or Policy()
            self.digest = policy_hash(self.policy.model_dump_json().encode())
        else:
            self.path = Path(policy)
            self._stamp = self._stat()
            self.policy, self.digest = self._read()

    def _stat(self) -> tuple[int, int, int] | None:
        assert self.path is not None
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return st.st_mtime_ns, st.st_size, st.st_ino

    def _read(self) -> tuple[Policy, str]:
        assert self.path is not None
        try:
            raw = self.path.read_bytes()
        except OSError as err:
            raise ValueError(f"policy file {self.path} cannot be read: {err.strerror or err}") from None
        return load_policy(self.path), policy_hash(raw)

    def loaded(self, audit: Audit) -> None:
        """Audit the policy in force as ``policy_loaded`` (at start; nothing when none was given)."""
        if not self.given:
            return
        audit("policy_loaded", "", str(self.path or ""), {"sha256": self.digest, "path": str(self.path or "")})

    def reload(self, governance: Governance, audit: Audit) -> bool:
        """Check the file once: load it if it changed since the last look; returns whether a new policy is in force."""
        if self.path is None:
            return False
        stamp = self._stat()
        if stamp == self._stamp:
            return False
        self._stamp = stamp
        try:
            policy, digest = self._read()
        except ValueError as err:
            log.error("policy reload failed, the previous policy stays in force: %s", err)
            audit(
                "policy_reload_failed",
                "",
                str(self.path),
                {"path": str(self.path), "error": str(err), "in_force_sha256": self.digest},
            )
            return False
        if digest == self.digest:
            return False
        self.policy, self.digest = policy, digest
        governance.replace(policy)
        log.info("policy %s reloaded (sha256 %s)", self.path, digest)
        audit("policy_loaded", "", str(self.path), {"sha256": digest, "path": str(self.path)})
        return True

    async def watch(self, governance: Governance, audit: Audit, interval: float) -> None:
        """Poll the file every ``interval`` seconds and reload it when it changes (runs until cancelled)."""
        if self.path is None:
            return
        while True:
            await asyncio.sleep(interval)
            self.reload(governance, audit)
