"""What a refusal may echo is bounded whatever the input (netkernel/clip.py)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from netkernel.clip import MAX_MESSAGE_BYTES, clip_detail, clip_text
from netkernel.errors import InvalidArgument, error_status


@given(st.text(max_size=5000), st.integers(min_value=64, max_value=2048))
def test_a_clipped_text_fits_its_budget_and_keeps_a_short_text(text: str, budget: int) -> None:
    clipped = clip_text(text, budget)
    assert len(clipped.encode("utf-8", "surrogatepass")) <= budget
    if len(text.encode("utf-8", "surrogatepass")) <= budget:
        assert clipped == text
    else:
        assert clipped.endswith("more bytes)")


def test_an_error_status_echoes_a_bounded_message_and_metadata() -> None:
    error = InvalidArgument("bad " + "é" * 1_000_000, metadata={f"k{i}": "v" * 100_000 for i in range(100)})
    status = error_status(error)
    assert len(status.details.encode()) <= MAX_MESSAGE_BYTES
    assert sum(len(value) for _, value in status.trailing_metadata) < 8192


def test_an_audit_detail_is_clipped_at_every_depth() -> None:
    detail = clip_detail({"message": "m" * 10_000, "ids": ["x" * 1000] * 1000, "n": 3})
    assert isinstance(detail, dict)
    assert len(str(detail)) < 16_000
    assert detail["n"] == 3
