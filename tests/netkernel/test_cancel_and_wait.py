"""Stopping background tasks that lose a cancellation (netkernel.tasks.cancel_and_wait)."""

from __future__ import annotations

import asyncio

import pytest

from netkernel.tasks import cancel_and_wait


async def _loses_its_first_cancellation(swallowed: list[int]) -> None:
    """A loop that, like one cancelled inside Python 3.11's ``wait_for`` as its call completes,
    goes on after its first cancellation."""
    while True:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            if swallowed:
                raise
            swallowed.append(1)


async def test_a_task_that_swallows_a_cancellation_is_cancelled_again_until_it_ends() -> None:
    swallowed: list[int] = []
    task = asyncio.create_task(_loses_its_first_cancellation(swallowed), name="loop")
    await asyncio.sleep(0)
    assert await cancel_and_wait([task], timeout=5.0) == set()
    assert task.cancelled() and swallowed == [1]


async def test_a_task_that_never_ends_is_returned_after_the_timeout(caplog: pytest.LogCaptureFixture) -> None:
    release = asyncio.Event()

    async def stubborn() -> None:
        while not release.is_set():
            try:
                await release.wait()
            except asyncio.CancelledError:
                continue

    task = asyncio.create_task(stubborn(), name="stubborn")
    await asyncio.sleep(0)
    assert await cancel_and_wait([task], timeout=0.3) == {task}
    assert "stubborn" in caplog.text
    release.set()
    await task


async def test_a_failed_task_is_logged_not_raised_and_done_tasks_are_left_alone(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def fails() -> None:
        raise RuntimeError("boom")

    failed = asyncio.create_task(fails(), name="failing")
    finished = asyncio.create_task(asyncio.sleep(0), name="finished")
    await asyncio.sleep(0.01)
    assert await cancel_and_wait([failed, finished]) == set()
    assert "failing" in caplog.text and "boom" in caplog.text
    assert not finished.cancelled()
