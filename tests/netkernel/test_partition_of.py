"""``netkernel.partitions.partition_of``: the documented hash clients can compute in any language."""

from __future__ import annotations

import pytest

from netkernel.partitions import MAX_PARTITIONS, partition_of


@pytest.mark.parametrize(
    ("channel_id", "count", "partition"),
    [
        ("123456789", 64, 38),  # CRC-32 0xCBF43926, the check value of the IEEE polynomial
        ("123456789", 1, 0),
        ("123456789", 1000, 262),  # 3421780262 mod 1000
        ("", 64, 0),  # CRC-32 of nothing is 0
        ("ch-é", 64, 30),  # UTF-8 bytes, not code points
        ("a", 16384, 0xE8B7BE43 % 16384),
    ],
)
def test_partition_vectors(channel_id: str, count: int, partition: int) -> None:
    assert partition_of(channel_id, count) == partition


@pytest.mark.parametrize("count", [0, -1, MAX_PARTITIONS + 1])
def test_a_count_out_of_range_is_refused(count: int) -> None:
    with pytest.raises(ValueError, match=r"partition count must be in \[1, 16384\]"):
        partition_of("c", count)
