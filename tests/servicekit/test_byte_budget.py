"""servicekit.budget.ByteBudget: concurrent holders never exceed the budget; waiters go in order."""

from __future__ import annotations

import asyncio

import pytest

from servicekit.budget import ByteBudget


async def test_holders_never_exceed_the_budget_and_are_served_in_arrival_order() -> None:
    budget = ByteBudget(10)
    order: list[int] = []
    release = asyncio.Event()

    async def reader(n: int, size: int) -> None:
        async with budget.hold(size):
            order.append(n)
            assert budget.in_use <= budget.limit
            await release.wait()

    first = asyncio.create_task(reader(0, 8))
    await asyncio.sleep(0)  # let it take its 8 bytes
    later = [asyncio.create_task(reader(n, size)) for n, size in ((1, 5), (2, 1))]
    await asyncio.sleep(0)
    assert order == [0]  # 5 does not fit beside 8, and the 1 byte waits behind it (no overtaking)
    release.set()
    await asyncio.gather(first, *later)
    assert order == [0, 1, 2]
    assert budget.peak <= 10 and budget.in_use == 0


async def test_a_request_bigger_than_the_budget_runs_alone() -> None:
    budget = ByteBudget(10)
    async with budget.hold(25):
        assert budget.in_use == 10
    assert budget.in_use == 0


async def test_a_cancelled_waiter_gives_way() -> None:
    budget = ByteBudget(10)
    held = asyncio.Event()
    done = asyncio.Event()

    async def hog() -> None:
        async with budget.hold(10):
            held.set()
            await done.wait()

    hogging = asyncio.create_task(hog())
    await held.wait()
    big = asyncio.create_task(budget.hold(10).__aenter__())
    await asyncio.sleep(0)
    small_entered = asyncio.Event()

    async def small() -> None:
        async with budget.hold(1):
            small_entered.set()

    smalls = asyncio.create_task(small())
    big.cancel()
    with pytest.raises(asyncio.CancelledError):
        await big
    done.set()
    await hogging
    await asyncio.wait_for(small_entered.wait(), 5)
    await smalls
    assert budget.in_use == 0


def test_the_budget_must_be_positive() -> None:
    with pytest.raises(ValueError):
        ByteBudget(0)
