"""The turns benchmark end to end at a tiny size: its report matches what the hub's WAL holds.

Behaviour only (every turn taken, in round robin, counted right); no timing is asserted."""

from __future__ import annotations

import sqlite3
from datetime import datetime
from pathlib import Path

import pytest

from bench.turns_bench import run, split

pytestmark = pytest.mark.slow

AGENTS, CHANNELS, TURNS = 8, 2, 5


def admitted(created_at: str) -> float:
    return datetime.fromisoformat(created_at.replace("Z", "+00:00")).timestamp()


def test_split_gives_every_channel_to_exactly_one_process() -> None:
    assert split(25, 1) == [(0, 25)]
    assert split(25, 4) == [(0, 7), (7, 6), (13, 6), (19, 6)]
    assert split(2, 5) == [(0, 1), (1, 1)]


async def test_tiny_run_reports_what_the_wal_holds(tmp_path: Path) -> None:
    report = await run(agents=AGENTS, channels=CHANNELS, turns=TURNS, agent_processes=2, workdir=tmp_path, timeout=60)

    records = report["channel_records"]
    assert report["agent_processes"] == 2 and len(records) == CHANNELS
    assert report["turns"] == CHANNELS * TURNS
    with sqlite3.connect(tmp_path / "hub.db") as db:
        total = 0
        for r in records:
            rows = db.execute(
                "SELECT seq, sender_id, event_type, created_at FROM wal WHERE channel_id = ? ORDER BY seq",
                (r["channel_id"],),
            ).fetchall()
            total += len(rows)
            assert r["envelopes"] == len(rows) and r["seqs_contiguous"]
            assert r["close_reason"] == "max_turns" and r["errors"] == []
            assert rows[-1][2] == "ag2.channel.closed"
            turns = [
                (sender, admitted(at)) for _seq, sender, kind, at in rows if kind in ("ag2.msg.text", "ag2.packet")
            ]
            assert [tuple(t) for t in r["turns"]] == turns  # same text, same parse: exact
            # strict round robin: the opener's seed, then each member in order, wrapping to the opener
            assert [sender for sender, _t in turns] == [r["participants"][k % 4] for k in range(TURNS)]
        assert report["envelopes"] == total
    assert report["turn_latency_samples"] == CHANNELS * (TURNS - 1)
    assert 0 < report["turn_latency_min_ms"] <= report["turn_latency_p50_ms"] <= report["turn_latency_p99_ms"]
    assert report["envelopes_per_s"] > report["turns_per_s"] > 0
    assert report["hub_rss_kb"] > 0 and all(kb > 0 for kb in report["agents_rss_kb"])
