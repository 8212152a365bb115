"""The channel archive format: one channel's envelopes as committed, gzip-compressed JSON lines.

What ``agentnet export`` writes, what the hub's ``--archive-dir`` writes before retention purges a
channel, and what ``python -m hubsvc.archive_import`` reads back into a hub database for audits
(docs/operations.md "Data over time"). A file holds, one JSON object per line:

1. the header: ``{"format": "agentnet.channel-archive", "version": 1, "channel": {ChannelMetadata},
   "written_at": RFC 3339}``;
2. one line per envelope in seq order: ``{"seq": N, "envelope": {Envelope}}``;
3. the trailer: ``{"end": true, "envelopes": COUNT}`` — a file without it was cut short.

``{ChannelMetadata}`` and ``{Envelope}`` are the messages of proto/agentnet/v1 in protobuf's JSON
mapping with the proto field names (``channel_id``, ``event_type``, ...), so any language's
protobuf runtime parses them back into the messages the hub committed. Files are written to a
temporary file beside the final name (``NAME.<random>.tmp``, one per writer: two hub replicas may
archive the same channel) and renamed once complete and synced, so a file under its final name is whole.
"""

from __future__ import annotations

import gzip
import json
import os
import tempfile
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from agentnet.v1 import channel_pb2, envelope_pb2
from google.protobuf import json_format

FORMAT = "agentnet.channel-archive"
"""The header's ``format``."""
VERSION = 1
"""The header's ``version`` (a reader refuses a newer one)."""
SUFFIX = ".jsonl.gz"
"""The archive files' name ending."""


class ArchiveError(ValueError):
    """A file is not a whole channel archive this version reads (the message says what is wrong)."""


def _json(message: Any) -> dict[str, Any]:
    return json_format.MessageToDict(message, preserving_proto_field_name=True)


def archive_name(channel_id: str) -> str:
    """The file name of a channel's archive."""
    return f"{channel_id}{SUFFIX}"


class ArchiveWriter:
    """Writes one channel's archive to ``path`` (through a temporary file beside it): the header at once, then
    :meth:`add` envelopes in seq order, then :meth:`finish` (or leave the ``with`` block)."""

    def __init__(self, path: Path, channel: channel_pb2.ChannelMetadata) -> None:
        self.path = path
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")  # one per writer
        self._tmp = Path(tmp)
        self._raw: IO[bytes] = os.fdopen(fd, "wb")  # closed by finish / abort
        self._gz = gzip.GzipFile(fileobj=self._raw, mode="wb", mtime=0)
        self.count = 0
        self._last = 0
        header = {
            "format": FORMAT,
            "version": VERSION,
            "channel": _json(channel),
            "written_at": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
        }
        self._line(header)

    def _line(self, obj: dict[str, Any]) -> None:
        self._gz.write(json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode() + b"\n")

    def add(self, envelopes: Iterable[envelope_pb2.Envelope]) -> None:
        """Append envelopes (seq order, each after the last one added)."""
        for env in envelopes:
            if env.seq <= self._last:
                raise ArchiveError(f"envelope seq {env.seq} comes after seq {self._last}: add them in seq order")
            self._last = env.seq
            self._line({"seq": env.seq, "envelope": _json(env)})
            self.count += 1

    def add_wire(self, records: Iterable[bytes]) -> None:
        """Append serialized envelopes as the store holds them."""
        self.add(envelope_pb2.Envelope.FromString(r) for r in records)

    def finish(self) -> Path:
        """Write the trailer, sync, and give the file its final name; returns it."""
        self._line({"end": True, "envelopes": self.count})
        self._gz.close()
        self._raw.flush()
        os.fsync(self._raw.fileno())
        self._raw.close()
        os.replace(self._tmp, self.path)
        return self.path

    def abort(self) -> None:
        """Drop the unfinished file."""
        self._gz.close()
        self._raw.close()
        self._tmp.unlink(missing_ok=True)

    def __enter__(self) -> ArchiveWriter:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        if kind is None:
            self.finish()
        else:
            self.abort()


def read_archive(path: Path) -> tuple[channel_pb2.ChannelMetadata, list[envelope_pb2.Envelope]]:
    """A whole archive's channel and envelopes; :class:`ArchiveError` for anything else (not gzip,
    another format or a newer version, a line that does not parse, seqs out of order, no trailer
    or a count that does not match)."""
    try:
        with gzip.open(path, "rt", encoding="utf-8") as f:
            lines = [json.loads(line) for line in f if line.strip()]
    except (OSError, EOFError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ArchiveError(f"{path}: not a gzip-compressed JSON-lines channel archive ({exc})") from None
    if not lines or not isinstance(lines[0], dict) or lines[0].get("format") != FORMAT:
        raise ArchiveError(f"{path}: the first line is not a {FORMAT} header")
    if lines[0].get("version") != VERSION:
        raise ArchiveError(f"{path}: archive version {lines[0].get('version')!r}; this reader reads {VERSION}")
    trailer = lines[-1]
    if len(lines) < 2 or not isinstance(trailer, dict) or trailer.get("end") is not True:
        raise ArchiveError(f"{path}: no trailer line: the file was cut short")
    try:
        channel = json_format.ParseDict(lines[0]["channel"], channel_pb2.ChannelMetadata())
        envelopes = [json_format.ParseDict(line["envelope"], envelope_pb2.Envelope()) for line in lines[1:-1]]
    except (KeyError, TypeError, json_format.ParseError) as exc:
        raise ArchiveError(f"{path}: a line does not parse as the format says ({exc})") from None
    if trailer.get("envelopes") != len(envelopes):
        raise ArchiveError(
            f"{path}: the trailer counts {trailer.get('envelopes')} envelopes, the file holds {len(envelopes)}"
        )
    seqs = [e.seq for e in envelopes]
    if seqs != sorted(set(seqs)):
        raise ArchiveError(f"{path}: envelope seqs are not strictly increasing")
    return channel, envelopes
