"""``bench/history_bench.py`` at a tiny size: each round's sweep purges the round before it (the churn
figures mean nothing otherwise: its channels once had no type, so retention never purged them and
`make bench` printed a growing file unnoticed), and the backup runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.history_bench import backup, churn


async def test_each_sweep_purges_the_round_before(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert await churn(tmp_path, rounds=4, channels=5, envelopes=3) == [0, 5, 5, 5]
    assert "sweep purged    5 channels" in capsys.readouterr().out


async def test_the_backup_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    await backup(tmp_path, megabytes=1)
    assert "copy:" in capsys.readouterr().out
