"""Hub service configuration: flags and environment variables, derived from the option declarations.

Every option is declared once, with :func:`netkernel.options.option`: the core ones on
:class:`~hubsvc.core.options.HubOptions`, the process-level ones (where to listen, where to store)
on :class:`HubConfig` below. :func:`parse_args` builds its flags, reads their environment variables
and checks their values from those declarations (netkernel/options.py); only the rules that tie two options together
(:func:`_check_together`) are written out here.
"""

from __future__ import annotations

import argparse
import urllib.parse
from dataclasses import dataclass, fields
from pathlib import Path

from hubsvc.core.options import MAX_BATCH_BYTES_CEILING, HubOptions
from hubsvc.storage.redis_settings import DEFAULT_TIMEOUT as DEFAULT_REDIS_TIMEOUT
from hubsvc.storage.redis_settings import DEFAULT_WAIT_TIMEOUT as DEFAULT_REDIS_WAIT_TIMEOUT
from hubsvc.storage.redis_settings import is_cluster_url, parse_cluster_url
from netkernel.options import OptionSpec, Range, add_options, check_args, option, option_specs
from servicekit.metrics import MetricsSettings, add_metrics_arguments, metrics_from_args
from servicekit.tls import ServerTls, add_tls_arguments, tls_from_args

__all__ = ["MAX_BATCH_BYTES_CEILING", "HubConfig", "check_store", "hub_option_specs", "parse_args"]


def check_store(value: str) -> str:
    """``value`` if it names a store ("sqlite", a redis:// / rediss:// URL, or a Redis Cluster's
    redis+cluster:// / rediss+cluster:// URL); else ValueError saying why."""
    if value == "sqlite":
        return value
    if is_cluster_url(value):
        parse_cluster_url(value)
        return value
    parsed = urllib.parse.urlsplit(value)
    if parsed.scheme not in ("redis", "rediss"):
        raise ValueError(
            "must be 'sqlite', a redis://HOST:PORT/DB URL or a redis+cluster://HOST:PORT[,HOST:PORT…] URL "
            f"(a Redis Cluster), not {value!r}"
        )
    try:
        port = parsed.port
    except ValueError:
        port = -1
    if not parsed.hostname or port == -1:
        raise ValueError(f"{parsed.scheme}:// URL needs a host and a numeric port, e.g. redis://127.0.0.1:6379/0")
    db = parsed.path.strip("/")
    if db and not db.isdigit():
        raise ValueError(f"the Redis database must be a number (redis://HOST:PORT/0), not {db!r}")
    return value


