"""Fixtures of the cross-language bridge tests.

Session-scoped builds: the Go examples are ``go build``-t into a temp dir, the
TypeScript bridge gets ``npm ci`` (only when ``bridges/ts/node_modules`` is missing)
and ``npm run build``, so ``pytest tests/bridges`` works from a clean clone with Go
and Node 20 on PATH. Every bridge process is an asyncio subprocess (the embedded hub
runs on the test's event loop, so nothing here may block it) and is terminated in
teardown.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from agentsdk.network import Hub
from agentsdk.testing import ScriptedOpenAIServer

ROOT = Path(__file__).resolve().parents[2]
GO_DIR = ROOT / "bridges" / "go"
TS_DIR = ROOT / "bridges" / "ts"
TS_EXAMPLES = TS_DIR / "dist" / "bridges" / "ts" / "examples"
GO_EXAMPLES = ("consulting_agent", "delegator", "discussion_participant")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "bridges: cross-language tests with the Go and TypeScript bridges")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if Path(str(item.fspath)).is_relative_to(Path(__file__).parent):
            item.add_marker(pytest.mark.bridges)


def _run(cmd: list[str], cwd: Path, what: str, timeout: float = 300) -> None:
    tool = shutil.which(cmd[0])
    if tool is None:
        pytest.fail(f"{cmd[0]} is not on PATH; the bridge tests need Go and Node.js 20+ ({what})")
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False)
    if proc.returncode != 0:
        pytest.fail(f"{what} failed ({' '.join(cmd)} in {cwd}):\n{proc.stdout}\n{proc.stderr}")


@pytest.fixture(scope="session")
def go_bins(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The Go examples, built once per session: name → binary."""
    out = tmp_path_factory.mktemp("go-bin")
    bins = {}
    for name in GO_EXAMPLES:
        bins[name] = out / name
        _run(["go", "build", "-o", str(bins[name]), f"./examples/{name}"], GO_DIR, f"go build {name}")
    return bins


@pytest.fixture(scope="session")
def ts_examples() -> Path:
    """bridges/ts compiled (dist/); the directory of the compiled examples."""
    if not (TS_DIR / "node_modules").is_dir():
        _run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], TS_DIR, "npm ci in bridges/ts")
    _run(["npm", "run", "build", "--silent"], TS_DIR, "npm run build in bridges/ts")
    return TS_EXAMPLES


@dataclass
class BridgeProcess:
    """A bridge subprocess whose stdout lines are collected (JSON lines decoded when they parse)."""

    name: str
    proc: asyncio.subprocess.Process
    lines: list[str] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    stderr: list[str] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    _readers: list[asyncio.Task[None]] = field(default_factory=list)

    def start_readers(self) -> None:
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self._readers = [
            asyncio.create_task(self._pump(self.proc.stdout, self.lines, decode=True)),
            asyncio.create_task(self._pump(self.proc.stderr, self.stderr, decode=False)),
        ]

    async def _pump(self, stream: asyncio.StreamReader, into: list[str], *, decode: bool) -> None:
        async for raw in stream:
            line = raw.decode(errors="replace").rstrip("\n")
            into.append(line)
            if decode:
                with contextlib.suppress(ValueError):
                    obj = json.loads(line)
                    if isinstance(obj, dict):
                        self.events.append(obj)
            self.changed.set()
        self.changed.set()

    def describe(self) -> str:
        return f"{self.name} (exit {self.proc.returncode}):\nstdout:\n" + "\n".join(
            [*self.lines, "stderr:", *self.stderr]
        )

    async def wait_event(self, predicate: Callable[[dict[str, Any]], bool], timeout: float = 20) -> dict[str, Any]:
        """The first JSON event matching ``predicate``; fails with the process output after ``timeout``."""
        return await self._wait(lambda: next((e for e in self.events if predicate(e)), None), timeout)

    async def wait_line(self, predicate: Callable[[str], bool], timeout: float = 20) -> str:
        """The first stdout line matching ``predicate``."""
        return await self._wait(lambda: next((s for s in self.lines if predicate(s)), None), timeout)

    async def _wait(self, find: Callable[[], Any], timeout: float) -> Any:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while (found := find()) is None:
            if all(r.done() for r in self._readers) and self.proc.returncode is not None:
                pytest.fail(f"{self.describe()}\nended without the expected output")
            self.changed.clear()
            remaining = deadline - loop.time()
            if remaining <= 0:
                pytest.fail(f"{self.describe()}\ntimed out after {timeout:g}s waiting for the expected output")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), min(remaining, 0.5))
        return found

    async def wait_exit(self, timeout: float = 20) -> int:
        """The exit code (fails with the output when the process does not exit in time)."""
        try:
            code = await asyncio.wait_for(self.proc.wait(), timeout)
        except TimeoutError:
            pytest.fail(f"{self.describe()}\ndid not exit within {timeout:g}s")
        await asyncio.gather(*self._readers, return_exceptions=True)
        return code

    async def stop(self) -> None:
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.proc.wait(), 8)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    self.proc.kill()
                await self.proc.wait()
        for r in self._readers:
            r.cancel()
        await asyncio.gather(*self._readers, return_exceptions=True)


Launcher = Callable[..., Any]


@pytest.fixture
async def launch() -> AsyncIterator[Launcher]:
    """``await launch(name, *argv)`` starts a bridge process; all of them are stopped in teardown."""
    started: list[BridgeProcess] = []

    async def start(name: str, *argv: str | Path) -> BridgeProcess:
        proc = await asyncio.create_subprocess_exec(
            *(str(a) for a in argv),
            cwd=ROOT,
            env=dict(os.environ, PYTHONUNBUFFERED="1"),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        bp = BridgeProcess(name=name, proc=proc)
        bp.start_readers()
        started.append(bp)
        return bp

    yield start
    await asyncio.gather(*(bp.stop() for bp in started))


@pytest.fixture
async def hub() -> AsyncIterator[Hub]:
    async with Hub.open() as h:
        yield h


@pytest.fixture
def scripted() -> Iterator[Callable[[Callable[[dict[str, Any]], str]], Any]]:
    """``scripted(rule)`` → an OpenAIConfig whose model answers every request with ``rule(request)``."""
    from agentsdk import OpenAIConfig

    made: list[ScriptedOpenAIServer] = []

    def make(rule: Callable[[dict[str, Any]], str]) -> OpenAIConfig:
        server = ScriptedOpenAIServer((), rule=rule)
        server.start()
        made.append(server)
        return OpenAIConfig(model="scripted", base_url=server.base_url, api_key="test")

    yield make
    for s in made:
        s.stop()


def last_user(request: dict[str, Any]) -> str:
    """The last user message of a chat-completions request."""
    texts = [m["content"] for m in request["messages"] if m["role"] == "user" and isinstance(m.get("content"), str)]
    return texts[-1]
