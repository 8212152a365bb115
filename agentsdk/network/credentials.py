"""Credential files: where a long-running agent keeps the identity the hub issued it.

A credential file holds one identity's id, name, kind and credential as JSON, mode 0600 in
a 0700 directory, written atomically. ``register(..., credential_file=path)`` registers
and writes it the first time, and resumes the identity from it on every later start (with
its delivery cursors in ``<path>.cursors.json`` beside it); ``client.unregister()`` retires
the identity and removes both files.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from netkernel.errors import FailedPrecondition
from netkernel.files import private_dir, tighten


@dataclass(frozen=True)
class SavedIdentity:
    """What a credential file holds."""

    agent_id: str
    name: str
    kind: str
    credential: str = field(repr=False)
    """``<agent id>.<secret>``: never in a repr (logs, tracebacks)."""


class CredentialFile:
    """One identity's credential file, and the cursor file beside it."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path).expanduser()

    @property
    def cursors_path(self) -> Path:
        """Where the identity's delivery cursors are kept (``<path>.cursors.json``)."""
        return self.path.with_name(self.path.name + ".cursors.json")

    def load(self) -> SavedIdentity | None:
        """The saved identity; None when the file does not exist (FailedPrecondition when it is not ours)."""
        try:
            tighten(self.path)  # a credential readable by other users is made private (with a warning)
            data = json.loads(self.path.read_text(encoding="utf-8"))
            saved = SavedIdentity(
                agent_id=str(data["agent_id"]),
                name=str(data["name"]),
                kind=str(data["kind"]),
                credential=str(data["credential"]),
            )
        except FileNotFoundError:
            return None
        except (ValueError, KeyError, TypeError) as err:
            raise FailedPrecondition(
                f"{self.path} is not a credential file written by agentsdk ({err}); "
                "move it away to register a new identity.",
                metadata={"credential_file": str(self.path)},
            ) from None
        if not saved.credential.startswith(saved.agent_id + "."):
            raise FailedPrecondition(
                f"{self.path} holds a credential of another identity than {saved.agent_id!r}; "
                "move it away to register a new identity.",
                metadata={"credential_file": str(self.path)},
            )
        return saved

    def save(self, identity: SavedIdentity) -> None:
        """Write the file atomically: a 0600 temporary file, flushed to disk, renamed into place."""
        private_dir(self.path.parent)
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(asdict(identity), handle)
                handle.write("\n")
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, self.path)
        finally:
            tmp.unlink(missing_ok=True)
        directory = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(directory)  # the rename itself survives a crash
        finally:
            os.close(directory)

    def remove(self) -> None:
        """Delete the credential file and its cursor file (missing ones are fine)."""
        self.path.unlink(missing_ok=True)
        self.cursors_path.unlink(missing_ok=True)
