"""Hub service configuration: flags, environment variables and their defaults."""

from __future__ import annotations

import argparse
import os
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hubsvc.core.options import HubOptions
from hubsvc.storage.redis_connect import is_cluster_url, parse_cluster_url
from hubsvc.storage.redis_store import DEFAULT_TIMEOUT as DEFAULT_REDIS_TIMEOUT
from hubsvc.storage.redis_store import DEFAULT_WAIT_TIMEOUT as DEFAULT_REDIS_WAIT_TIMEOUT
from servicekit.metrics import MetricsSettings, add_metrics_arguments, metrics_from_args
from servicekit.runtime import DEFAULT_MAX_MESSAGE_BYTES
from servicekit.tls import ServerTls, add_tls_arguments, env_flag, tls_from_args

MAX_BATCH_BYTES_CEILING = DEFAULT_MAX_MESSAGE_BYTES // 2
"""Largest --max-batch-bytes: a batch (plus its framing) always fits in one gRPC message."""


@dataclass(frozen=True)
class HubConfig:
    """Settings of one hub process."""

    host: str = "127.0.0.1"
    """Interface to listen on (AGENTNET_HUB_HOST)."""
    port: int = 50051
    """TCP port; 0 picks a free one and prints it (AGENTNET_HUB_PORT)."""
    data_dir: Path = Path("data")
    """Directory for the embedded SQLite database (AGENTNET_DATA_DIR)."""
    db_path: Path | None = None
    """SQLite file; default ``<data_dir>/hub.db`` (AGENTNET_HUB_DB)."""
    store: str = "sqlite"
    """Where the hub keeps its state: "sqlite" (the --db file), a ``redis://HOST:PORT/DB`` URL or a
    Redis Cluster's ``redis+cluster://HOST:PORT[,HOST:PORT…]`` (AGENTNET_HUB_STORE; docs/scale-out.md)."""
    redis_timeout: float = DEFAULT_REDIS_TIMEOUT
    """Seconds a Redis connect or call may take before it fails with UNAVAILABLE (AGENTNET_HUB_REDIS_TIMEOUT)."""
    redis_wait_replicas: int = 0
    """Redis replicas that must confirm a commit before it is acknowledged; 0 = the primary's reply is
    enough (AGENTNET_HUB_REDIS_WAIT_REPLICAS)."""
    redis_wait_timeout: float = DEFAULT_REDIS_WAIT_TIMEOUT
    """Seconds a commit waits for those confirmations before it fails with UNAVAILABLE
    (AGENTNET_HUB_REDIS_WAIT_TIMEOUT)."""
    replica_ttl: float = HubOptions.replica_ttl
    """Seconds a hub replica's liveness key lives without a refresh (AGENTNET_HUB_REPLICA_TTL)."""
    replica_refresh: float = HubOptions.replica_refresh
    """Seconds between refreshes of the liveness key (AGENTNET_HUB_REPLICA_REFRESH)."""
    log_level: str = "INFO"
    """Logging level (AGENTNET_LOG_LEVEL)."""
    synchronous: str = "NORMAL"
    """SQLite synchronous mode: NORMAL survives a killed process, FULL also power loss (AGENTNET_HUB_SYNCHRONOUS)."""
    sqlite_inline_rows: int = 16
    """Largest SQLite write (WAL rows) committed on the event loop when it has nothing else to do, instead of
    on the database thread; 0 = always the thread (AGENTNET_HUB_SQLITE_INLINE_ROWS)."""
    invite_ack_timeout: float = 30.0
    """Seconds to wait for invite acks (AGENTNET_INVITE_ACK_TIMEOUT)."""
    cursor_flush_interval: float = HubOptions.cursor_flush_interval
    """Seconds between writes of acked delivery cursors (AGENTNET_HUB_CURSOR_FLUSH_INTERVAL)."""
    max_depth: int = 8
    """Delegation (and A2A call) depth limit (AGENTNET_MAX_DEPTH)."""
    a2a_token_ttl: float = 300.0
    """Seconds an A2A call token stays valid (AGENTNET_A2A_TOKEN_TTL)."""
    a2a_token_grace: float = HubOptions.a2a_token_grace
    """Seconds after its expiry a call token may still be exchanged (AGENTNET_HUB_A2A_TOKEN_GRACE)."""
    a2a_max_tokens: int = HubOptions.a2a_max_tokens
    """Call tokens one A2A execution may hold in the store at once (AGENTNET_HUB_A2A_MAX_TOKENS)."""
    a2a_outbound_allow: tuple[str, ...] = ()
    """host[:port] globs the hub may call outside A2A agents at; empty = none
    (AGENTNET_HUB_A2A_OUTBOUND_ALLOW, comma-separated)."""
    a2a_outbound_max_bytes: int = HubOptions.a2a_outbound_max_bytes
    """Largest card or answer read from an outside A2A agent (AGENTNET_HUB_A2A_OUTBOUND_MAX_BYTES)."""
    a2a_outbound_connect_timeout: float = HubOptions.a2a_outbound_connect_timeout
    """Seconds to connect to an outside A2A agent (AGENTNET_HUB_A2A_OUTBOUND_CONNECT_TIMEOUT)."""
    max_event_data_bytes: int = HubOptions.max_event_data_bytes
    """Largest event data (and text that becomes event data), in bytes (AGENTNET_MAX_EVENT_DATA_BYTES)."""
    max_skill_bytes: int = HubOptions.max_skill_bytes
    max_checkpoint_bytes: int = HubOptions.max_checkpoint_bytes
    """Largest task checkpoint, in bytes (AGENTNET_MAX_CHECKPOINT_BYTES)."""
    """Largest skill markdown, in bytes (AGENTNET_MAX_SKILL_BYTES)."""
    max_id_bytes: int = HubOptions.max_id_bytes
    """Longest id, key, token or short name in a request, in bytes (AGENTNET_MAX_ID_BYTES)."""
    max_text_bytes: int = HubOptions.max_text_bytes
    """Longest other text field of a request, in bytes (AGENTNET_MAX_TEXT_BYTES)."""
    max_repeated_items: int = HubOptions.max_repeated_items
    """Most items of a repeated field or map of a request (AGENTNET_MAX_REPEATED_ITEMS)."""
    max_stream_entries: int = HubOptions.max_stream_entries
    """Most cursors in a Hello and acks in an Ack frame (AGENTNET_MAX_STREAM_ENTRIES)."""
    max_json_depth: int = HubOptions.max_json_depth
    """Deepest JSON nesting a client may send (AGENTNET_MAX_JSON_DEPTH)."""
    max_ttl_seconds: float = HubOptions.max_ttl_seconds
    """Longest channel / envelope / task lifetime or invite timeout a client may ask for (AGENTNET_MAX_TTL_SECONDS)."""
    max_wait_seconds: float = HubOptions.max_wait_seconds
    """Longest timeout a client may ask a call to wait (AGENTNET_MAX_WAIT_SECONDS)."""
    rate_audit_window: float = HubOptions.rate_audit_window
    """Seconds during which an identity's RATE_LIMITED refusals after the first are audited as one count
    (AGENTNET_HUB_RATE_AUDIT_WINDOW)."""
    max_operator_page: int = HubOptions.max_operator_page
    """Most items in one page of an OperatorService list (AGENTNET_HUB_MAX_OPERATOR_PAGE_SIZE)."""
    audit_poll_interval: float = HubOptions.audit_poll_interval
    """Seconds between a FollowAudit stream's looks for new records (AGENTNET_HUB_AUDIT_POLL_INTERVAL)."""
    max_stream_buffer_bytes: int = HubOptions.max_stream_buffer_bytes
    """Bytes queued for one client stream before the hub ends it (AGENTNET_HUB_MAX_STREAM_BUFFER_BYTES)."""
    max_batch: int = HubOptions.max_batch
    """Most post results and deliveries per Connect batch frame (AGENTNET_HUB_MAX_BATCH)."""
    max_batch_bytes: int = HubOptions.max_batch_bytes
    """Most bytes of post results and envelopes per Connect batch frame (AGENTNET_HUB_MAX_BATCH_BYTES)."""
    policy: Path | None = None
    """Governance policy file, YAML or JSON (docs/governance.md); reloaded when it changes (AGENTNET_HUB_POLICY)."""
    policy_poll_interval: float = HubOptions.policy_poll_interval
    """Seconds between checks of the policy file for changes (AGENTNET_HUB_POLICY_POLL_INTERVAL)."""
    arbiter: str = ""
    """The arbiter as ``module:attribute`` ("" = none) (AGENTNET_HUB_ARBITER)."""
    arbiter_timeout: float = HubOptions.arbiter_timeout
    """Seconds the hub waits for the arbiter before refusing (AGENTNET_HUB_ARBITER_TIMEOUT)."""
    operator_token_file: Path | None = None
    """File holding the operator token for operator calls such as ListAudit; created with a
    random token when missing; default ``<data_dir>/hub-operator.token`` (AGENTNET_HUB_OPERATOR_TOKEN_FILE)."""

    tls: ServerTls | None = None
    """TLS settings (--tls-cert, --tls-key, --tls-client-ca; AGENTNET_HUB_TLS_*); None serves plaintext,
    which only a loopback host or --insecure (AGENTNET_HUB_INSECURE) allows."""
    tls_bind_identity: bool = False
    """Accept an agent credential only on a connection whose client certificate names that agent
    (--tls-bind-identity, AGENTNET_HUB_TLS_BIND_IDENTITY; needs --tls-client-ca)."""
    metrics: MetricsSettings | None = None
    """Where Prometheus metrics are served (--metrics-port, --metrics-host; AGENTNET_HUB_METRICS_PORT /
    _HOST); None = not served."""

    def options(self) -> HubOptions:
        """The core options these settings imply."""
        return HubOptions(
            invite_ack_timeout=self.invite_ack_timeout,
            cursor_flush_interval=self.cursor_flush_interval,
            max_depth=self.max_depth,
            a2a_token_ttl=self.a2a_token_ttl,
            a2a_token_grace=self.a2a_token_grace,
            a2a_max_tokens=self.a2a_max_tokens,
            a2a_outbound_allow=self.a2a_outbound_allow,
            a2a_outbound_max_bytes=self.a2a_outbound_max_bytes,
            a2a_outbound_connect_timeout=self.a2a_outbound_connect_timeout,
            max_event_data_bytes=self.max_event_data_bytes,
            max_skill_bytes=self.max_skill_bytes,
            max_checkpoint_bytes=self.max_checkpoint_bytes,
            max_id_bytes=self.max_id_bytes,
            max_text_bytes=self.max_text_bytes,
            max_repeated_items=self.max_repeated_items,
            max_stream_entries=self.max_stream_entries,
            max_json_depth=self.max_json_depth,
            max_ttl_seconds=self.max_ttl_seconds,
            max_wait_seconds=self.max_wait_seconds,
            max_stream_buffer_bytes=self.max_stream_buffer_bytes,
            max_batch=self.max_batch,
            max_batch_bytes=self.max_batch_bytes,
            rate_audit_window=self.rate_audit_window,
            max_operator_page=self.max_operator_page,
            audit_poll_interval=self.audit_poll_interval,
            policy_poll_interval=self.policy_poll_interval,
            arbiter_timeout=self.arbiter_timeout,
            replica_ttl=self.replica_ttl,
            replica_refresh=self.replica_refresh,
        )

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


