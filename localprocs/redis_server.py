"""Throw-away redis-server processes for the tests and benchmarks (loopback, a free port, a private directory),
alone or as a small Redis Cluster (:func:`start_redis_cluster`)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import redis


def free_port(*, bus_offset: int = 0) -> int:
    """A TCP port that was free a moment ago; with ``bus_offset``, one whose port + ``bus_offset``
    is a valid port that was free too (a Cluster node also listens on its port + 10000)."""
    while True:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        if not bus_offset:
            return port
        if port + bus_offset <= 65535 and _bindable(port + bus_offset):
            return port


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


@dataclass
class RedisServer:
    """A running redis-server on 127.0.0.1:<port>."""

    proc: subprocess.Popen[bytes]
    port: int
    directory: Path
    extra_args: Sequence[str] = field(default=())
    """The arguments it was started with beyond port, bind, persistence off and directory."""

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

    def restart(self) -> None:
        """Start the server again (after :meth:`stop`) on the same port, directory and arguments.

        With ``appendonly yes`` among ``extra_args`` it loads its append-only file, as a Redis
        restarted by its operator does."""
        if self.proc.poll() is None:
            raise RuntimeError("redis-server is still running: stop it first")
        proc = _spawn(self.port, self.directory, self.extra_args)
        if not _wait_for_ping(self.port, proc, timeout=10):
            proc.kill()
            proc.wait()
            raise RuntimeError(f"redis-server did not start again on port {self.port}")
        self.proc = proc


class RedisServerMissing(RuntimeError):
    """redis-server (or redis-cli, for a Cluster) is not installed."""


@dataclass
class RedisCluster:
    """A running Redis Cluster of redis-servers on 127.0.0.1, each a master of a share of the slots."""

    nodes: list[RedisServer]

    def url(self) -> str:
        """``redis+cluster://127.0.0.1:<p1>,127.0.0.1:<p2>,…`` (the hub's ``--store`` form)."""
        return "redis+cluster://" + ",".join(f"127.0.0.1:{n.port}" for n in self.nodes)

    def flush(self) -> None:
        """Empty every running master (a Cluster has only database 0: tests isolate by key prefix)."""
        for node in self.nodes:
            if node.proc.poll() is not None:
                continue
            client = redis.Redis(host="127.0.0.1", port=node.port)
            try:
                if client.info("replication")["role"] == "master":
                    client.flushdb()
            finally:
                client.close()

    def stop(self) -> None:
        """Terminate every node (those still running)."""
        for node in self.nodes:
            if node.proc.poll() is None:
                node.stop()

    def owner_of(self, slot: int) -> tuple[int, list[int]]:
        """The ports of the master serving ``slot`` and of its replicas, as a running node sees them."""
        for node in self.nodes:
            if node.proc.poll() is not None:
                continue
            client = redis.Redis(host="127.0.0.1", port=node.port, socket_timeout=1)
            try:
                slots = client.cluster("SLOTS")
            finally:
                client.close()
            for low, high, primary, *replicas in slots:  # CLUSTER SLOTS: [low, high, [host, port, id], …]
                if int(low) <= slot <= int(high):
                    return int(primary[1]), [int(r[1]) for r in replicas]
        raise RuntimeError(f"no running node serves slot {slot}")

    def node(self, port: int) -> RedisServer:
        """The node on ``port``."""
        return next(n for n in self.nodes if n.port == port)


def start_redis_cluster(
    directory: Path, masters: int = 3, replicas: int = 0, extra_args: Sequence[str] = ()
) -> RedisCluster:
    """Start ``masters`` × (1 + ``replicas``) cluster-enabled redis-servers (one directory each),
    join them into one Cluster of ``masters`` masters with ``replicas`` replicas each
    (``redis-cli --cluster create``) and wait until every node reports ``cluster_state:ok`` and
    knows every other node."""
    cli = shutil.which("redis-cli")
    if cli is None:
        raise RedisServerMissing("redis-cli is not on PATH: run `make redis-server` to install it (CI does)")
    args = ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", *extra_args]
    nodes: list[RedisServer] = []
    try:
        for i in range(masters * (1 + replicas)):
            nodes.append(start_redis_server(directory / f"node{i}", args))
        addresses = [f"127.0.0.1:{n.port}" for n in nodes]
        created = subprocess.run(
            [cli, "--cluster", "create", *addresses, "--cluster-replicas", str(replicas), "--cluster-yes"],
            capture_output=True,
            timeout=60,
        )
        if created.returncode != 0:
            output = (created.stdout + created.stderr).decode()
            raise RuntimeError(f"redis-cli --cluster create failed: {output}")
        _wait_for_cluster(nodes, replicas, timeout=30)
    except BaseException:
        for node in nodes:
            node.stop()
        raise
    return RedisCluster(nodes)


def _wait_for_cluster(nodes: Sequence[RedisServer], replicas: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    pending = list(nodes)
    while pending:
        client = redis.Redis(host="127.0.0.1", port=pending[0].port, socket_timeout=1)
        try:
            info = client.cluster("INFO")
            slots = client.cluster("SLOTS")
        finally:
            client.close()
        ready = info.get("cluster_state") == "ok" and int(info.get("cluster_known_nodes", 0)) == len(nodes)
        if ready and all(len(entry) >= 3 + replicas for entry in slots):  # [low, high, master, *replicas]
            pending.pop(0)
        elif time.monotonic() > deadline:
            raise RuntimeError(f"the Redis Cluster did not become ready on port {pending[0].port}: {info}")
        else:
            time.sleep(0.05)


def start_redis_server(directory: Path, extra_args: Sequence[str] = ()) -> RedisServer:
    """Start redis-server without persistence (unless ``extra_args`` turn it on) and wait for PING."""
    directory.mkdir(parents=True, exist_ok=True)
    cluster = "--cluster-enabled" in extra_args
    for _ in range(3):  # the free port may be taken between probing and binding
        port = free_port(bus_offset=10000 if cluster else 0)
        proc = _spawn(port, directory, extra_args)
        if _wait_for_ping(port, proc, timeout=10):
            return RedisServer(proc, port, directory, tuple(extra_args))
        proc.kill()
        proc.wait()
    raise RuntimeError("redis-server did not answer PING on three free ports")


def _spawn(port: int, directory: Path, extra_args: Sequence[str]) -> subprocess.Popen[bytes]:
    binary = shutil.which("redis-server")
    if binary is None:
        raise RedisServerMissing("redis-server is not on PATH: run `make redis-server` to install it (CI does)")
    args = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    return subprocess.Popen(
        [*args, "--dir", str(directory), *extra_args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


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