@dataclass(frozen=True)
class HubConfig(HubOptions):
    """Settings of one hub process: the core :class:`HubOptions` plus where it listens and stores."""

    host: str = option("127.0.0.1", "--host", "AGENTNET_HUB_HOST", "listen address")
    """Interface to listen on."""
    port: int = option(50051, "--port", "AGENTNET_HUB_PORT", "TCP port (0 = any free)")
    """TCP port; 0 picks a free one and prints it."""
    advertise: str = option(
        "",
        "--advertise",
        "AGENTNET_HUB_ADVERTISE",
        "with --store redis:// and --partitions: the HOST:PORT other replicas reach this one at "
        "(default: --host and the bound port; a wildcard --host becomes this machine's name)",
    )
    """With replicas dividing the channels: where the other replicas reach this one (``host:port``)."""
    replica_tls_ca: Path | None = option(
        None,
        "--replica-tls-ca",
        "AGENTNET_HUB_REPLICA_TLS_CA",
        "with TLS and --partitions: PEM CA bundle the other replicas' certificates chain to (default: the "
        "system's roots); this replica presents its own --tls-cert when it calls them",
        parse=Path,
    )
    """With TLS and the channels divided: the CA bundle that verifies the other replicas' certificates when
    this replica forwards to them (None: the system's roots)."""
    replica_tls_server_name: str = option(
        "",
        "--replica-tls-server-name",
        "AGENTNET_HUB_REPLICA_TLS_SERVER_NAME",
        "with TLS and --partitions: the name every replica's certificate carries, checked instead of the host "
        "of each replica's --advertise address",
    )
    """With TLS and the channels divided: the name the other replicas' certificates are checked against
    ("": the host of each one's advertised address)."""
    data_dir: Path = option(Path("data"), "--data-dir", "AGENTNET_DATA_DIR", "directory for embedded storage")
    """Directory for the embedded SQLite database and the generated operator token."""
    db_path: Path | None = option(
        None, "--db", "AGENTNET_HUB_DB", "SQLite file (default: <data-dir>/hub.db)", parse=Path
    )
    """SQLite file; default ``<data_dir>/hub.db``."""
    store: str = option(
        "sqlite",
        "--store",
        "AGENTNET_HUB_STORE",
        "where the hub keeps its state: 'sqlite' (the --db file), redis://HOST:PORT/DB, or a Redis Cluster "
        "as redis+cluster://HOST:PORT[,HOST:PORT...][?spread=1] (docs/scale-out.md)",
        check=check_store,
    )
    """Where the hub keeps its state: "sqlite" (the --db file), a ``redis://HOST:PORT/DB`` URL or a
    Redis Cluster's ``redis+cluster://HOST:PORT[,HOST:PORT…]`` (docs/scale-out.md)."""
    redis_timeout: float = option(
        DEFAULT_REDIS_TIMEOUT,
        "--redis-timeout",
        "AGENTNET_HUB_REDIS_TIMEOUT",
        "with --store redis://: seconds a Redis connect or call may take; a stalled Redis then fails the "
        "writes of that commit and the reads waiting on it with UNAVAILABLE instead of blocking them",
        check=Range(0, 3600, unit=" seconds"),
    )
    """Seconds a Redis connect or call may take before it fails with UNAVAILABLE."""
    redis_wait_replicas: int = option(
        0,
        "--redis-wait-replicas",
        "AGENTNET_HUB_REDIS_WAIT_REPLICAS",
        "with --store redis://: acknowledge a commit only once this many Redis replicas have it (Redis WAIT); "
        "0 = the primary's reply is enough",
        check=Range(0, brackets="[)"),
    )
    """Redis replicas that must confirm a commit before it is acknowledged; 0 = the primary's reply is enough."""
    redis_wait_timeout: float = option(
        DEFAULT_REDIS_WAIT_TIMEOUT,
        "--redis-wait-timeout",
        "AGENTNET_HUB_REDIS_WAIT_TIMEOUT",
        "with --redis-wait-replicas: seconds a commit waits for the replicas; fewer confirmations fail its "
        "posts with UNAVAILABLE (stored on the primary: retry with the same idempotency key)",
    )
    """Seconds a commit waits for those confirmations before it fails with UNAVAILABLE."""
    log_level: str = option("INFO", "--log-level", "AGENTNET_LOG_LEVEL", "log level")
    """Logging level."""
    synchronous: str = option(
        "NORMAL",
        "--synchronous",
        "AGENTNET_HUB_SYNCHRONOUS",
        "SQLite durability: NORMAL survives a killed process; FULL also survives power loss (slower)",
        choices=("NORMAL", "FULL"),
    )
    """SQLite synchronous mode: NORMAL survives a killed process, FULL also power loss."""
    sqlite_inline_rows: int = option(
        16,
        "--sqlite-inline-rows",
        "AGENTNET_HUB_SQLITE_INLINE_ROWS",
        "with --store sqlite: a write of at most this many envelopes that finds the hub otherwise idle commits "
        "on the event loop (no hand-off to the database thread: lower latency, same durability); 0 = never",
        check=Range(0, 3000, "[]", unit=" envelopes"),
    )
    """Largest SQLite write (WAL rows) committed on the event loop when it has nothing else to do, instead of
    on the database thread; 0 = always the thread."""
    policy: Path | None = option(
        None,
        "--policy",
        "AGENTNET_HUB_POLICY",
        "governance policy file (YAML or JSON; docs/governance.md); an invalid file stops the hub at start, "
        "and is ignored (audited policy_reload_failed) when it changes later",
        parse=Path,
    )
    """Governance policy file, YAML or JSON (docs/governance.md); reloaded when it changes."""
    arbiter: str = option(
        "",
        "--arbiter",
        "AGENTNET_HUB_ARBITER",
        "governance arbiter to consult, as package.module:attribute (docs/governance.md 'The arbiter')",
    )
    """The arbiter as ``module:attribute`` ("" = none)."""
    transition_targets: str = option(
        "",
        "--transition-targets",
        "AGENTNET_HUB_TRANSITION_TARGETS",
        "custom workflow transition targets to register, as package.module:attribute (a class or a list of "
        "classes), comma-separated (docs/hub.md 'Custom transition targets'); every replica needs the same",
    )
    """Custom transition targets as ``module:attribute[,...]`` ("" = none)."""
    operator_token_file: Path | None = option(
        None,
        "--operator-token-file",
        "AGENTNET_HUB_OPERATOR_TOKEN_FILE",
        "file with the operator token for ListAudit (default: <data-dir>/hub-operator.token, generated)",
        parse=Path,
    )
    """File holding the operator token for operator calls such as ListAudit; created with a
    random token when missing; default ``<data_dir>/hub-operator.token``."""
    tls_bind_identity: bool = option(
        False,
        "--tls-bind-identity",
        "AGENTNET_HUB_TLS_BIND_IDENTITY",
        "accept an agent credential only on a connection whose client certificate names that agent "
        "(URI SAN agentnet:agent:<name>, else subject CN); Register only the name the certificate carries; "
        "needs --tls-client-ca",
    )
    """Accept an agent credential only on a connection whose client certificate names that agent
    (needs --tls-client-ca)."""

    tls: ServerTls | None = None
    """TLS settings (--tls-cert, --tls-key, --tls-client-ca; AGENTNET_HUB_TLS_*, servicekit/tls.py); None
    serves plaintext, which only a loopback host or --insecure (AGENTNET_HUB_INSECURE) allows."""
    metrics: MetricsSettings | None = None
    """Where Prometheus metrics are served (--metrics-port, --metrics-host; AGENTNET_HUB_METRICS_PORT /
    _HOST, servicekit/metrics.py); None = not served."""

    def options(self) -> HubOptions:
        """The core options these settings imply (the :class:`HubOptions` part of them)."""
        return HubOptions(**{f.name: getattr(self, f.name) for f in fields(HubOptions)})

    @property
    def operator_token_path(self) -> Path:
        """The operator token file this hub uses."""
        return (
            self.operator_token_file if self.operator_token_file is not None else self.data_dir / "hub-operator.token"
        )

    @property
    def database(self) -> Path:
        """The SQLite file this hub uses."""
        return self.db_path if self.db_path is not None else self.data_dir / "hub.db"


