"""Start our services as real subprocesses on free ports (tests, benchmarks, scripts)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_LISTENING = re.compile(r"listening on (\S+):(\d+)")


def interrupt(proc: subprocess.Popen[str], timeout: float = 15.0) -> int:
    """Ctrl-C (SIGINT) a command, then its exit status (killed if it has not exited within ``timeout`` s)."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()


@dataclass
class ServiceProcess:
    """A running service subprocess and the port it bound."""

    proc: subprocess.Popen[str]
    host: str
    port: int
    output: list[str] = field(default_factory=list)

    @property
    def target(self) -> str:
        """``host:port`` to dial."""
        return f"{self.host}:{self.port}"

    def terminate(self, sig: int = signal.SIGTERM, timeout: float = 15.0) -> int:
        """Send ``sig`` and wait for the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(timeout=timeout)


def start_service(
    module: str,
    args: Sequence[str],
    *,
    cwd: Path,
    timeout: float = 30.0,
    port: int = 0,
    env: Mapping[str, str] | None = None,
) -> ServiceProcess:
    """Run ``python -m <module> --port <port> <args>`` (``env`` added to this process's environment)
    and wait for its "listening on" line."""
    env = dict(os.environ, PYTHONUNBUFFERED="1", **(env or {}))
    proc = subprocess.Popen(
        [sys.executable, "-m", module, "--port", str(port), *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    lines: list[str] = []
    found: list[tuple[str, int]] = []
    ready = threading.Event()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            m = _LISTENING.search(line)
            if m and not found:
                found.append((m.group(1), int(m.group(2))))
                ready.set()
        ready.set()

    threading.Thread(target=pump, daemon=True).start()
    if not ready.wait(timeout) or not found:
        proc.kill()
        raise RuntimeError(f"{module} did not start:\n{''.join(lines)}")
    host, port = found[0]
    return ServiceProcess(proc=proc, host=host, port=port, output=lines)


@contextmanager
def serving(module: str, args: Sequence[str], *, cwd: Path, timeout: float = 30.0) -> Iterator[ServiceProcess]:
    """:func:`start_service` for the length of a ``with`` block; killed at its end if still running."""
    proc = start_service(module, args, cwd=cwd, timeout=timeout)
    try:
        yield proc
    finally:
        if proc.proc.poll() is None:
            proc.proc.kill()
            proc.proc.wait()
