"""Tunable limits and defaults of the hub core."""

from __future__ import annotations

from dataclasses import dataclass


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
    """Largest event_data_json accepted (PAYLOAD_TOO_LARGE beyond)."""
    max_in_flight: int = 1024
    """Default cap on unacked deliveries per stream (Hello.max_in_flight overrides, up to this)."""
    max_queued: int = 200_000
    """Queued deliveries per stream before the hub drops the stream (the client resumes from its cursors)."""
    max_stream_buffer_bytes: int = 32 * 1024 * 1024
    """Bytes the hub may hold queued for one client stream (Connect deliveries and post results,
    a ReadWal follow) while the client is not reading; beyond it the stream ends with
    RESOURCE_EXHAUSTED / INBOX_FULL and the client resumes from its cursors (Connect) or from
    the seq the error names (ReadWal). A single envelope larger than this is still sent."""
    cursor_flush_interval: float = 0.2
    """Seconds between batched writes of acked cursors."""
    sweep_interval: float = 1.0
    """Seconds between sweeps for expired tasks."""
    keepalive_seconds: int = 20
    """Ping interval suggested to clients in Welcome."""
    a2a_token_ttl: float = 300.0
    """Seconds an A2A call token stays valid (5 minutes)."""
    a2a_token_grace: float = 3600.0
    """Seconds after expiry during which RefreshCallToken still exchanges a token."""
    a2a_default_timeout: float = 300.0
    """Seconds InvokeAgent waits for the callee when the request gives no timeout."""
