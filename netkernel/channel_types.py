"""The names of the channel types and of their knobs' values, shared by the hub's adapters and the SDK
(AG2's ``CONSULTING_TYPE`` … ``WORKFLOW_TYPE`` and ``ORDERING_ROUND_ROBIN``)."""

from __future__ import annotations

CONSULTING_TYPE = "consulting"
"""One question, one answer: the initiator asks, the consultant replies, the channel closes."""
CONVERSATION_TYPE = "conversation"
"""Free turn-taking between the participants."""
DISCUSSION_TYPE = "discussion"
"""Participants speak in a fixed order (the ``ordering`` knob), for ``max_turns`` turns."""
WORKFLOW_TYPE = "workflow"
"""A transition graph decides who speaks next (packets, context, routing tools)."""

ORDERING_ROUND_ROBIN = "round_robin"
"""A discussion's ``ordering`` knob: each participant in turn, in the order they were listed."""
DISCUSSION_ORDERINGS = (ORDERING_ROUND_ROBIN,)
"""The values a discussion's ``ordering`` knob accepts (the first is the default)."""
