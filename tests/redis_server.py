"""Throw-away redis-server processes for the tests (loopback, a free port, a private directory)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import redis


def free_port() -> int:
    """A TCP port that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class RedisServer:
    """A running redis-server on 127.0.0.1:<port>."""

    proc: subprocess.Popen[bytes]
    port: int
    directory: Path

    def url(self, db: int = 0) -> str:
        """``redis://127.0.0.1:<port>/<db>``."""
        return f"redis://127.0.0.1:{self.port}/{db}"

    def flush(self, db: int) -> None:
        """Empty database ``db`` (what a test that used it leaves behind)."""
        client = redis.Redis(host="127.0.0.1", port=self.port, db=db)
        try:
            client.flushdb()
        finally:
            client.close()

    def stop(self) -> None:
        """Terminate the server (kill it if it does not exit within 10 s)."""
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class RedisServerMissing(RuntimeError):
    """redis-server is not installed."""


def start_redis_server(directory: Path, extra_args: Sequence[str] = ()) -> RedisServer:
    """Start redis-server without persistence (unless ``extra_args`` turn it on) and wait for PING."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise RedisServerMissing("redis-server is not on PATH: run `make redis-server` to install it (CI does)")
    directory.mkdir(parents=True, exist_ok=True)
    for _ in range(3):  # the free port may be taken between probing and binding
        port = free_port()
        args = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        proc = subprocess.Popen(
            [*args, "--dir", str(directory), *extra_args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        if _wait_for_ping(port, proc, timeout=10):
            return RedisServer(proc, port, directory)
        proc.kill()
        proc.wait()
    raise RuntimeError("redis-server did not answer PING on three free ports")


def _wait_for_ping(port: int, proc: subprocess.Popen[bytes], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=1)
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                if client.ping():
                    return True
            except redis.exceptions.ConnectionError:
                time.sleep(0.05)
        return False
    finally:
        client.close()


def start_redis_replica(directory: Path, primary: RedisServer) -> RedisServer:
    """Start a redis-server replicating ``primary`` (``--replicaof``) and wait until its link is up
    and the primary counts it."""
    replica = start_redis_server(directory, ["--replicaof", "127.0.0.1", str(primary.port)])
    deadline = time.monotonic() + 10
    client = redis.Redis(host="127.0.0.1", port=replica.port, socket_timeout=1)
    try:
        while client.info("replication").get("master_link_status") != "up" or connected_replicas(primary) < 1:
            if time.monotonic() > deadline:
                replica.stop()
                raise RuntimeError(f"the replica of port {primary.port} did not link up within 10 s")
            time.sleep(0.05)
    finally:
        client.close()
    return replica


def connected_replicas(server: RedisServer) -> int:
    """How many replicas are connected to ``server`` (INFO replication)."""
    client = redis.Redis(host="127.0.0.1", port=server.port, socket_timeout=1)
    try:
        return int(client.info("replication").get("connected_slaves", 0))
    finally:
        client.close()
