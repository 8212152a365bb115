"""Tunable limits and defaults of the hub core, each declared once.

Every option a hub operator can set is one field here (or, for the process-level ones such as the
listen address and the store, in :class:`hubsvc.config.HubConfig`) declared with
:func:`netkernel.options.option`: its default, command-line flag, environment variable, help text and the
values it accepts. The hub's argument parser, its environment reading and its validation are derived from
these declarations (:func:`hubsvc.config.parse_args`), so a default or a bound is written in one place only.
"""

from __future__ import annotations

from dataclasses import dataclass

from netkernel.channel_types import DEFAULT_WAIT_SECONDS
from netkernel.options import POSITIVE, OptionSpec, Range, comma_list, duration, option, option_specs
from netkernel.partitions import MAX_PARTITIONS
from servicekit.runtime import DEFAULT_MAX_MESSAGE_BYTES

__all__ = [
    "MAX_BATCH_BYTES_CEILING",
    "POSITIVE",
    "HubOptions",
    "OptionSpec",
    "Range",
    "comma_list",
    "duration",
    "option",
    "option_specs",
]

MAX_BATCH_BYTES_CEILING = DEFAULT_MAX_MESSAGE_BYTES // 2
"""Largest --max-batch-bytes: a batch (plus its framing) always fits in one gRPC message."""


def _seconds(low: float, high: float) -> Range:
    """Above ``low`` seconds, up to ``high``."""
    return Range(low, high, unit=" seconds")


