"""``python -m hubsvc.archive_import --db FILE ARCHIVE...``: read channel archives into a hub database.

For audits: each archive (:mod:`netkernel.archive`, what ``agentnet export`` and ``--archive-dir``
write) becomes an ended channel of the SQLite database ``FILE`` (created when missing) with its
envelopes as committed, byte for byte the messages the hub stored; ``python -m hubsvc --db FILE``
then serves it to ``agentnet describe`` / ``agentnet wal`` and the operator's ReadWal. Import into a
database of its own while no hub runs on it: the channel is stored ended whatever state it was
exported in (an export of a live channel keeps that state in its metadata), its participants need
not be identities of that database, and a channel id the database already holds is refused (exit 1,
nothing of that archive written).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from agentnet.v1 import envelope_pb2

from hubsvc.storage import SqliteHubStore, Writes
from hubsvc.storage.base import ChannelRow, WalRow
from netkernel.archive import ArchiveError, read_archive
from netkernel.envelope import EV_TEXT
from netkernel.wire import loads_json


def wal_row(channel_id: str, env: envelope_pb2.Envelope) -> WalRow:
    """The store's row of one committed envelope (the columns the hub indexes, and its bytes)."""
    text = None
    if env.event_type == EV_TEXT and env.event_data_json:
        value = loads_json(env.event_data_json).get("text")
        text = value if isinstance(value, str) else None
    return WalRow(
        channel_id=channel_id,
        seq=env.seq,
        envelope_id=env.envelope_id,
        sender_id=env.sender_id,
        event_type=env.event_type,
        idempotency_key=env.idempotency_key if env.HasField("idempotency_key") else None,
        text=text,
        created_at=env.created_at,
        data=env.SerializeToString(),
        causation_id=env.causation_id or None,
    )


async def import_archives(db: Path, archives: list[Path]) -> list[str]:
    """Import ``archives`` into the database ``db``; returns a line per archive saying what happened."""
    store = SqliteHubStore(db)
    await store.open()
    report = []
    try:
        for path in archives:
            try:
                channel, envelopes = await asyncio.to_thread(read_archive, path)
            except ArchiveError as exc:
                report.append(f"error: {exc}")
                continue
            channel_id = channel.channel_id
            if await store.get_channel(channel_id) is not None:
                report.append(f"error: {path}: channel {channel_id} is in {db} already; nothing imported")
                continue
            rows = [wal_row(channel_id, env) for env in envelopes]
            row = ChannelRow(channel_id, False, channel.SerializeToString())
            await store.commit(Writes(wal=rows, channels=[row]))  # one transaction: all of it or nothing
            report.append(f"imported {path}: channel {channel_id}, {len(rows)} envelopes")
    finally:
        await store.close()
    return report


def main(argv: list[str] | None = None) -> int:
    """Run the import; exit status 1 when any archive was not imported."""
    parser = argparse.ArgumentParser(prog="python -m hubsvc.archive_import", description=__doc__.split("\n")[0])
    parser.add_argument("--db", type=Path, required=True, help="the SQLite hub database to import into")
    parser.add_argument("archives", type=Path, nargs="+", help="channel archives (.jsonl.gz)")
    args = parser.parse_args(argv)
    report = asyncio.run(import_archives(args.db, args.archives))
    for line in report:
        print(line, file=sys.stderr if line.startswith("error") else sys.stdout)
    return 1 if any(line.startswith("error") for line in report) else 0


if __name__ == "__main__":
    sys.exit(main())
