"""AG2 1.2.1's record shapes (``Envelope``, ``Passport``, ``Resume``, ``ChannelMetadata``, ``Rule``) from
and to the hub's protobuf messages. Pure functions, no I/O.

What differs and how it maps (docs/ag2.md "What maps to what"):

* event types: AG2 spells three lifecycle events differently (``ag2.channel.invite.ack``,
  ``ag2.channel.invite.reject``, ``ag2.expectation.violated``); every other type is the same string;
* envelope ids: :mod:`ag2gateway.ids`; a ``causation_id`` an AG2 client sends is turned back into the
  hub's id, and the hub's into the AG2 id where the gateway has seen that envelope;
* a passport's fields without a hub field (``region``, ``auth.scheme``, ``hub_id``) ride in its
  labels under ``ag2.``; a resume's examples are stored as JSON strings;
* a ``Rule`` maps block by block onto the hub's own rule of the identity (:mod:`ag2gateway.records.rules`);
* channel knobs: a workflow's ``graph`` (``TransitionGraph.to_dict()``) is translated into the hub's
  graph knobs and kept verbatim beside them, so AG2 clients read back exactly what they sent.
"""

from __future__ import annotations

from ag2gateway.records.channels import channel_to_ag2, knobs_from_ag2, knobs_to_ag2
from ag2gateway.records.common import iso
from ag2gateway.records.envelopes import (
    EV_PACKET,
    EVENT_FROM_AG2,
    EVENT_TO_AG2,
    IdMemory,
    envelope_from_ag2,
    envelope_to_ag2,
    packet_from_ag2,
    packet_to_ag2,
)
from ag2gateway.records.identities import (
    AUTH_SCHEME_LABEL,
    LABEL_PREFIX,
    passport_from_ag2,
    passport_to_ag2,
    resume_from_ag2,
    resume_to_ag2,
    scheme_of,
)
from ag2gateway.records.rules import default_rule, rule_from_ag2, rule_to_ag2
from ag2gateway.records.tasks import TASK_EVENT_FROM_AG2, task_to_ag2

__all__ = [
    "AUTH_SCHEME_LABEL",
    "EVENT_FROM_AG2",
    "EVENT_TO_AG2",
    "EV_PACKET",
    "LABEL_PREFIX",
    "TASK_EVENT_FROM_AG2",
    "IdMemory",
    "channel_to_ag2",
    "default_rule",
    "envelope_from_ag2",
    "envelope_to_ag2",
    "iso",
    "knobs_from_ag2",
    "knobs_to_ag2",
    "packet_from_ag2",
    "packet_to_ag2",
    "passport_from_ag2",
    "passport_to_ag2",
    "resume_from_ag2",
    "resume_to_ag2",
    "rule_from_ag2",
    "rule_to_ag2",
    "scheme_of",
    "task_to_ag2",
]
