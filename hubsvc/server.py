"""The one way a hub is served: core + servicer + the shared server factory.

``python -m hubsvc``, the SDK's embedded ``Hub.open`` and the tests all call
:func:`start_hub`, so health checking, reflection, message limits and shutdown
order are the same everywhere.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from pathlib import Path

from agentnet.v1 import hub_pb2_grpc, operator_pb2_grpc, replica_pb2_grpc
from opentelemetry.trace import TracerProvider

from hubsvc.core.hub import HubCore
from hubsvc.core.options import HubOptions
from hubsvc.core.util import Clock, system_clock
from hubsvc.forwarding import Forwarder
from hubsvc.governance.arbiter import Arbiter, load_arbiter
from hubsvc.governance.policy import Policy
from hubsvc.governance.source import PolicySource
from hubsvc.held_turns import HeldTurns
from hubsvc.metrics import HubMetrics
from hubsvc.operator_servicer import OPERATOR_SERVICE, OperatorServicer
from hubsvc.recorder import NO_RECORDER
from hubsvc.replica_peers import ReplicaPeers
from hubsvc.replica_servicer import REPLICA_SERVICE, ReplicaServicer
from hubsvc.servicer import HUB_SERVICE, HubServicer
from hubsvc.storage import HubStore
from hubsvc.storage.redis_settings import DEFAULT_TIMEOUT
from servicekit.metrics import MetricsServer, MetricsSettings
from servicekit.runtime import DEFAULT_MAX_MESSAGE_BYTES, RunningServer, ServiceSpec, host_port, start_server
from servicekit.tls import ServerTls, peer_credentials
from servicekit.tracing import server_interceptors


@dataclass
class HubServer:
    """A started hub: its core and its gRPC server."""

    core: HubCore
    running: RunningServer
    host: str
    metrics: HubMetrics | None = None
    """The hub's metrics (None: not served)."""
    peers: ReplicaPeers | None = None
    """Calls to the other replicas sharing the store (None: the store is this process's alone)."""

    @property
    def metrics_server(self) -> MetricsServer | None:
        """Where the metrics are served (``metrics_server.url``; None: not served)."""
        return self.running.metrics_server

    @property
    def port(self) -> int:
        """The bound port."""
        return self.running.port

    @property
    def target(self) -> str:
        """``host:port`` clients connect to."""
        return f"{self.host}:{self.running.port}"

    async def stop(self, grace_seconds: float = 5.0) -> None:
        """Report NOT_SERVING, end every Connect stream (clients resume elsewhere or later),
        stop the server within the grace period, then flush and close the store."""
        await self.running.stop(grace_seconds, on_stopping=self.core.close_sessions)
        if self.peers is not None:
            await self.peers.close()
        await self.core.stop()


