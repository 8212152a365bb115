"""ReadBatcher: one client's concurrent ``Read`` calls coalesced into ``ReadMany`` calls.

A read joins the batch being gathered: every read made in the same event-loop turn,
and every read made while the previous batch is in flight, goes out as one
``ReadMany`` (at most ``max_items`` reads each); nothing waits on a timer. Each caller
gets its own outcome: its file, or the error a single ``Read`` would have raised.

Two answers send a read alone as a plain ``Read``: the service refusing an item only
because it did not fit the response's byte budget (PAYLOAD_TOO_LARGE with metadata
``field=reads``), and a service without ``ReadMany`` (UNIMPLEMENTED), after which
every read of this batcher is a plain ``Read``. A service allowing fewer items per
call (INVALID_ARGUMENT, ``field=reads``, ``limit``) gets smaller batches from then on.
"""

from __future__ import annotations

import asyncio

from agentnet.v1 import knowledge_pb2

from agentsdk.knowledge.rpc import KnowledgeRpc
from knowledgestore.feed import stop_task
from netkernel.errors import (
    AgentNetError,
    InvalidArgument,
    PayloadTooLarge,
    Unavailable,
    Unimplemented,
    error_from_reason,
)

#: Most reads the client puts in one ReadMany (the service's default limit; a lower one is learnt).
MAX_BATCH_ITEMS = 256

#: The metadata ``field`` of refusals that concern the batch rather than the file.
BATCH_FIELD = "reads"

# A pending read: the request and the future its caller awaits (None: send it alone as a Read).
_Pending = tuple[knowledge_pb2.ReadRequest, "asyncio.Future[knowledge_pb2.ReadResponse | None]"]


class ReadBatcher:
    """Coalesces the ``Read`` calls made through one :class:`KnowledgeRpc` into ``ReadMany`` calls."""

    def __init__(self, rpc: KnowledgeRpc, *, max_items: int = MAX_BATCH_ITEMS) -> None:
        self._rpc = rpc
        self.max_items = max_items
        """Most reads per ReadMany (lowered when the service allows fewer)."""
        self.batched = True
        """False once the service answered UNIMPLEMENTED: every read is then a plain Read."""
        self.calls = 0
        """ReadMany calls sent so far."""
        self._pending: list[_Pending] = []
        self._sender: asyncio.Task[None] | None = None

    async def read(self, request: knowledge_pb2.ReadRequest) -> knowledge_pb2.ReadResponse:
        """The answer a ``Read`` of ``request`` would give, fetched with the other reads made meanwhile."""
        if self.batched:
            loop = asyncio.get_running_loop()
            future: asyncio.Future[knowledge_pb2.ReadResponse | None] = loop.create_future()
            self._pending.append((request, future))
            if self._sender is None:
                # Starts on the next loop iteration: every read made in this turn joins the first batch.
                self._sender = loop.create_task(self._send(), name="knowledge read batch")
            response = await future
            if response is not None:
                return response
        return await self._rpc.read(request)

    async def _send(self) -> None:
        """Send pending reads, one ReadMany at a time, until none are left."""
        try:
            while self._pending:
                batch = [item for item in self._pending[: self.max_items] if not item[1].done()]
                del self._pending[: self.max_items]
                if batch:
                    await self._send_batch(batch)
        finally:
            self._sender = None

    async def _send_batch(self, batch: list[_Pending]) -> None:
        """One ReadMany for ``batch``; every caller's future gets its outcome (whatever happens)."""
        request = knowledge_pb2.ReadManyRequest(reads=[read for read, _ in batch])
        try:
            self.calls += 1
            response = await self._rpc.read_many(request)
        except Unimplemented:
            self.batched = False
            self._resolve_alone(batch)
            self._resolve_alone(self._pending)
            self._pending.clear()
            return
        except InvalidArgument as err:
            limit = err.metadata.get("limit", "") if err.metadata.get("field") == BATCH_FIELD else ""
            if limit.isdigit() and 0 < int(limit) < len(batch):
                self.max_items = int(limit)
                self._pending[:0] = batch  # sent again, in smaller batches
                return
            self._fail(batch, err)
            return
        except AgentNetError as err:
            self._fail(batch, err)
            return
        except BaseException:
            self._fail(batch, Unavailable("the knowledge store was closed while this read was in flight"))
            raise
        if len(response.results) != len(batch):
            self._fail(batch, Unavailable(f"ReadMany answered {len(response.results)} of {len(batch)} reads; retry"))
            return
        for (_, future), result in zip(batch, response.results, strict=True):
            if future.done():
                continue  # its caller was cancelled
            if result.HasField("file"):
                future.set_result(result.file)
                continue
            error = result.error
            if error.reason == PayloadTooLarge.reason and error.metadata.get("field") == BATCH_FIELD:
                future.set_result(None)  # did not fit this response: read it alone
                continue
            future.set_exception(error_from_reason(error.reason, error.message, dict(error.metadata), code=error.code))

    @staticmethod
    def _resolve_alone(batch: list[_Pending]) -> None:
        for _, future in batch:
            if not future.done():
                future.set_result(None)

    @staticmethod
    def _fail(batch: list[_Pending], err: AgentNetError) -> None:
        """Give every caller of ``batch`` its own copy of the call's error."""
        for _, future in batch:
            if not future.done():
                future.set_exception(type(err)(err.message, metadata=err.metadata))

    async def close(self) -> None:
        """Stop sending: callers still waiting get UNAVAILABLE."""
        sender, self._sender = self._sender, None
        if sender is not None:
            await stop_task(sender)
        self._fail(self._pending, Unavailable("the knowledge store was closed before this read was sent"))
        self._pending.clear()
