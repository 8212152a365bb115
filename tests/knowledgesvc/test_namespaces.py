"""Namespace views of the built-in stores: isolated, flat, cached, closed with their root."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from pathlib import Path

import pytest

from agentsdk.errors import InvalidArgument
from agentsdk.knowledge import RemoteKnowledgeStore, StoreBase
from tests.knowledgesvc.conftest import open_backend
from tests.knowledgesvc.helpers import TOKEN, Recorder, assert_eventually, serve_in_process


@pytest.fixture(params=["memory", "sqlite", "disk", "redis", "remote"])
async def root(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[StoreBase]:
    async with AsyncExitStack() as stack:  # the tests close the root themselves; closing twice is harmless
        if request.param == "remote":
            backend = await stack.enter_async_context(await open_backend("memory", request, tmp_path))
            target = await stack.enter_async_context(serve_in_process(backend))
            remote = RemoteKnowledgeStore(target, namespace="root", credential=TOKEN)
            yield await stack.enter_async_context(remote)
        else:
            yield await stack.enter_async_context(await open_backend(request.param, request, tmp_path))


async def test_views_are_isolated_flat_and_cached(root: StoreBase) -> None:
    a, b = root.namespace("a"), root.namespace("b")
    assert root.namespace("a") is a
    assert a.namespace("b") is b  # flat: not a nested namespace
    await a.write("/same", "in a")
    await b.write("/same", "in b")
    await root.write("/same", "in root")
    assert [await s.read("/same") for s in (a, b, root)] == ["in a", "in b", "in root"]
    assert await a.list("/") == ["same"]
    await root.close()


async def test_closing_the_root_ends_view_subscriptions(root: StoreBase) -> None:
    view = root.namespace("watched")
    recorder = Recorder()
    sub = await view.on_change("/", recorder)
    await view.close()  # a view's close does nothing
    await view.write("/x", "1")
    await assert_eventually(lambda: _assert_count(recorder, 1))
    await root.close()
    assert not sub.active


def _assert_count(recorder: Recorder, count: int) -> None:
    assert len(recorder.events) == count


@pytest.mark.parametrize("kind", ["memory", "sqlite", "disk", "redis"])
async def test_namespace_names_are_validated(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    # (Remote names are validated by the service: tests/knowledgesvc/test_remote.py.)
    async with await open_backend(kind, request, tmp_path) as root:
        for bad in ("", "a/b", "..", "x" * 65):
            with pytest.raises(InvalidArgument):
                root.namespace(bad)
