"""Several hub processes ("replicas") on one Redis store, for the tests and the benchmark.

Each replica is a real ``python -m hubsvc --store redis://… --port P`` process
(:func:`localprocs.procs.start_service`). A replica keeps its slot (index) and its port for the
harness's life: :meth:`Replicas.kill` SIGKILLs it and :meth:`Replicas.restart` starts it
again on the same port, so a client's list of targets stays valid across a failover.
:meth:`Replicas.reserve` names a port for a standby before anything listens there. With
``metrics=True`` each replica also serves its Prometheus metrics (``--metrics-port``) on a port of
its own, kept across restarts too (:meth:`Replicas.metrics_url`).
"""

from __future__ import annotations

import signal
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from localprocs.procs import ROOT, ServiceProcess, start_service
from localprocs.redis_server import free_port


@dataclass
class Replicas:
    """Hub replicas sharing ``store_url``; slot ``i`` is replica ``i`` (running or not)."""

    store_url: str
    data_dir: Path
    """Holds the operator token file every replica reads (created by the first)."""
    extra_args: Sequence[str] = ()
    """More hub flags for every replica (e.g. ``--log-level WARNING``)."""
    metrics: bool = False
    """Serve each replica's metrics on a port of its own (:meth:`metrics_url`; off: no metrics)."""
    ports: list[int] = field(default_factory=list)
    procs: list[ServiceProcess | None] = field(default_factory=list)
    metrics_ports: list[int] = field(default_factory=list)
    """Slot ``i``'s metrics port (empty without :attr:`metrics`)."""

    def start(self) -> int:
        """Start one more replica on a port of its choosing; return its slot."""
        if self.metrics:
            self.metrics_ports.append(free_port())
        proc = self._spawn(0, len(self.procs))
        self.ports.append(proc.port)
        self.procs.append(proc)
        return len(self.procs) - 1

    def reserve(self) -> int:
        """A slot with a free port and no process yet (a standby: :meth:`restart` starts it)."""
        self.ports.append(free_port())
        if self.metrics:
            self.metrics_ports.append(free_port())
        self.procs.append(None)
        return len(self.procs) - 1

    def restart(self, i: int) -> ServiceProcess:
        """Start replica ``i`` (killed, or reserved) again on its port."""
        if self.running(i):
            raise RuntimeError(f"replica {i} is still running")
        proc = self._spawn(self.ports[i], i)
        self.procs[i] = proc
        return proc

    def kill(self, i: int, sig: int = signal.SIGKILL) -> int:
        """Send ``sig`` to replica ``i`` (SIGKILL: no goodbye) and return its exit code."""
        proc = self.procs[i]
        if proc is None:
            raise RuntimeError(f"replica {i} was never started")
        return proc.terminate(sig)

    def running(self, i: int) -> bool:
        """Whether replica ``i``'s process is alive."""
        proc = self.procs[i]
        return proc is not None and proc.proc.poll() is None

    def target(self, i: int) -> str:
        """``127.0.0.1:<port>`` of replica ``i`` (whether it runs or not)."""
        return f"127.0.0.1:{self.ports[i]}"

    @property
    def targets(self) -> list[str]:
        """Every slot's target, in slot order (what a failing-over client is given)."""
        return [self.target(i) for i in range(len(self.ports))]

    def metrics_url(self, i: int) -> str:
        """``http://127.0.0.1:<port>/metrics`` of replica ``i`` (the harness was made with ``metrics=True``)."""
        if not self.metrics:
            raise RuntimeError("these replicas serve no metrics: make them with metrics=True")
        return f"http://127.0.0.1:{self.metrics_ports[i]}/metrics"

    def pid(self, i: int) -> int:
        """The process id of replica ``i``'s current process."""
        proc = self.procs[i]
        if proc is None:
            raise RuntimeError(f"replica {i} was never started")
        return proc.proc.pid

    def output(self, i: int) -> str:
        """What replica ``i``'s current process printed so far (for failure messages)."""
        proc = self.procs[i]
        return "".join(proc.output) if proc is not None else ""

    def stop_all(self) -> list[int | None]:
        """SIGTERM every running replica (killed after 15 s); their exit codes, None for a slot not running."""
        codes: list[int | None] = []
        for i, proc in enumerate(self.procs):
            if proc is None or not self.running(i):
                codes.append(None)
                continue
            try:
                codes.append(proc.terminate(signal.SIGTERM))
            except Exception:
                proc.proc.kill()
                codes.append(proc.proc.wait())
        return codes

    def _spawn(self, port: int, slot: int) -> ServiceProcess:
        args = ["--store", self.store_url, "--data-dir", str(self.data_dir), *self.extra_args]
        if self.metrics:
            args += ["--metrics-port", str(self.metrics_ports[slot])]
        return start_service("hubsvc", args, cwd=ROOT, port=port)


@contextmanager
def replicas(
    store_url: str,
    data_dir: Path,
    n: int,
    *,
    standbys: int = 0,
    extra_args: Sequence[str] = (),
    metrics: bool = False,
) -> Iterator[Replicas]:
    """``n`` running replicas then ``standbys`` reserved slots (``metrics``: each serving its metrics,
    :meth:`Replicas.metrics_url`); every process is stopped at the end."""
    group = Replicas(store_url, data_dir, extra_args, metrics)
    try:
        for _ in range(n):  # one after the other: the first creates the operator token file
            group.start()
        for _ in range(standbys):
            group.reserve()
        yield group
    finally:
        group.stop_all()