def hub_option_specs() -> list[tuple[str, OptionSpec]]:
    """Every option of the hub process as (field name, spec): the ones ``python -m hubsvc`` takes as flags
    beside the TLS and metrics flags servicekit adds."""
    core = {f.name for f, _ in option_specs(HubOptions)}
    declared = [(f.name, spec) for f, spec in option_specs(HubConfig)]
    return [o for o in declared if o[0] not in core] + [o for o in declared if o[0] in core]


def _check_together(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """The rules that tie two options together (each option's own bounds are in its declaration)."""
    if args.redis_wait_replicas and is_cluster_url(args.store):
        parser.error(
            "--redis-wait-replicas (AGENTNET_HUB_REDIS_WAIT_REPLICAS) is not supported with a redis+cluster:// "
            "store yet: the Cluster's own replicas and failover protect its shards (docs/scale-out.md)"
        )
    if args.redis_wait_replicas and not 0 < args.redis_wait_timeout < args.redis_timeout:
        parser.error(
            "--redis-wait-timeout (AGENTNET_HUB_REDIS_WAIT_TIMEOUT) must be positive and shorter than "
            "--redis-timeout (the commit call would time out first)"
        )
    if not args.replica_refresh < args.replica_ttl:
        parser.error(
            "--replica-refresh (AGENTNET_HUB_REPLICA_REFRESH) must be positive and below --replica-ttl, "
            "or a live replica's key lapses between refreshes"
        )


def parse_args(argv: list[str] | None = None) -> HubConfig:
    """Build a :class:`HubConfig` from command-line flags over environment variables over defaults."""
    parser = argparse.ArgumentParser(
        prog="python -m hubsvc",
        description="agent-network hub: identities, channels, durable WAL, delivery, tasks, A2A, tools.",
    )
    specs = hub_option_specs()
    add_options(parser, specs, HubConfig())
    add_tls_arguments(parser, "AGENTNET_HUB_")
    add_metrics_arguments(parser, "AGENTNET_HUB_")
    args = parser.parse_args(argv)
    tls = tls_from_args(parser, args, args.host)
    metrics = metrics_from_args(parser, args, "AGENTNET_HUB_")
    if args.tls_bind_identity and (tls is None or not tls.mutual):
        parser.error(
            "--tls-bind-identity needs --tls-client-ca (and --tls-cert, --tls-key): the hub binds "
            "identities to verified client certificates"
        )
    if tls is None and (args.replica_tls_ca is not None or args.replica_tls_server_name):
        parser.error(
            "--replica-tls-ca and --replica-tls-server-name need --tls-cert and --tls-key: replicas call each "
            "other over TLS only when they serve TLS"
        )
    values = check_args(parser, args, specs)
    _check_together(parser, args)
    return HubConfig(tls=tls, metrics=metrics, **values)
