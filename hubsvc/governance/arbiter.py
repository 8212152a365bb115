"""The arbiter: a hook for governance decisions that need code, not data.

An arbiter is any object with an ``async decide(decision) -> Verdict`` method
(:class:`Arbiter`). The hub consults it after the policy's rules allowed an action —
registering, opening a channel, posting, delegating, invoking an agent — with a
:class:`Decision` saying who does what to whom. It answers :data:`ALLOW` or
:func:`refuse` with a reason; a refusal reaches the client as ``RULE_DENIED`` with
metadata ``rule=arbiter``.

It fails closed: an arbiter that raises, answers something other than a
:class:`Verdict`, or takes longer than ``HubOptions.arbiter_timeout`` refuses the
action (``check`` is ``arbiter.error`` / ``arbiter.timeout``; the exception is logged).
The operator (the operator token) is never put before the arbiter.

Load one with ``python -m hubsvc --arbiter package.module:attribute`` (the attribute is
an arbiter, or a class / factory called without arguments that returns one) or pass it
to ``start_hub(arbiter=...)`` / ``Hub.open(arbiter=...)``.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from netkernel.errors import RuleDenied

log = logging.getLogger("agentnet.hub")

Action = Literal["register", "open_channel", "post", "delegate", "invoke"]
"""What the identity is about to do."""


@dataclass(frozen=True)
class Decision:
    """One action the arbiter is asked about."""

    action: Action
    actor_name: str
    """Passport name of who acts (for ``register``: the name it registers)."""
    actor_kind: str
    """``agent``, ``remote_agent`` or ``human``."""
    actor_id: str = ""
    """Agent id of who acts ("" for ``register``: it has none yet)."""
    capabilities: tuple[str, ...] = ()
    """What the actor claims in its resume."""
    targets: tuple[str, ...] = ()
    """Passport names of whom the action reaches (invitees, the delegate, the callee, a post's audience)."""
    channel_type: str = ""
    """The channel's type (open_channel, post, delegate and invoke)."""
    channel_id: str = ""
    """The channel posted to (``post``)."""
    event_type: str = ""
    """The envelope's event type (``post``)."""
    depth: int = 0
    """Delegation / A2A depth the action carries."""


@dataclass(frozen=True)
class Verdict:
    """The arbiter's answer."""

    allowed: bool
    reason: str = ""
    """Why it refused (quoted to the client and in the audit log)."""


ALLOW = Verdict(True)
"""The verdict that lets the action go ahead."""


def refuse(reason: str) -> Verdict:
    """A verdict refusing the action, saying why."""
    return Verdict(False, reason)


@runtime_checkable
class Arbiter(Protocol):
    """Decides governed actions the policy file cannot express."""

    async def decide(self, decision: Decision) -> Verdict:
        """:data:`ALLOW`, or :func:`refuse` with the reason."""
        ...


def load_arbiter(spec: str) -> Arbiter:
    """The arbiter named ``module:attribute`` (ValueError saying what is wrong otherwise)."""
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise ValueError(f"--arbiter {spec!r} must be 'package.module:attribute'.")
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise ValueError(f"--arbiter {spec!r}: cannot import {module_name!r}: {err}") from None
    target = getattr(module, attribute, None)
    if target is None:
        raise ValueError(f"--arbiter {spec!r}: module {module_name!r} has no attribute {attribute!r}.")
    if isinstance(target, type) or not isinstance(target, Arbiter):
        target = target() if callable(target) else target
    if not isinstance(target, Arbiter):
        raise ValueError(f"--arbiter {spec!r} is not an arbiter: it needs an 'async def decide(decision)' method.")
    return target


async def consult(arbiter: Arbiter, decision: Decision, timeout: float) -> None:
    """Ask ``arbiter`` about ``decision``; RuleDenied (rule ``arbiter``) unless it allows in time."""
    try:
        verdict = await asyncio.wait_for(arbiter.decide(decision), timeout)
    except TimeoutError:
        log.warning(
            "the arbiter did not decide %s by %s within %gs: refused", decision.action, decision.actor_name, timeout
        )
        raise RuleDenied(
            f"the hub's arbiter did not decide in time (within {timeout:g}s), so {decision.action} is refused; "
            "retry later or ask the operator.",
            metadata={"rule": "arbiter", "check": "arbiter.timeout"},
        ) from None
    except Exception:
        log.exception("the arbiter failed deciding %s by %s: refused", decision.action, decision.actor_name)
        raise RuleDenied(
            f"the hub's arbiter failed while deciding, so {decision.action} is refused; ask the operator.",
            metadata={"rule": "arbiter", "check": "arbiter.error"},
        ) from None
    if not isinstance(verdict, Verdict):
        log.error("the arbiter answered %r, not a Verdict: refused", type(verdict).__name__)
        raise RuleDenied(
            f"the hub's arbiter gave no verdict, so {decision.action} is refused; ask the operator.",
            metadata={"rule": "arbiter", "check": "arbiter.error"},
        )
    if not verdict.allowed:
        raise RuleDenied(
            f"the hub's arbiter refuses this {decision.action}: {verdict.reason or 'no reason given'}",
            metadata={"rule": "arbiter", "check": "arbiter", "reason": verdict.reason},
        )
