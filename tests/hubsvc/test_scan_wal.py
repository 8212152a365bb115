"""SqliteHubStore.scan_wal (what hydrate and a channel's rebuild read): every record of each asked
channel exactly once, in seq order, channel by channel, in pages of at most ``batch`` — whatever
the channels' lengths, gaps in their seqs, or how many channels are asked for."""

from __future__ import annotations

from pathlib import Path

from hubsvc.storage import SqliteHubStore, WalRow, Writes


def record(channel_id: str, seq: int) -> WalRow:
    return WalRow(channel_id, seq, f"{channel_id}-{seq}", "s", "t", None, None, "2024", f"{channel_id}:{seq}".encode())


async def test_scan_returns_each_channels_records_once_in_seq_order_in_bounded_pages(tmp_path: Path) -> None:
    seqs = {
        "long": list(range(1, 24)),
        "gappy": [1, 2, 3, 9, 10, 30, 31],  # gaps wider than a page
        "one": [1],
        **{f"many{i:04d}": [1, 2] for i in range(1100)},  # more than one query's worth of channels
    }
    store = SqliteHubStore(tmp_path / "hub.db")
    await store.open()
    try:
        await store.commit(Writes(wal=[record(c, s) for c, ss in seqs.items() for s in ss]))
        await store.commit(Writes(wal=[record("other", 1)]))  # not asked for
        asked = [*seqs, "empty"]  # "empty" has no records at all
        pages = [page async for page in store.scan_wal(asked, batch=5)]
    finally:
        await store.close()
    assert all(0 < len(records) <= 5 for _, records in pages)
    got: dict[str, list[bytes]] = {}
    order: list[str] = []
    for channel_id, records in pages:
        if not order or order[-1] != channel_id:
            order.append(channel_id)
        got.setdefault(channel_id, []).extend(records)
    assert order == list(seqs)  # channel by channel, in the order asked
    assert got == {c: [f"{c}:{s}".encode() for s in ss] for c, ss in seqs.items()}
