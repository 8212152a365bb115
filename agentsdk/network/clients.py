"""Participants: the shared outbound surface (NetworkClient) and HumanClient.

A client is one registered identity with its live delivery stream. Outbound:
``open`` a channel, ``send`` text, ``post_envelope`` / ``send_envelope`` anything.
Inbound: every envelope goes through the client's dispatcher — for a HumanClient
the invite auto-ack, then the push callbacks, then the pull queue.

This module gathers them: :mod:`~agentsdk.network.network_client` defines NetworkClient,
:mod:`~agentsdk.network.human_client` HumanClient and its queue bounds.
"""

from __future__ import annotations

from agentsdk.network.human_client import (
    DEFAULT_MAX_QUEUED_BYTES,
    DEFAULT_MAX_QUEUED_ENVELOPES,
    HumanClient,
    check_queue_bounds,
)
from agentsdk.network.network_client import EnvelopeCallback, NetworkClient, PendingTurn, call_back

__all__ = [
    "DEFAULT_MAX_QUEUED_BYTES",
    "DEFAULT_MAX_QUEUED_ENVELOPES",
    "EnvelopeCallback",
    "HumanClient",
    "NetworkClient",
    "PendingTurn",
    "call_back",
    "check_queue_bounds",
]
