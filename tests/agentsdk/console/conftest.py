"""The console against a real hub: the hub and ``agentnet console`` as processes, an SDK network on a
background event loop, an HTTP login helper, and a headless Debian chromium driven by selenium."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Coroutine, Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

from tests.procs import ROOT, ServiceProcess, interrupt, start_service

T = TypeVar("T")
_LISTENING = re.compile(r"agentnet-console listening on (\S+):(\d+)")
CHROMIUM_FLAGS = (
    # Headless, and off this machine's closed network: no background fetches, updates, sync or QUIC.
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--window-size=1280,820",
)


class LoopThread:
    """An event loop in a thread, so synchronous (browser) tests can keep SDK clients alive between steps."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 300.0) -> T:
        """Run ``coro`` on the loop and wait for its result."""
        future: Future[T] = asyncio.run_coroutine_threadsafe(coro, self.loop)
        return future.result(timeout)

    def stop(self) -> None:
        """Stop the loop and its thread."""
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)


@dataclass
class ConsoleProcess:
    """``agentnet console`` as a subprocess, and where it listens."""

    proc: subprocess.Popen[str]
    url: str
    output: list[str]

    def stop(self) -> int:
        """SIGINT (Ctrl-C), then its exit status."""
        return interrupt(self.proc)

    def line_matching(self, pattern: re.Pattern[str], timeout: float = 10.0) -> re.Match[str] | None:
        """The first output line ``pattern`` matches, waiting up to ``timeout`` seconds for it (the lines
        after "listening on" may still be on their way from the process); None if none came."""
        deadline = time.monotonic() + timeout
        while True:
            match = next((m for line in list(self.output) if (m := pattern.search(line))), None)
            if match is not None or time.monotonic() > deadline or self.proc.poll() is not None:
                return match
            time.sleep(0.02)


def start_console(hub: str, *args: str, cwd: Path, timeout: float = 30.0) -> ConsoleProcess:
    """Run ``agentnet --hub HUB console --port 0 ARGS`` and wait for its "listening on" line."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTNET_")}
    env["PYTHONUNBUFFERED"] = "1"
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentsdk.cli.app", "--hub", hub, "console", "--port", "0", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []
    found: list[str] = []
    ready = threading.Event()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            match = _LISTENING.search(line)
            if match and not found:
                found.append(f"http://{match.group(1)}:{match.group(2)}")
                ready.set()
        ready.set()

    threading.Thread(target=pump, daemon=True).start()
    if not ready.wait(timeout) or not found:
        proc.kill()
        raise RuntimeError("agentnet console did not start:\n" + "".join(lines))
    return ConsoleProcess(proc, found[0], lines)


def operator_token(data_dir: Path) -> str:
    """The hub's operator token (where ``python -m hubsvc`` writes it)."""
    return (data_dir / "hub-operator.token").read_text(encoding="utf-8").strip()


def login_form_csrf(html: str) -> str:
    """The CSRF token of the login form in ``html``."""
    match = re.search(r'name="csrf" value="([^"]+)"', html)
    assert match, html
    return match.group(1)


def login(client: httpx.Client, token: str, next_: str = "/") -> httpx.Response:
    """GET the login form and POST the token with its CSRF token (the client keeps the cookies)."""
    form = client.get("/login")
    return client.post("/login", data={"csrf": login_form_csrf(form.text), "token": token, "next": next_})


@dataclass
class Hub:
    """A hub process and its data directory."""

    process: ServiceProcess
    data_dir: Path

    @property
    def target(self) -> str:
        """host:port of the hub."""
        return self.process.target

    @property
    def token(self) -> str:
        """The operator token."""
        return operator_token(self.data_dir)


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hub]:
    """A hub process on SQLite, stopped after the module."""
    root = tmp_path_factory.mktemp("console-hub")
    process = start_service("hubsvc", ["--data-dir", str(root / "data")], cwd=root)
    try:
        yield Hub(process, root / "data")
    finally:
        process.terminate()


@pytest.fixture(scope="module")
def loop_thread() -> Iterator[LoopThread]:
    """A background event loop for the SDK."""
    thread = LoopThread()
    try:
        yield thread
    finally:
        thread.stop()


@pytest.fixture(scope="module")
def console(hub: Hub, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConsoleProcess]:
    """``agentnet console`` against the module's hub (a module may override it to pass options)."""
    process = start_console(hub.target, cwd=tmp_path_factory.mktemp("console"))
    try:
        yield process
    finally:
        assert process.stop() == 0, "".join(process.output)


def server_sent_events(response: httpx.Response) -> Iterator[tuple[str, dict[str, str]]]:
    """(event name, data) of each server-sent event of a streamed console response."""
    event = ""
    for line in response.iter_lines():
        if line.startswith("event: "):
            event = line.removeprefix("event: ")
        elif line.startswith("data: "):
            yield event, json.loads(line.removeprefix("data: "))


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Headless Debian chromium driven by chromedriver (a clear failure, not a skip, when missing)."""
    chromium = shutil.which("chromium")
    chromedriver = shutil.which("chromedriver")
    if chromium is None or chromedriver is None:
        pytest.fail(
            "the console's browser tests need Debian's chromium and chromium-driver (/usr/bin/chromium, "
            "/usr/bin/chromedriver), and they are not installed: run `make chromium` (`make test` does).",
            pytrace=False,
        )
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    driver = webdriver.Chrome(service=Service(executable_path=chromedriver), options=options)
    try:
        yield driver
    finally:
        driver.quit()


__all__ = [
    "ROOT",
    "ConsoleProcess",
    "Hub",
    "LoopThread",
    "login",
    "login_form_csrf",
    "server_sent_events",
    "start_console",
]