async def start_hub(
    store: HubStore,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    operator_token: str = "",
    options: HubOptions | None = None,
    clock: Clock = system_clock,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    tls: ServerTls | None = None,
    tls_bind_identity: bool = False,
    policy: Policy | Path | str | None = None,
    arbiter: Arbiter | str | None = None,
    metrics: MetricsSettings | None = None,
    tracer_provider: TracerProvider | None = None,
    advertise: str = "",
    replica_tls_ca: Path | None = None,
    replica_tls_server_name: str = "",
) -> HubServer:
    """Open ``store``, hydrate the hub and serve it on ``host:port`` (0 = a free port).

    ``operator_token`` is the bearer token of operator calls (``ListAudit``; "" disables them).
    ``tls`` serves TLS (mTLS with a client CA; ``servicekit.tls``); ``tls_bind_identity``
    accepts an agent only on a connection whose client certificate names it (needs a client CA).
    ``policy`` is the governance policy (docs/governance.md): a :class:`Policy`, or the path of a
    YAML / JSON policy file, reloaded when it changes (every ``options.policy_poll_interval``
    seconds); an invalid file raises ValueError. ``arbiter`` is an
    :class:`~hubsvc.governance.arbiter.Arbiter` or its ``module:attribute`` name.
    ``advertise`` is the ``host:port`` other replicas sharing the store reach this one at (default:
    ``host`` and the bound port, :func:`advertised_address`). With ``tls`` the replicas call each other
    over TLS: their certificates are verified against ``replica_tls_ca`` (None: the system's roots) and
    the name ``replica_tls_server_name`` ("": each one's advertised host), and this replica presents
    its own certificate (docs/scale-out.md "TLS between replicas").
    ``metrics`` serves Prometheus metrics on its host and port (``hubsvc/metrics.py``; port 0 = a free
    one, ``HubServer.metrics_server.url``; None: no metrics); ``tracer_provider`` records the spans of
    posts, commits, deliveries and unary RPCs (``servicekit/tracing.py``; None: no tracing).
    """
    if tls_bind_identity and (tls is None or not tls.mutual):
        raise ValueError("tls_bind_identity needs TLS with a client CA (tls=ServerTls(..., client_ca_file=...))")
    if tls is not None:
        tls.check()  # unusable certificate files fail before the store is opened
    if tls is None and (replica_tls_ca is not None or replica_tls_server_name):
        raise ValueError("--replica-tls-ca and --replica-tls-server-name need TLS (--tls-cert, --tls-key)")
    peer_tls = peer_credentials(tls, replica_tls_ca, "--replica-tls-ca") if tls is not None else None
    source = PolicySource(policy)
    if isinstance(arbiter, str):
        arbiter = load_arbiter(arbiter)
    recorder = HubMetrics() if metrics is not None else None
    tracer = tracer_provider.get_tracer("agentnet.hub") if tracer_provider is not None else None
    core = HubCore(
        store,
        options=options,
        clock=clock,
        policy=source.policy,
        arbiter=arbiter,
        recorder=recorder or NO_RECORDER,
        tracer=tracer,
    )
    await core.start()
    source.loaded(core.audit)
    if source.path is not None:
        core.spawn(source.watch(core.governance, core.audit, core.options.policy_poll_interval), "policy-reload")
    servicer = HubServicer(core, operator_token=operator_token, bind_identity=tls_bind_identity)
    spec = ServiceSpec(
        HUB_SERVICE.full_name, lambda server: hub_pb2_grpc.add_HubServiceServicer_to_server(servicer, server)
    )
    operator = OperatorServicer(servicer.ops.operator, servicer.auth, servicer.limits, servicer.audit_refusal)
    operator_spec = ServiceSpec(
        OPERATOR_SERVICE.full_name,
        lambda server: operator_pb2_grpc.add_OperatorServiceServicer_to_server(operator, server),
    )
    specs = [spec, operator_spec]
    peers = None
    if core.store.liveness is not None:  # replicas share the store: serve and call ReplicaService
        try:
            replica_key = await core.store.liveness.replica_key()
        except BaseException:
            await core.stop()
            raise
        replica = ReplicaServicer(servicer, replica_key)
        specs.append(
            ServiceSpec(
                REPLICA_SERVICE.full_name,
                lambda server: replica_pb2_grpc.add_ReplicaServiceServicer_to_server(replica, server),
            )
        )
        peers = ReplicaPeers(
            replica_key,
            timeout=forward_timeout(core.store),
            credentials=peer_tls,
            server_name=replica_tls_server_name,
            max_message_bytes=max_message_bytes,
        )
    if recorder is not None:
        recorder.observe(core)
    try:
        running = await start_server(
            specs,
            host=host,
            port=port,
            max_message_bytes=max_message_bytes,
            tls=tls,
            interceptors=[*server_interceptors(tracer_provider), *([recorder.rpc_counter] if recorder else [])],
            metrics=(recorder.registry, metrics) if recorder is not None and metrics is not None else None,
        )
    except BaseException:
        await core.stop()
        raise
    server = HubServer(core, running, host, recorder, peers)
    liveness = core.store.liveness
    if liveness is not None:  # where the other replicas reach this one, from its next beat on (now)
        liveness.address = advertise or advertised_address(host, running.port)
        if core.liveness is not None:
            await core.liveness.beat()
    if peers is not None and core.placement.divided:
        servicer.forwarder = operator.forwarder = Forwarder(
            core.placement,
            peers,
            refresh=core.options.replica_refresh,
            ttl=core.options.replica_ttl,
            max_batch=core.options.max_batch,
        )
        core.sessions.remote_turns = HeldTurns(core.placement, peers, core.channels.followed_of)
    return server


def advertised_address(host: str, port: int) -> str:
    """``host:port`` other replicas reach a replica bound to ``host`` at: a wildcard host is replaced
    by this machine's fully qualified name (give ``--advertise`` when that is not routable)."""
    if host in ("", "0.0.0.0", "::", "[::]"):
        host = socket.getfqdn()
    return host_port(host, port)


def forward_timeout(store: HubStore) -> float:
    """Seconds a post forwarded to another replica may take: its commit there may take up to the
    store's --redis-timeout, and a channel rebuild after a failed write as long again."""
    timeout: float = getattr(store, "timeout", DEFAULT_TIMEOUT)  # a shared store is a Redis store, which has one
    return 2 * timeout + 1