def _flag(
    parser: argparse.ArgumentParser, flag: str, env_var: str, default: Any, help: str, *, type: Any = str, **kw: Any
) -> None:
    """Add ``flag``; its default comes from ``env_var`` when set, else ``default``."""
    raw = os.environ.get(env_var)
    parser.add_argument(flag, type=type, default=type(raw) if raw else default, help=f"{help} [{env_var}]", **kw)


#: The request size limits: (flag, environment variable, default, help); docs/operations.md "Limits".
_SIZE_FLAGS = (
    (
        "--max-event-data-bytes",
        "AGENTNET_MAX_EVENT_DATA_BYTES",
        HubOptions.max_event_data_bytes,
        "largest event_data_json (and Say/Delegate/InvokeAgent text) in bytes; PAYLOAD_TOO_LARGE beyond",
    ),
    (
        "--max-skill-bytes",
        "AGENTNET_MAX_SKILL_BYTES",
        HubOptions.max_skill_bytes,
        "largest skill markdown in bytes; PAYLOAD_TOO_LARGE beyond",
    ),
    (
        "--max-checkpoint-bytes",
        "AGENTNET_MAX_CHECKPOINT_BYTES",
        HubOptions.max_checkpoint_bytes,
        "largest task checkpoint (CheckpointTask.state_json) in bytes; PAYLOAD_TOO_LARGE beyond",
    ),
    (
        "--max-id-bytes",
        "AGENTNET_MAX_ID_BYTES",
        HubOptions.max_id_bytes,
        "longest id, key, token or name in a request, in bytes; INVALID_ARGUMENT beyond",
    ),
    (
        "--max-text-bytes",
        "AGENTNET_MAX_TEXT_BYTES",
        HubOptions.max_text_bytes,
        "longest other text field (intent, reason, query, ...) in bytes; INVALID_ARGUMENT beyond",
    ),
    (
        "--max-repeated-items",
        "AGENTNET_MAX_REPEATED_ITEMS",
        HubOptions.max_repeated_items,
        "most items of a repeated field or map (audience, targets, labels, ...); INVALID_ARGUMENT beyond",
    ),
    (
        "--max-stream-entries",
        "AGENTNET_MAX_STREAM_ENTRIES",
        HubOptions.max_stream_entries,
        "most resume cursors in a Hello and acks in one Ack frame",
    ),
)


