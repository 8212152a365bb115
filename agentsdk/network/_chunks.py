"""Streaming a reply into its channel: the text a model streams during a handler turn, posted as
``ag2.msg.chunk`` envelopes while the turn runs (AG2's ``receive_chunk`` on the other side).

:class:`ChunkRelay` coalesces the deltas: one chunk envelope in flight at a time, the deltas that
arrive meanwhile joined into the next one, each at most ``max_chunk_bytes`` of UTF-8 (a longer
delta is split on a character boundary). At most :data:`BUFFERED_CHUNKS` chunks' worth waits
unsent: beyond it the model's stream is read no further until the relay caught up. A chunk the
hub refuses stops the relay for the rest of the turn (logged once); the turn itself goes on and
its reply is posted as usual, after every chunk.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import TYPE_CHECKING

from agentsdk.events import ModelMessageChunk
from netkernel.envelope import EV_MSG_CHUNK, Envelope

if TYPE_CHECKING:
    from agentsdk.network.clients import NetworkClient

__all__ = ["BUFFERED_CHUNKS", "DEFAULT_MAX_CHUNK_BYTES", "ChunkRelay", "utf8_prefix"]

log = logging.getLogger("agentnet.sdk")

DEFAULT_MAX_CHUNK_BYTES = 4096
"""The longest delta one chunk envelope carries, in UTF-8 bytes (``AgentClient.max_chunk_bytes``)."""
BUFFERED_CHUNKS = 4
"""How many chunks' worth of text (``BUFFERED_CHUNKS * max_chunk_bytes``) may wait unsent."""


def utf8_prefix(text: str, limit: int) -> str:
    """The longest prefix of ``text`` of at most ``limit`` UTF-8 bytes (at least one character)."""
    raw = text.encode()
    if len(raw) <= limit:
        return text
    return raw[:limit].decode("utf-8", "ignore") or text[0]


class ChunkRelay:
    """Posts one turn's streamed text into ``channel_id`` as ``ag2.msg.chunk`` envelopes answering
    ``causation_id``; give :meth:`add` to ``agent.ask(on_chunk=...)`` and await :meth:`finish`."""

    def __init__(self, client: NetworkClient, channel_id: str, causation_id: str, *, max_chunk_bytes: int) -> None:
        if max_chunk_bytes < 4:
            raise ValueError(f"max_chunk_bytes must be at least 4 (one UTF-8 character); got {max_chunk_bytes}")
        self.client = client
        self.channel_id = channel_id
        self.causation_id = causation_id
        self.max_chunk_bytes = max_chunk_bytes
        self.posted = 0
        """Chunk envelopes posted so far."""
        self.failed = False
        """True once the hub refused a chunk (the rest of the turn's chunks are not sent)."""
        self._pending: deque[list[int | str]] = deque()  # [call, text] per model call, oldest first
        self._pending_bytes = 0
        self._sender: asyncio.Task[None] | None = None
        self._progress = asyncio.Event()

    async def add(self, chunk: ModelMessageChunk) -> None:
        """Queue a delta; waits while more than :data:`BUFFERED_CHUNKS` chunks' worth is unsent."""
        if self.failed or not chunk.content:
            return
        if self._pending and self._pending[-1][0] == chunk.call:
            self._pending[-1][1] = f"{self._pending[-1][1]}{chunk.content}"
        else:
            self._pending.append([chunk.call, chunk.content])
        self._pending_bytes += len(chunk.content.encode())
        if self._sender is None or self._sender.done():
            self._sender = asyncio.create_task(self._drain())
        while self._pending_bytes > BUFFERED_CHUNKS * self.max_chunk_bytes and not self.failed:
            self._progress.clear()
            await self._progress.wait()

    async def finish(self) -> None:
        """Wait until every queued delta is posted (the reply is posted after this)."""
        while self._sender is not None:
            sender, self._sender = self._sender, None
            await sender
            if self._pending and not self.failed:
                self._sender = asyncio.create_task(self._drain())

    async def _drain(self) -> None:
        while self._pending and not self.failed:
            head = self._pending[0]
            call, text = int(head[0]), str(head[1])
            piece = utf8_prefix(text, self.max_chunk_bytes)
            if len(piece) < len(text):
                head[1] = text[len(piece) :]
            else:
                self._pending.popleft()
            self._pending_bytes -= len(piece.encode())
            envelope = Envelope(
                channel_id=self.channel_id,
                sender_id=self.client.agent_id,
                audience=None,
                event_type=EV_MSG_CHUNK,
                event_data={"delta": piece, "index": self.posted, "call": call},
                causation_id=self.causation_id,
            )
            try:
                await self.client.post_envelope(envelope)
            except Exception as exc:
                self.failed = True
                self._pending.clear()
                self._pending_bytes = 0
                log.warning(
                    "%s: streaming the reply into %s stopped: chunk %d was refused (%s); the reply is still posted.",
                    self.client.name,
                    self.channel_id,
                    self.posted,
                    getattr(exc, "message", exc),
                )
            else:
                self.posted += 1
            self._progress.set()
        self._progress.set()