@dataclass(frozen=True)
class HubOptions:
    """Limits and defaults; every field has a safe default.

    The fields declared with :func:`option` are also the hub's flags and environment variables
    (docs/operations.md "Configuration" and "Limits"); the others are set only by code that embeds a hub.
    """

    invite_ack_timeout: float = option(
        30.0, "--invite-ack-timeout", "AGENTNET_INVITE_ACK_TIMEOUT", "seconds a new channel waits for every invite ack"
    )
    """Seconds a PENDING channel waits for every invite ack before closing with "invite_timeout"."""
    default_channel_ttl: float | None = None
    """Channel lifetime when OpenChannel gives none (None = no expiry)."""
    max_depth: int = option(8, "--max-depth", "AGENTNET_MAX_DEPTH", "delegation and A2A call depth limit")
    """Deepest delegation an envelope may carry; deeper posts are refused (DEPTH_EXCEEDED)."""
    max_event_data_bytes: int = option(
        1024 * 1024,
        "--max-event-data-bytes",
        "AGENTNET_MAX_EVENT_DATA_BYTES",
        "largest event_data_json (and Say/Delegate/InvokeAgent text) in bytes; PAYLOAD_TOO_LARGE beyond",
        check=POSITIVE,
    )
    """Largest event_data_json accepted, in UTF-8 bytes (PAYLOAD_TOO_LARGE beyond); also bounds the
    request text that becomes event data (Say content, Delegate prompt, InvokeAgent message, …)."""
    max_skill_bytes: int = option(
        256 * 1024,
        "--max-skill-bytes",
        "AGENTNET_MAX_SKILL_BYTES",
        "largest skill markdown in bytes; PAYLOAD_TOO_LARGE beyond",
        check=POSITIVE,
    )
    """Largest skill markdown (Register, SetSkill), in UTF-8 bytes (PAYLOAD_TOO_LARGE beyond)."""
    max_checkpoint_bytes: int = option(
        1024 * 1024,
        "--max-checkpoint-bytes",
        "AGENTNET_MAX_CHECKPOINT_BYTES",
        "largest task checkpoint (CheckpointTask.state_json) in bytes; PAYLOAD_TOO_LARGE beyond",
        check=POSITIVE,
    )
    """Largest task checkpoint (CheckpointTask.state_json), in UTF-8 bytes (PAYLOAD_TOO_LARGE beyond)."""
    max_id_bytes: int = option(
        256,
        "--max-id-bytes",
        "AGENTNET_MAX_ID_BYTES",
        "longest id, key, token or name in a request, in bytes; INVALID_ARGUMENT beyond",
        check=POSITIVE,
    )
    """Longest id, key, token or short name in a request, in UTF-8 bytes (INVALID_ARGUMENT beyond)."""
    max_text_bytes: int = option(
        64 * 1024,
        "--max-text-bytes",
        "AGENTNET_MAX_TEXT_BYTES",
        "longest other text field (intent, reason, query, ...) in bytes; INVALID_ARGUMENT beyond",
        check=POSITIVE,
    )
    """Longest other text field of a request (intent, reason, query, …), in UTF-8 bytes."""
    max_repeated_items: int = option(
        1024,
        "--max-repeated-items",
        "AGENTNET_MAX_REPEATED_ITEMS",
        "most items of a repeated field or map (audience, targets, labels, ...); INVALID_ARGUMENT beyond",
        check=POSITIVE,
    )
    """Most items of a repeated field or map of a request (audience, targets, resume lists, labels, …)."""
    max_stream_entries: int = option(
        100_000,
        "--max-stream-entries",
        "AGENTNET_MAX_STREAM_ENTRIES",
        "most resume cursors in a Hello and acks in one Ack frame",
        check=POSITIVE,
    )
    """Most resume cursors in a Hello and acks in one Ack frame."""
    max_json_depth: int = option(
        64,
        "--max-json-depth",
        "AGENTNET_MAX_JSON_DEPTH",
        "deepest nesting of arrays/objects in client JSON (event data, knobs, tool arguments, task payloads)",
        check=Range(1, brackets="[]"),
    )
    """Deepest nesting of arrays and objects in any JSON a client sends (event_data_json, seeds, knobs_json,
    tool arguments, task payloads); deeper is refused with INVALID_ARGUMENT."""
    max_ttl_seconds: float = option(
        365 * 86400.0,
        "--max-ttl-seconds",
        "AGENTNET_MAX_TTL_SECONDS",
        "longest channel/envelope/task ttl_seconds and invite_ack_timeout_seconds a client may ask for",
        check=POSITIVE,
    )
    """Longest lifetime a client may ask for: a channel's or envelope's ttl_seconds, a task's ttl_seconds and
    OpenChannel's invite_ack_timeout_seconds (INVALID_ARGUMENT beyond, and for NaN, infinity or <= 0)."""
    max_wait_seconds: float = option(
        86400.0,
        "--max-wait-seconds",
        "AGENTNET_MAX_WAIT_SECONDS",
        "longest timeout_seconds / wait_timeout_seconds a client may ask a call to wait",
        check=POSITIVE,
    )
    """Longest wait a client may ask for: InvokeAgent's, Delegate's and WaitTask's timeout_seconds and
    OpenChannel's wait_timeout_seconds (INVALID_ARGUMENT beyond, and for NaN or infinity)."""
    max_in_flight: int = 1024
    """Default cap on unacked deliveries per stream (Hello.max_in_flight overrides, up to this)."""
    max_queued: int = 200_000
    """Queued deliveries per stream before the hub drops the stream (the client resumes from its cursors)."""
    max_stream_buffer_bytes: int = option(
        32 * 1024 * 1024,
        "--max-stream-buffer-bytes",
        "AGENTNET_HUB_MAX_STREAM_BUFFER_BYTES",
        "bytes the hub queues for one client stream (Connect, ReadWal follow) that is not reading "
        "before it ends the stream with RESOURCE_EXHAUSTED; the client resumes from its cursors",
        check=POSITIVE,
    )
    """Bytes the hub may hold queued for one client stream (Connect deliveries and post results,
    a ReadWal follow) while the client is not reading; beyond it the stream ends with
    RESOURCE_EXHAUSTED / INBOX_FULL and the client resumes from its cursors (Connect) or from
    the seq the error names (ReadWal). A single envelope larger than this is still sent."""
    max_batch: int = option(
        256,
        "--max-batch",
        "AGENTNET_HUB_MAX_BATCH",
        "most post results and deliveries the hub packs into one Connect batch frame for a client whose "
        "Hello.max_batch asks for batches (it gets min(its max_batch, this)); 1 = never batch; also the most "
        "posts a client may send in one PostBatch frame (Welcome.max_post_batch)",
        check=Range(1, 100_000, "[]"),
    )
    """Most post results and deliveries in one Connect ``batch`` frame (Hello.max_batch asks for up to this;
    clients that ask for nothing get one per frame), and most posts in one ``post_batch`` frame a client
    sends (Welcome.max_post_batch)."""
    max_batch_bytes: int = option(
        1024 * 1024,
        "--max-batch-bytes",
        "AGENTNET_HUB_MAX_BATCH_BYTES",
        "most bytes of post results and envelopes in one Connect batch frame (a larger entry goes alone); "
        f"at most {MAX_BATCH_BYTES_CEILING} (half the gRPC message limit)",
        check=Range(0, MAX_BATCH_BYTES_CEILING, why=": a batch must fit in one gRPC message"),
    )
    """Most bytes of post results and envelopes in one ``batch`` frame (an entry larger than this goes alone);
    at most half the gRPC message limit, so a batch always fits in a message."""
    cursor_flush_interval: float = option(
        0.2,
        "--cursor-flush-interval",
        "AGENTNET_HUB_CURSOR_FLUSH_INTERVAL",
        "seconds between writes of acked delivery cursors (after a crash, a client resuming from the "
        "stored cursors may get what it acked in the last interval again)",
        check=_seconds(0, 60),
    )
    """Seconds between batched writes of acked cursors."""
    sweep_interval: float = 1.0
    """Seconds between sweeps for expired tasks."""
    replica_ttl: float = option(
        5.0,
        "--replica-ttl",
        "AGENTNET_HUB_REPLICA_TTL",
        "with --store redis://: seconds this replica's liveness key lives without a refresh; once it lapses, "
        "the other replicas fail the A2A calls this replica was running",
        check=_seconds(0, 3600),
    )
    """With replicas sharing a store: seconds a replica's liveness key lives without a refresh. Once it
    lapses, the other replicas fail the A2A calls that replica was running (its callers are gone)."""
    replica_refresh: float = option(
        1.0,
        "--replica-refresh",
        "AGENTNET_HUB_REPLICA_REFRESH",
        "seconds between refreshes of the liveness key (and sweeps for the calls of stopped replicas); "
        "well below --replica-ttl",
        check=POSITIVE,
    )
    """Seconds between refreshes of this replica's liveness key (and sweeps for calls of stopped
    replicas); well below ``replica_ttl``, so a few slow refreshes do not make a live replica look dead."""
    partitions: int = option(
        0,
        "--partitions",
        "AGENTNET_HUB_PARTITIONS",
        "with --store redis://: divide the channels among the replicas in this many partitions, each held "
        "by one replica (0: every replica holds every channel); every replica of a store must use it, and "
        "the count is fixed when the store is first opened with it (a replica opening it with another "
        "count warns and uses the recorded one)",
        check=Range(0, MAX_PARTITIONS, "[]"),
    )
    """With replicas sharing a Redis store: how many partitions the channels fall into, each held by one
    replica at a time (docs/scale-out.md "Channels divided among the replicas"); 0 (the default): every
    replica holds every channel. Fixed when the store is first opened with it: a store records its count, and
    a replica opening it with another count warns and uses the recorded one."""
    steer_interval: float = option(
        10.0,
        "--steer-interval",
        "AGENTNET_HUB_STEER_INTERVAL",
        "with --partitions: a client that follows redirects is asked to move its Connect stream to the "
        "replica holding most of its channels, at most once per this many seconds (0: never asked)",
        check=Range(0, 3600, "[]", unit=" seconds"),
    )
    """With the channels divided among replicas: how often at most (seconds) a replica asks a Connect
    stream whose client follows redirects to move to the replica holding most of its channels
    (docs/scale-out.md "Session steering"); 0 turns steering off."""
    keepalive_seconds: int = 20
    """Ping interval suggested to clients in Welcome."""
    a2a_token_ttl: float = option(
        300.0,
        "--a2a-token-ttl",
        "AGENTNET_A2A_TOKEN_TTL",
        "seconds an A2A call token stays valid (refresh with RefreshCallToken)",
        check=POSITIVE,
    )
    """Seconds an A2A call token stays valid (5 minutes)."""
    a2a_token_grace: float = option(
        3600.0,
        "--a2a-token-grace",
        "AGENTNET_HUB_A2A_TOKEN_GRACE",
        "seconds after its expiry RefreshCallToken still exchanges a call token (0 = only before)",
        check=Range(0, brackets="[)", unit=" seconds"),
    )
    """Seconds after expiry during which RefreshCallToken still exchanges a token."""
    a2a_max_tokens: int = option(
        16,
        "--a2a-max-tokens",
        "AGENTNET_HUB_A2A_MAX_TOKENS",
        "call tokens one A2A execution may hold at once; a RefreshCallToken beyond is refused "
        "(RESOURCE_EXHAUSTED) until one expires",
        check=Range(1, brackets="[)"),
    )
    """Call tokens one A2A execution may hold in the store at once. Expired tokens make room (those
    past the grace period are removed, then the oldest expired ones); a RefreshCallToken that would
    leave more unexpired tokens than this is refused (RESOURCE_EXHAUSTED / LIMIT_EXCEEDED), so
    every token handed out keeps working until its expiry."""
    rate_audit_window: float = option(
        60.0,
        "--rate-audit-window",
        "AGENTNET_HUB_RATE_AUDIT_WINDOW",
        "seconds after an identity's first RATE_LIMITED refusal during which further refusals are only "
        "counted, then audited as one rate_limited record (suppressed=<n>)",
        check=_seconds(0, 86400),
    )
    """Seconds after an identity's first RATE_LIMITED refusal during which further refusals are counted
    and audited as one ``rate_limited`` record (``suppressed=<n>``), not one record each."""
    a2a_default_timeout: float = DEFAULT_WAIT_SECONDS
    """Seconds InvokeAgent waits for the callee when the request gives no timeout."""
    a2a_outbound_allow: tuple[str, ...] = option(
        (),
        "--a2a-outbound-allow",
        "AGENTNET_HUB_A2A_OUTBOUND_ALLOW",
        "comma-separated host or host:port glob patterns the hub may call outside A2A agents at "
        "(e.g. 'agents.example.com,*.internal:8443'); empty = no outbound A2A calls",
        parse=comma_list,
    )
    """Destinations the hub may call outside A2A agents at, as ``host`` or ``host:port`` glob patterns
    (``agents.example.com``, ``*.internal:8443``); empty = no outbound A2A calls at all (the hub fetches
    no card and sends nothing). Both the card URL and the interface the card names must match."""
    a2a_outbound_max_bytes: int = option(
        1024 * 1024,
        "--a2a-outbound-max-bytes",
        "AGENTNET_HUB_A2A_OUTBOUND_MAX_BYTES",
        "largest Agent Card or answer read from an outside A2A agent, in bytes",
        check=POSITIVE,
    )
    """Largest Agent Card or answer the hub reads from an outside A2A agent, in bytes (a larger card is
    refused with RESOURCE_EXHAUSTED; a larger answer fails the call)."""
    a2a_outbound_connect_timeout: float = option(
        10.0,
        "--a2a-outbound-connect-timeout",
        "AGENTNET_HUB_A2A_OUTBOUND_CONNECT_TIMEOUT",
        "seconds to connect to an outside A2A agent (and to read its card)",
        check=POSITIVE,
    )
    """Seconds the hub waits to connect to an outside A2A agent (and to read its card)."""
    policy_poll_interval: float = option(
        2.0,
        "--policy-poll-interval",
        "AGENTNET_HUB_POLICY_POLL_INTERVAL",
        "seconds between checks of the policy file for changes",
        check=_seconds(0, 3600),
    )
    """Seconds between checks of the policy file for changes (docs/governance.md "The policy file")."""
    arbiter_timeout: float = option(
        2.0,
        "--arbiter-timeout",
        "AGENTNET_HUB_ARBITER_TIMEOUT",
        "seconds to wait for the arbiter's verdict; a slower arbiter refuses the action",
        check=_seconds(0, 600),
    )
    """Seconds the hub waits for the arbiter's verdict; a slower arbiter refuses the action (RULE_DENIED,
    check ``arbiter.timeout``)."""
    max_operator_page: int = option(
        1000,
        "--max-operator-page-size",
        "AGENTNET_HUB_MAX_OPERATOR_PAGE_SIZE",
        "most items in one page of an OperatorService list (a larger page_size is refused)",
        check=Range(1, 100_000, "[]"),
    )
    """Most items an OperatorService list answers in one page (its page_size; larger is INVALID_ARGUMENT)."""
    audit_poll_interval: float = option(
        0.5,
        "--audit-poll-interval",
        "AGENTNET_HUB_AUDIT_POLL_INTERVAL",
        "seconds between an OperatorService FollowAudit stream's looks in the store for audit records other "
        "replicas wrote (this hub's own records are sent at once)",
        check=_seconds(0, 60),
    )
    """Seconds between an OperatorService FollowAudit stream's looks in the store for audit records other
    replicas wrote (this hub's own commits wake the stream at once)."""
    retain_ended: float = option(
        0.0,
        "--retain-ended",
        "AGENTNET_HUB_RETAIN_ENDED",
        "how long an ended channel's history is kept before a background sweep purges it: seconds, or "
        "90s / 15m / 12h / 30d (0 = keep everything)",
        parse=duration,
        check=Range(0, 100 * 365 * 86400.0, "[]", unit=" seconds"),
    )
    """Seconds an ended channel's WAL, cursors and membership are kept before retention purges them,
    leaving a tombstone (docs/operations.md "Data over time"); 0 keeps everything."""
    retain_audit: float = option(
        0.0,
        "--retain-audit",
        "AGENTNET_HUB_RETAIN_AUDIT",
        "how long audit records are kept before the background sweep deletes them: seconds, or "
        "90s / 15m / 12h / 30d (0 = keep everything)",
        parse=duration,
        check=Range(0, 100 * 365 * 86400.0, "[]", unit=" seconds"),
    )
    """Seconds an audit record is kept before the retention sweep deletes it (docs/operations.md
    "Data over time"); 0 keeps everything."""
    archive_dir: str = option(
        "",
        "--archive-dir",
        "AGENTNET_HUB_ARCHIVE_DIR",
        "directory retention writes each channel's archive (gzip JSON lines) into before purging it",
    )
    """Directory each purged channel's archive (:mod:`netkernel.archive`) is written to before the purge
    ("" = none)."""
    retention_sweep_interval: float = option(
        60.0,
        "--retention-sweep-interval",
        "AGENTNET_HUB_RETENTION_SWEEP_INTERVAL",
        "seconds between retention sweeps of ended channels",
        check=_seconds(0, 86400),
    )
    """Seconds between retention sweeps (with --retain-ended)."""
    retention_batch_rows: int = option(
        500,
        "--retention-batch-rows",
        "AGENTNET_HUB_RETENTION_BATCH_ROWS",
        "most WAL rows one retention transaction deletes (a commit waits for at most one)",
        check=Range(1, 100_000, "[]"),
    )
    """Most WAL rows one purge transaction deletes: what bounds how long a commit can wait for a sweep."""
