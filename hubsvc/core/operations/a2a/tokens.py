"""A2A call tokens: RefreshCallToken, and the check of the token a nested call presents
(the tokens themselves are stored by :mod:`hubsvc.core.call_tokens`)."""

from __future__ import annotations

from hubsvc.core.call_tokens import ExecutionEnded
from hubsvc.core.executions import Running
from hubsvc.core.hub import HubCore
from netkernel.errors import FailedPrecondition, InvalidArgument, PermissionDenied, TokenExpired, Unauthenticated


def not_running(execution_id: str) -> FailedPrecondition:
    """The refusal of a token for an execution that is not running."""
    return FailedPrecondition(
        f"execution {execution_id!r} is not running (it has ended, or never existed); a call token is "
        "issued only while you answer the A2A dispatch with that execution_id.",
        metadata={"execution_id": execution_id},
    )


class CallTokenOps:
    """Issuing, exchanging and verifying the call tokens of running executions."""

    def __init__(self, core: HubCore) -> None:
        self.core = core

    async def _issue(self, running: Running) -> tuple[str, float]:
        try:
            return await self.core.call_tokens.issue(running)
        except ExecutionEnded:
            raise not_running(running.record.execution_id) from None

    async def _answering(self, caller: str, execution_id: str) -> Running:
        """The running execution ``execution_id`` (on any replica), which ``caller`` must be the target of."""
        running = await self.core.executions.find_running(execution_id)
        if running is None:
            raise not_running(execution_id)
        if running.record.target_id != caller:
            raise PermissionDenied(
                "this execution is another agent's A2A call; ask for a token of the dispatch you are answering.",
                metadata={"execution_id": execution_id},
            )
        return running

    async def _lookup(self, caller: str, token: str) -> tuple[Running, float]:
        found = await self.core.call_tokens.lookup(token)
        if found is None:
            raise Unauthenticated(
                "unknown call token, or its call has already ended; use the call_token of the A2A dispatch "
                "you are answering, and only while you answer it.",
                metadata={"field": "call_token"},
            )
        running, expires_at = found
        if running.record.target_id != caller:
            raise PermissionDenied(
                "this call token was issued to another agent; use the token of your own A2A dispatch.",
                metadata={"field": "call_token"},
            )
        return running, expires_at

    async def verify(self, caller: str, token: str) -> Running:
        """The running execution whose valid token ``caller`` (its target) presents for a nested call."""
        running, expires_at = await self._lookup(caller, token)
        if self.core.clock() >= expires_at:
            raise TokenExpired(
                "your call token has expired; exchange it with RefreshCallToken and retry "
                "(the Python SDK does this for you).",
                metadata={"execution_id": running.record.execution_id},
            )
        return running

    async def refresh(self, caller: str, token: str, execution_id: str = "") -> tuple[str, float]:
        """A fresh call token: for the running execution ``execution_id`` the caller is the
        target of, or in exchange for ``token`` (still valid or expired within the grace period)."""
        if bool(token) == bool(execution_id):
            raise InvalidArgument(
                "set exactly one of execution_id (the A2A dispatch you are answering) and call_token "
                "(a token to exchange).",
                metadata={"field": "execution_id" if execution_id else "call_token"},
            )
        if execution_id:
            return await self._issue(await self._answering(caller, execution_id))
        running, expires_at = await self._lookup(caller, token)
        if self.core.clock() >= expires_at + self.core.options.a2a_token_grace:
            raise TokenExpired(
                f"this call token expired more than {self.core.options.a2a_token_grace:g}s ago and can no longer be "
                "refreshed.",
                metadata={"execution_id": running.record.execution_id},
            )
        return await self._issue(running)
