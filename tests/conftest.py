"""Fixtures shared by every test package."""

from __future__ import annotations

import asyncio
import inspect
import signal
import threading
from collections.abc import Iterator

import pytest
from hypothesis import settings
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.redis_server import RedisCluster, RedisServer, RedisServerMissing, start_redis_cluster, start_redis_server

# Tests check behaviour, never timings: a property example that runs slowly on a loaded
# machine (CI, helpers sharing the cores) is not a failure.
settings.register_profile("agentnet", deadline=None)
settings.load_profile("agentnet")


def pytest_configure(config: pytest.Config) -> None:
    """Let the processes the tests start be interrupted with SIGINT, as from a terminal.

    A suite started as a background job of a non-interactive shell (``make test &`` in a script,
    ``nohup``) has SIGINT ignored, and a child process inherits that: the CLI and service tests
    that stop what they started with Ctrl-C would then wait for it in vain and kill it. A caught
    handler is not inherited (exec resets it), so the children start with the default action.
    """
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


TASK_DUMP_LEAD_SECONDS = 20.0
"""How long before pytest-timeout fails a hung async test its asyncio tasks' stacks are printed."""


@pytest.fixture(autouse=True)
def _print_tasks_of_a_hung_test(request: pytest.FixtureRequest) -> Iterator[None]:
    """When an async test is about to hit pytest-timeout, print where each of its tasks waits.

    pytest-timeout prints the threads' stacks, and a hung async test's main thread is always
    in the event loop's ``select``: the awaiting task is what says which call never returned.
    """
    timeout = float(request.config.getini("timeout") or 0)
    marker = request.node.get_closest_marker("timeout")
    if marker is not None and marker.args:
        timeout = float(marker.args[0])
    if not inspect.iscoroutinefunction(getattr(request.node, "function", None)) or timeout <= TASK_DUMP_LEAD_SECONDS:
        yield
        return
    loop = request.getfixturevalue("_function_scoped_runner").get_loop()

    def dump() -> None:
        print(f"+++ asyncio tasks of {request.node.nodeid}, {TASK_DUMP_LEAD_SECONDS:g} s before its timeout +++")
        for task in asyncio.all_tasks(loop):
            print(f"{task!r}:")
            for frame in task.get_stack():  # oldest first; a coroutine suspended in C has no line
                print(f"    {frame.f_code.co_filename}:{frame.f_lineno} in {frame.f_code.co_name}")

    timer = threading.Timer(timeout - TASK_DUMP_LEAD_SECONDS, lambda: loop.call_soon_threadsafe(dump))
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """One throw-away redis-server for the whole session (tests isolate by DB number or key prefix)."""
    try:
        server = start_redis_server(tmp_path_factory.mktemp("redis"))
    except RedisServerMissing as exc:
        pytest.fail(str(exc))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def redis_url(redis_server: RedisServer) -> str:
    """URL of DB 0 of the session's redis-server."""
    return redis_server.url(0)


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisCluster]:
    """One throw-away local Redis Cluster (three masters, no replicas) for the whole session
    (only database 0: tests isolate by key prefix and flush every node afterwards)."""
    try:
        cluster = start_redis_cluster(tmp_path_factory.mktemp("redis-cluster"))
    except RedisServerMissing as exc:
        pytest.fail(str(exc))
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def spans() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    """A tracer provider whose finished spans the in-memory exporter keeps (the tracing tests)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()