def parse_args(argv: list[str] | None = None) -> HubConfig:
    """Build a :class:`HubConfig` from command-line flags over environment variables."""
    parser = argparse.ArgumentParser(
        prog="python -m hubsvc",
        description="agent-network hub: identities, channels, durable WAL, delivery, tasks, A2A, tools.",
    )
    d = HubConfig
    _flag(parser, "--host", "AGENTNET_HUB_HOST", d.host, "listen address")
    _flag(parser, "--port", "AGENTNET_HUB_PORT", d.port, "TCP port (0 = any free)", type=int)
    _flag(parser, "--data-dir", "AGENTNET_DATA_DIR", d.data_dir, "directory for embedded storage", type=Path)
    _flag(parser, "--db", "AGENTNET_HUB_DB", None, "SQLite file (default: <data-dir>/hub.db)", type=Path)
    _flag(
        parser,
        "--store",
        "AGENTNET_HUB_STORE",
        d.store,
        "where the hub keeps its state: 'sqlite' (the --db file), redis://HOST:PORT/DB, or a Redis Cluster "
        "as redis+cluster://HOST:PORT[,HOST:PORT...][?spread=1] (docs/scale-out.md)",
    )
    _flag(
        parser,
        "--redis-timeout",
        "AGENTNET_HUB_REDIS_TIMEOUT",
        d.redis_timeout,
        "with --store redis://: seconds a Redis connect or call may take; a stalled Redis then fails the "
        "writes of that commit and the reads waiting on it with UNAVAILABLE instead of blocking them",
        type=float,
    )
    _flag(
        parser,
        "--redis-wait-replicas",
        "AGENTNET_HUB_REDIS_WAIT_REPLICAS",
        d.redis_wait_replicas,
        "with --store redis://: acknowledge a commit only once this many Redis replicas have it (Redis WAIT); "
        "0 = the primary's reply is enough",
        type=int,
    )
    _flag(
        parser,
        "--redis-wait-timeout",
        "AGENTNET_HUB_REDIS_WAIT_TIMEOUT",
        d.redis_wait_timeout,
        "with --redis-wait-replicas: seconds a commit waits for the replicas; fewer confirmations fail its "
        "posts with UNAVAILABLE (stored on the primary: retry with the same idempotency key)",
        type=float,
    )
    _flag(
        parser,
        "--replica-ttl",
        "AGENTNET_HUB_REPLICA_TTL",
        d.replica_ttl,
        "with --store redis://: seconds this replica's liveness key lives without a refresh; once it lapses, "
        "the other replicas fail the A2A calls this replica was running",
        type=float,
    )
    _flag(
        parser,
        "--replica-refresh",
        "AGENTNET_HUB_REPLICA_REFRESH",
        d.replica_refresh,
        "seconds between refreshes of the liveness key (and sweeps for the calls of stopped replicas); "
        "well below --replica-ttl",
        type=float,
    )
    _flag(parser, "--log-level", "AGENTNET_LOG_LEVEL", d.log_level, "log level")
    _flag(
        parser,
        "--synchronous",
        "AGENTNET_HUB_SYNCHRONOUS",
        d.synchronous,
        "SQLite durability: NORMAL survives a killed process; FULL also survives power loss (slower)",
        choices=["NORMAL", "FULL"],
    )
    _flag(
        parser,
        "--sqlite-inline-rows",
        "AGENTNET_HUB_SQLITE_INLINE_ROWS",
        d.sqlite_inline_rows,
        "with --store sqlite: a write of at most this many envelopes that finds the hub otherwise idle commits "
        "on the event loop (no hand-off to the database thread: lower latency, same durability); 0 = never",
        type=int,
    )
    _flag(
        parser,
        "--invite-ack-timeout",
        "AGENTNET_INVITE_ACK_TIMEOUT",
        d.invite_ack_timeout,
        "seconds a new channel waits for every invite ack",
        type=float,
    )
    _flag(
        parser,
        "--cursor-flush-interval",
        "AGENTNET_HUB_CURSOR_FLUSH_INTERVAL",
        d.cursor_flush_interval,
        "seconds between writes of acked delivery cursors (after a crash, a client resuming from the "
        "stored cursors may get what it acked in the last interval again)",
        type=float,
    )
    _flag(parser, "--max-depth", "AGENTNET_MAX_DEPTH", d.max_depth, "delegation and A2A call depth limit", type=int)
    _flag(
        parser,
        "--a2a-token-ttl",
        "AGENTNET_A2A_TOKEN_TTL",
        d.a2a_token_ttl,
        "seconds an A2A call token stays valid (refresh with RefreshCallToken)",
        type=float,
    )
    _flag(
        parser,
        "--a2a-token-grace",
        "AGENTNET_HUB_A2A_TOKEN_GRACE",
        d.a2a_token_grace,
        "seconds after its expiry RefreshCallToken still exchanges a call token (0 = only before)",
        type=float,
    )
    _flag(
        parser,
        "--a2a-max-tokens",
        "AGENTNET_HUB_A2A_MAX_TOKENS",
        d.a2a_max_tokens,
        "call tokens one A2A execution may hold at once; a RefreshCallToken beyond is refused "
        "(RESOURCE_EXHAUSTED) until one expires",
        type=int,
    )
    _flag(
        parser,
        "--a2a-outbound-allow",
        "AGENTNET_HUB_A2A_OUTBOUND_ALLOW",
        "",
        "comma-separated host or host:port glob patterns the hub may call outside A2A agents at "
        "(e.g. 'agents.example.com,*.internal:8443'); empty = no outbound A2A calls",
    )
    _flag(
        parser,
        "--a2a-outbound-max-bytes",
        "AGENTNET_HUB_A2A_OUTBOUND_MAX_BYTES",
        HubOptions.a2a_outbound_max_bytes,
        "largest Agent Card or answer read from an outside A2A agent, in bytes",
        type=int,
    )
    _flag(
        parser,
        "--a2a-outbound-connect-timeout",
        "AGENTNET_HUB_A2A_OUTBOUND_CONNECT_TIMEOUT",
        HubOptions.a2a_outbound_connect_timeout,
        "seconds to connect to an outside A2A agent (and to read its card)",
        type=float,
    )
    _flag(
        parser,
        "--max-stream-buffer-bytes",
        "AGENTNET_HUB_MAX_STREAM_BUFFER_BYTES",
        d.max_stream_buffer_bytes,
        "bytes the hub queues for one client stream (Connect, ReadWal follow) that is not reading "
        "before it ends the stream with RESOURCE_EXHAUSTED; the client resumes from its cursors",
        type=int,
    )
    _flag(
        parser,
        "--max-batch",
        "AGENTNET_HUB_MAX_BATCH",
        d.max_batch,
        "most post results and deliveries the hub packs into one Connect batch frame for a client whose "
        "Hello.max_batch asks for batches (it gets min(its max_batch, this)); 1 = never batch; also the most "
        "posts a client may send in one PostBatch frame (Welcome.max_post_batch)",
        type=int,
    )
    _flag(
        parser,
        "--max-batch-bytes",
        "AGENTNET_HUB_MAX_BATCH_BYTES",
        d.max_batch_bytes,
        "most bytes of post results and envelopes in one Connect batch frame (a larger entry goes alone); "
        f"at most {MAX_BATCH_BYTES_CEILING} (half the gRPC message limit)",
        type=int,
    )
    _flag(
        parser,
        "--max-json-depth",
        "AGENTNET_MAX_JSON_DEPTH",
        d.max_json_depth,
        "deepest nesting of arrays/objects in client JSON (event data, knobs, tool arguments, task payloads)",
        type=int,
    )
    _flag(
        parser,
        "--max-ttl-seconds",
        "AGENTNET_MAX_TTL_SECONDS",
        d.max_ttl_seconds,
        "longest channel/envelope/task ttl_seconds and invite_ack_timeout_seconds a client may ask for",
        type=float,
    )
    _flag(
        parser,
        "--max-wait-seconds",
        "AGENTNET_MAX_WAIT_SECONDS",
        d.max_wait_seconds,
        "longest timeout_seconds / wait_timeout_seconds a client may ask a call to wait",
        type=float,
    )
    _flag(
        parser,
        "--rate-audit-window",
        "AGENTNET_HUB_RATE_AUDIT_WINDOW",
        d.rate_audit_window,
        "seconds after an identity's first RATE_LIMITED refusal during which further refusals are only "
        "counted, then audited as one rate_limited record (suppressed=<n>)",
        type=float,
    )
    _flag(
        parser,
        "--max-operator-page-size",
        "AGENTNET_HUB_MAX_OPERATOR_PAGE_SIZE",
        d.max_operator_page,
        "most items in one page of an OperatorService list (a larger page_size is refused)",
        type=int,
    )
    _flag(
        parser,
        "--audit-poll-interval",
        "AGENTNET_HUB_AUDIT_POLL_INTERVAL",
        d.audit_poll_interval,
        "seconds between an OperatorService FollowAudit stream's looks in the store for audit records other "
        "replicas wrote (this hub's own records are sent at once)",
        type=float,
    )
    _flag(
        parser,
        "--operator-token-file",
        "AGENTNET_HUB_OPERATOR_TOKEN_FILE",
        None,
        "file with the operator token for ListAudit (default: <data-dir>/hub-operator.token, generated)",
        type=Path,
    )
    _flag(
        parser,
        "--policy",
        "AGENTNET_HUB_POLICY",
        None,
        "governance policy file (YAML or JSON; docs/governance.md); an invalid file stops the hub at start, "
        "and is ignored (audited policy_reload_failed) when it changes later",
        type=Path,
    )
    _flag(
        parser,
        "--policy-poll-interval",
        "AGENTNET_HUB_POLICY_POLL_INTERVAL",
        d.policy_poll_interval,
        "seconds between checks of the policy file for changes",
        type=float,
    )
    _flag(
        parser,
        "--arbiter",
        "AGENTNET_HUB_ARBITER",
        d.arbiter,
        "governance arbiter to consult, as package.module:attribute (docs/governance.md 'The arbiter')",
    )
    _flag(
        parser,
        "--arbiter-timeout",
        "AGENTNET_HUB_ARBITER_TIMEOUT",
        d.arbiter_timeout,
        "seconds to wait for the arbiter's verdict; a slower arbiter refuses the action",
        type=float,
    )
    for flag, env_var, default, help in _SIZE_FLAGS:
        _flag(parser, flag, env_var, default, help, type=int)
    add_tls_arguments(parser, "AGENTNET_HUB_")
    add_metrics_arguments(parser, "AGENTNET_HUB_")
    parser.add_argument(
        "--tls-bind-identity",
        action="store_true",
        default=env_flag(os.environ.get("AGENTNET_HUB_TLS_BIND_IDENTITY")),
        help="accept an agent credential only on a connection whose client certificate names that agent "
        "(URI SAN agentnet:agent:<name>, else subject CN); Register only the name the certificate carries; "
        "needs --tls-client-ca [AGENTNET_HUB_TLS_BIND_IDENTITY=1]",
    )
    args = parser.parse_args(argv)
    tls = tls_from_args(parser, args, args.host)
    metrics = metrics_from_args(parser, args)
    if args.tls_bind_identity and (tls is None or not tls.mutual):
        parser.error(
            "--tls-bind-identity needs --tls-client-ca (and --tls-cert, --tls-key): the hub binds "
            "identities to verified client certificates"
        )
    try:
        check_store(args.store)
    except ValueError as exc:
        parser.error(f"--store (AGENTNET_HUB_STORE) {exc}")
    if not 0 < args.redis_timeout <= 3600:
        parser.error("--redis-timeout (AGENTNET_HUB_REDIS_TIMEOUT) must be in (0, 3600] seconds")
    if args.redis_wait_replicas < 0:
        parser.error("--redis-wait-replicas (AGENTNET_HUB_REDIS_WAIT_REPLICAS) must not be negative")
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
    if not 0 < args.replica_ttl <= 3600:
        parser.error("--replica-ttl (AGENTNET_HUB_REPLICA_TTL) must be in (0, 3600] seconds")
    if not 0 < args.replica_refresh < args.replica_ttl:
        parser.error(
            "--replica-refresh (AGENTNET_HUB_REPLICA_REFRESH) must be positive and below --replica-ttl, "
            "or a live replica's key lapses between refreshes"
        )
    if args.a2a_token_ttl <= 0:
        parser.error("--a2a-token-ttl must be positive")
    if not 0 <= args.a2a_token_grace < float("inf"):
        parser.error("--a2a-token-grace (AGENTNET_HUB_A2A_TOKEN_GRACE) must be 0 or more seconds")
    if args.a2a_max_tokens < 1:
        parser.error("--a2a-max-tokens (AGENTNET_HUB_A2A_MAX_TOKENS) must be at least 1")
    if args.a2a_outbound_max_bytes <= 0:
        parser.error("--a2a-outbound-max-bytes (AGENTNET_HUB_A2A_OUTBOUND_MAX_BYTES) must be positive")
    if not 0 < args.a2a_outbound_connect_timeout < float("inf"):
        parser.error("--a2a-outbound-connect-timeout (AGENTNET_HUB_A2A_OUTBOUND_CONNECT_TIMEOUT) must be positive")
    if not 0 <= args.sqlite_inline_rows <= 3000:
        parser.error("--sqlite-inline-rows (AGENTNET_HUB_SQLITE_INLINE_ROWS) must be in [0, 3000] envelopes")
    for flag, *_ in _SIZE_FLAGS:
        if getattr(args, flag[2:].replace("-", "_")) <= 0:
            parser.error(f"{flag} must be positive")
    if args.max_json_depth < 1:
        parser.error("--max-json-depth must be at least 1")
    if not (0 < args.max_ttl_seconds < float("inf")) or not (0 < args.max_wait_seconds < float("inf")):
        parser.error("--max-ttl-seconds and --max-wait-seconds must be positive and finite")
    if not 0 < args.cursor_flush_interval <= 60:
        parser.error("--cursor-flush-interval must be in (0, 60] seconds")
    if args.max_stream_buffer_bytes <= 0:
        parser.error("--max-stream-buffer-bytes must be positive")
    if not 1 <= args.max_batch <= 100_000:
        parser.error("--max-batch must be in [1, 100000]")
    if not 0 < args.max_batch_bytes <= MAX_BATCH_BYTES_CEILING:
        parser.error(
            f"--max-batch-bytes must be in (0, {MAX_BATCH_BYTES_CEILING}]: a batch must fit in one gRPC message"
        )
    if not 0 < args.rate_audit_window <= 86400:
        parser.error("--rate-audit-window must be in (0, 86400] seconds")
    if not 1 <= args.max_operator_page_size <= 100_000:
        parser.error("--max-operator-page-size must be in [1, 100000]")
    if not 0 < args.audit_poll_interval <= 60:
        parser.error("--audit-poll-interval must be in (0, 60] seconds")
    if not 0 < args.policy_poll_interval <= 3600:
        parser.error("--policy-poll-interval must be in (0, 3600] seconds")
    if not 0 < args.arbiter_timeout <= 600:
        parser.error("--arbiter-timeout must be in (0, 600] seconds")
    return HubConfig(
        host=args.host,
        port=args.port,
        data_dir=args.data_dir,
        db_path=args.db,
        store=args.store,
        redis_timeout=args.redis_timeout,
        redis_wait_replicas=args.redis_wait_replicas,
        redis_wait_timeout=args.redis_wait_timeout,
        replica_ttl=args.replica_ttl,
        replica_refresh=args.replica_refresh,
        log_level=args.log_level,
        synchronous=args.synchronous,
        sqlite_inline_rows=args.sqlite_inline_rows,
        invite_ack_timeout=args.invite_ack_timeout,
        cursor_flush_interval=args.cursor_flush_interval,
        max_depth=args.max_depth,
        a2a_token_ttl=args.a2a_token_ttl,
        a2a_token_grace=args.a2a_token_grace,
        a2a_max_tokens=args.a2a_max_tokens,
        a2a_outbound_allow=tuple(p.strip() for p in args.a2a_outbound_allow.split(",") if p.strip()),
        a2a_outbound_max_bytes=args.a2a_outbound_max_bytes,
        a2a_outbound_connect_timeout=args.a2a_outbound_connect_timeout,
        max_event_data_bytes=args.max_event_data_bytes,
        max_skill_bytes=args.max_skill_bytes,
        max_checkpoint_bytes=args.max_checkpoint_bytes,
        max_id_bytes=args.max_id_bytes,
        max_text_bytes=args.max_text_bytes,
        max_repeated_items=args.max_repeated_items,
        max_stream_entries=args.max_stream_entries,
        max_json_depth=args.max_json_depth,
        max_ttl_seconds=args.max_ttl_seconds,
        max_wait_seconds=args.max_wait_seconds,
        max_stream_buffer_bytes=args.max_stream_buffer_bytes,
        max_batch=args.max_batch,
        max_batch_bytes=args.max_batch_bytes,
        rate_audit_window=args.rate_audit_window,
        max_operator_page=args.max_operator_page_size,
        audit_poll_interval=args.audit_poll_interval,
        operator_token_file=args.operator_token_file,
        tls=tls,
        tls_bind_identity=args.tls_bind_identity,
        policy=args.policy,
        policy_poll_interval=args.policy_poll_interval,
        arbiter=args.arbiter,
        arbiter_timeout=args.arbiter_timeout,
        metrics=metrics,
    )
