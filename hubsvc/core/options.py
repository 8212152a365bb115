"""Tunable limits and defaults of the hub core."""

from __future__ import annotations

from dataclasses import dataclass

from netkernel.channel_types import DEFAULT_WAIT_SECONDS


@dataclass(frozen=True)
class HubOptions:
    """Limits and defaults; every field has a safe default."""

    invite_ack_timeout: float = 30.0
    """Seconds a PENDING channel waits for every invite ack before closing with "invite_timeout"."""
    default_channel_ttl: float | None = None
    """Channel lifetime when OpenChannel gives none (None = no expiry)."""
    max_depth: int = 8
    """Deepest delegation an envelope may carry; deeper posts are refused (DEPTH_EXCEEDED)."""
    max_event_data_bytes: int = 1024 * 1024
    """Largest event_data_json accepted, in UTF-8 bytes (PAYLOAD_TOO_LARGE beyond); also bounds the
    request text that becomes event data (Say content, Delegate prompt, InvokeAgent message, …)."""
    max_skill_bytes: int = 256 * 1024
    max_checkpoint_bytes: int = 1024 * 1024
    """Largest task checkpoint (CheckpointTask.state_json), in UTF-8 bytes (PAYLOAD_TOO_LARGE beyond)."""
    """Largest skill markdown (Register, SetSkill), in UTF-8 bytes (PAYLOAD_TOO_LARGE beyond)."""
    max_id_bytes: int = 256
    """Longest id, key, token or short name in a request, in UTF-8 bytes (INVALID_ARGUMENT beyond)."""
    max_text_bytes: int = 64 * 1024
    """Longest other text field of a request (intent, reason, query, …), in UTF-8 bytes."""
    max_repeated_items: int = 1024
    """Most items of a repeated field or map of a request (audience, targets, resume lists, labels, …)."""
    max_stream_entries: int = 100_000
    """Most resume cursors in a Hello and acks in one Ack frame."""
    max_json_depth: int = 64
    """Deepest nesting of arrays and objects in any JSON a client sends (event_data_json, seeds, knobs_json,
    tool arguments, task payloads); deeper is refused with INVALID_ARGUMENT."""
    max_ttl_seconds: float = 365 * 86400.0
    """Longest lifetime a client may ask for: a channel's or envelope's ttl_seconds, a task's ttl_seconds and
    OpenChannel's invite_ack_timeout_seconds (INVALID_ARGUMENT beyond, and for NaN, infinity or <= 0)."""
    max_wait_seconds: float = 86400.0
    """Longest wait a client may ask for: InvokeAgent's, Delegate's and WaitTask's timeout_seconds and
    OpenChannel's wait_timeout_seconds (INVALID_ARGUMENT beyond, and for NaN or infinity)."""
    max_in_flight: int = 1024
    """Default cap on unacked deliveries per stream (Hello.max_in_flight overrides, up to this)."""
    max_queued: int = 200_000
    """Queued deliveries per stream before the hub drops the stream (the client resumes from its cursors)."""
    max_stream_buffer_bytes: int = 32 * 1024 * 1024
    """Bytes the hub may hold queued for one client stream (Connect deliveries and post results,
    a ReadWal follow) while the client is not reading; beyond it the stream ends with
    RESOURCE_EXHAUSTED / INBOX_FULL and the client resumes from its cursors (Connect) or from
    the seq the error names (ReadWal). A single envelope larger than this is still sent."""
    max_batch: int = 256
    """Most post results and deliveries in one Connect ``batch`` frame (Hello.max_batch asks for up to this;
    clients that ask for nothing get one per frame), and most posts in one ``post_batch`` frame a client
    sends (Welcome.max_post_batch)."""
    max_batch_bytes: int = 1024 * 1024
    """Most bytes of post results and envelopes in one ``batch`` frame (an entry larger than this goes alone);
    at most half the gRPC message limit, so a batch always fits in a message."""
    cursor_flush_interval: float = 0.2
    """Seconds between batched writes of acked cursors."""
    sweep_interval: float = 1.0
    """Seconds between sweeps for expired tasks."""
    replica_ttl: float = 5.0
    """With replicas sharing a store: seconds a replica's liveness key lives without a refresh. Once it
    lapses, the other replicas fail the A2A calls that replica was running (its callers are gone)."""
    replica_refresh: float = 1.0
    """Seconds between refreshes of this replica's liveness key (and sweeps for calls of stopped
    replicas); well below ``replica_ttl``, so a few slow refreshes do not make a live replica look dead."""
    keepalive_seconds: int = 20
    """Ping interval suggested to clients in Welcome."""
    a2a_token_ttl: float = 300.0
    """Seconds an A2A call token stays valid (5 minutes)."""
    a2a_token_grace: float = 3600.0
    """Seconds after expiry during which RefreshCallToken still exchanges a token."""
    a2a_max_tokens: int = 16
    """Call tokens one A2A execution may hold in the store at once. Expired tokens make room (those
    past the grace period are removed, then the oldest expired ones); a RefreshCallToken that would
    leave more unexpired tokens than this is refused (RESOURCE_EXHAUSTED / LIMIT_EXCEEDED), so
    every token handed out keeps working until its expiry."""
    rate_audit_window: float = 60.0
    """Seconds after an identity's first RATE_LIMITED refusal during which further refusals are counted
    and audited as one ``rate_limited`` record (``suppressed=<n>``), not one record each."""
    a2a_default_timeout: float = DEFAULT_WAIT_SECONDS
    """Seconds InvokeAgent waits for the callee when the request gives no timeout."""
    a2a_outbound_allow: tuple[str, ...] = ()
    """Destinations the hub may call outside A2A agents at, as ``host`` or ``host:port`` glob patterns
    (``agents.example.com``, ``*.internal:8443``); empty = no outbound A2A calls at all (the hub fetches
    no card and sends nothing). Both the card URL and the interface the card names must match."""
    a2a_outbound_max_bytes: int = 1024 * 1024
    """Largest Agent Card or answer the hub reads from an outside A2A agent, in bytes (a larger card is
    refused with RESOURCE_EXHAUSTED; a larger answer fails the call)."""
    a2a_outbound_connect_timeout: float = 10.0
    """Seconds the hub waits to connect to an outside A2A agent (and to read its card)."""
    policy_poll_interval: float = 2.0
    """Seconds between checks of the policy file for changes (docs/governance.md "The policy file")."""
    arbiter_timeout: float = 2.0
    """Seconds the hub waits for the arbiter's verdict; a slower arbiter refuses the action (RULE_DENIED,
    check ``arbiter.timeout``)."""
    max_operator_page: int = 1000
    """Most items an OperatorService list answers in one page (its page_size; larger is INVALID_ARGUMENT)."""
    audit_poll_interval: float = 0.5
    """Seconds between an OperatorService FollowAudit stream's looks in the store for audit records other
    replicas wrote (this hub's own commits wake the stream at once)."""
