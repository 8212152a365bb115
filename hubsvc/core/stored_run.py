"""A run of one channel's stored WAL records, read a column at a time: what hydrate folds.

Rebuilding a channel reads few fields of most envelopes: a conversation's fold needs each one's
event type, the inbox count its sender, seq and whether it has an audience, and the channel
whether it carries a depth or an idempotency key. Parsing every record into an
``agentnet.v1.Envelope`` and reading those fields one message at a time was most of hydrate's
cost. So a run is read first as **columns**: the records laid end to end are one protobuf
message (concatenated messages merge), parsed once as :data:`_Columns`, a message that declares
those few ``Envelope`` fields repeated, so each field's values of every record come back in
record order, and every other field is skipped. A field absent from every record (no audience,
no key, no depth: the usual case) is known absent without reading a record.

The columns stand for the records only when each record holds each column's field once, as
every record the hub writes does (it writes seq, sender_id and event_type on every envelope;
protobuf writes a field at most once). A run where a column's length is not the number of
records is read from its parsed messages instead, with the same result. Every record is parsed
into its ``Envelope`` message only when something reads one (:meth:`StoredRun.wire`): the
lifecycle envelopes, the run's last turn, envelopes with a depth, a key or an audience, and
every envelope of an adapter or an expectation track that reads them.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any

from agentnet.v1 import envelope_pb2
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import Message

from hubsvc.adapters.base import EnvelopeRun
from netkernel.envelope import Envelope
from netkernel.wire import envelope_from_wal

_PROTO = descriptor_pb2.FieldDescriptorProto


def _columns_class() -> type[Message]:
    """The message class reading ``Envelope`` records as columns (in a pool of its own)."""
    fields = envelope_pb2.Envelope.DESCRIPTOR.fields_by_name
    file = descriptor_pb2.FileDescriptorProto(
        name="hubsvc/stored_run_columns.proto", package="hubsvc.stored_run", syntax="proto3"
    )
    message = file.message_type.add(name="Columns")
    for name, kind in (
        ("seq", fields["seq"].type),
        ("sender_id", _PROTO.TYPE_STRING),
        ("event_type", _PROTO.TYPE_STRING),
        # Only whether these occur is read: bytes (never decoded; an audience is a message, length-delimited too).
        ("audience", _PROTO.TYPE_BYTES),
        ("idempotency_key", _PROTO.TYPE_BYTES),
        ("depth", fields["depth"].type),
    ):
        message.field.add(name=name, number=fields[name].number, label=_PROTO.LABEL_REPEATED, type=kind)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("hubsvc.stored_run.Columns"))


_Columns = _columns_class()
_parse_columns: Callable[[bytes], Any] = _Columns.FromString
"""Parses records laid end to end into their columns (a ``Columns`` message: no stubs describe it)."""
_parse = envelope_pb2.Envelope.FromString
_SEQ = operator.attrgetter("seq")
_SENDER = operator.attrgetter("sender_id")
_EVENT_TYPE = operator.attrgetter("event_type")
_KEYED = operator.methodcaller("HasField", "idempotency_key")


class StoredRun(EnvelopeRun):
    """A run of one channel's committed WAL records, in ascending seq order (see the module docstring).

    :attr:`seqs`, :attr:`senders` and :attr:`event_types` are each record's fields; the records'
    messages (:attr:`wires`) and envelopes (as :func:`~netkernel.wire.envelope_from_wal` reads
    them) are built when first read."""

    __slots__ = ("_addressed", "_keyed", "_wires", "deep", "records", "senders", "seqs")

    def __init__(self, records: Sequence[bytes]) -> None:
        self.records = records
        """The stored envelope bytes (never changed)."""
        self._wires: list[envelope_pb2.Envelope] | None = None
        columns = _parse_columns(b"".join(records))
        n = len(records)
        if len(columns.seq) == len(columns.sender_id) == len(columns.event_type) == n:
            super().__init__(list(columns.event_type), None)
            self.seqs: list[int] = list(columns.seq)
            """Each record's seq (ascending)."""
            self.senders: list[str] = list(columns.sender_id)
            """Each record's sender_id."""
        else:  # a record without one of those fields: read them from the messages
            wires = self.wires
            super().__init__(list(map(_EVENT_TYPE, wires)), None)
            self.seqs = list(map(_SEQ, wires))
            self.senders = list(map(_SENDER, wires))
        self._addressed = bool(columns.audience)
        self._keyed = bool(columns.idempotency_key)
        self.deep = any(columns.depth)
        """Whether some record has a depth (non-zero)."""

    @property
    def wires(self) -> list[envelope_pb2.Envelope]:
        """Every record's message (parsed on the first read, then kept)."""
        wires = self._wires
        if wires is None:
            wires = self._wires = list(map(_parse, self.records))
        return wires

    def wire(self, index: int) -> envelope_pb2.Envelope:
        """The message of record ``index`` (parsed alone unless every record's was)."""
        wires = self._wires
        return wires[index] if wires is not None else _parse(self.records[index])

    def envelope(self, index: int) -> Envelope:
        """The envelope of record ``index`` (the run's own once its envelopes were built)."""
        built = self._envelopes
        return built[index] if built is not None else envelope_from_wal(self.wire(index))

    def keyed(self) -> list[envelope_pb2.Envelope]:
        """The messages of the records that carry an idempotency key, in order."""
        return list(filter(_KEYED, self.wires)) if self._keyed else []

    def audiences(self) -> dict[int, Sequence[str]]:
        """The index of each record that has an audience → its audience ({} when all are broadcasts)."""
        if not self._addressed:
            return {}
        return {index: w.audience.agent_ids for index, w in enumerate(self.wires) if w.HasField("audience")}

    def _build(self) -> list[Envelope]:
        return list(map(envelope_from_wal, self.wires))
