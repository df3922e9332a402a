"""A run's event stream: its ephemeral emits, kept for a while for readers in any process.

This is the store's side of streamed events (``Actor.emit``, ``ctx.emit``
without ``durable``). Unlike the log it is not durable (never fsynced) and it
is bounded: a store keeps the newest part of it and drops the oldest.

The stream is a sequence of *batches*, each written by the run's owner in
one call from a background thread (:meth:`EventStreamWriter.write`). Every
event has a *position* (0, 1, 2, ... for the run's whole life, across its
attempts and owners): a batch holds the events from its ``first`` position
on. Positions are given when a batch is written, so an event the owner had
to drop (its writer fell behind) still takes one: a reader tells what it
lost by a gap in positions, and resumes from any position it saw with
:meth:`SupportsEventStream.read_events`.

A batch is sealed like every stored object (checksum, compression,
encryption bound to the run and ``events/<first>``), behind a plain prefix
(magic, ``first``, event count) that lets a reader skip batches without
opening them. A batch whose writer ended its stream (the attempt ended)
says so (``end``), so a reader that saw the run stop knows when it has
read everything that attempt streamed.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Any, Final, Protocol, runtime_checkable

import msgspec

from actorflow.errors import CorruptedDataError
from actorflow.storage._codec import decode_value
from actorflow.storage._envelope import Kind, sealed_size

if TYPE_CHECKING:
    from collections.abc import Sequence

    from actorflow.storage._sealing import Codec

__all__ = [
    "DEFAULT_EVENT_BYTES",
    "DEFAULT_READ_LIMIT",
    "EventSlice",
    "EventStreamWriter",
    "OpenedBatch",
    "StreamedEvent",
    "SupportsEventStream",
    "encode_event",
    "frame_length",
    "open_batch",
    "seal_batch",
]

DEFAULT_READ_LIMIT: Final = 10_000
"""Events one ``read_events`` call returns at most."""

DEFAULT_EVENT_BYTES: Final = 4 * 1024 * 1024
"""About how many bytes of a run's event stream the memory and file stores keep."""


class StreamedEvent(msgspec.Struct, frozen=True, kw_only=True):
    """One event of a run's event stream, as a reader in any process gets it.

    Attributes:
        position: its place in the run's stream (a gap before it: events lost).
        time: when it was emitted, in seconds since the epoch.
        agent: the emitting agent's name (``"orchestrator"`` for the run's own code).
        type: the event's class name (the reader need not be able to import it).
        data: the event, MessagePack bytes: :meth:`decode` it.

    .. versionadded:: 0.4
    """

    position: int
    time: float
    agent: str
    type: str
    data: bytes

    def decode(self, type: Any = Any) -> Any:
        """The event as ``type`` (a msgspec Struct class, say); plain data by default.

        Raises:
            CorruptedDataError: the bytes are not a ``type``.
        """
        return decode_value(self.data, type, "streamed event at position", str(self.position))


class EventSlice(msgspec.Struct, frozen=True, kw_only=True):
    """What one :meth:`SupportsEventStream.read_events` call found.

    Attributes:
        events: the events from the position asked for on, in position order.
            The first may come after that position (the older ones were
            dropped), and so may any other after the one before it.
        next: the position to read from next time.
        ended: no writer is in the middle of the stream: its last batch
            ended its writer's stream (the run's attempt that wrote it has
            ended, and nothing was written since), or it has none.

    .. versionadded:: 0.4
    """

    events: list[StreamedEvent]
    next: int
    ended: bool = False


@runtime_checkable
class EventStreamWriter(Protocol):
    """One attempt's writer of a run's event stream (``open_event_stream``).

    Its methods block: the runtime calls them from a background thread,
    never from the event loop, and one call at a time.

    .. versionadded:: 0.4
    """

    def write(self, events: Sequence[bytes], *, lost: int, end: bool) -> None:
        """Append one batch: ``events`` (each from :func:`encode_event`), after ``lost`` dropped.

        The events take the positions after the last one written plus
        ``lost`` (the events the owner dropped before these, which readers
        then see as a gap). With ``end``, this writer's stream ends (the
        batch may be empty then). Not durable: nothing is fsynced. Older
        batches may be dropped to keep the stream within the store's bound.

        Raises:
            StorageError: the store refused the write (the batch is lost).
        """
        ...

    def close(self) -> None:
        """Release what the writer holds (open files). Idempotent."""
        ...


@runtime_checkable
class SupportsEventStream(Protocol):
    """A store that keeps each run's streamed events for readers in any process.

    The memory and file stores have one; ``runtime.watch(..., events=True)``
    reads nothing from a store without it (only durable emits reach the log).

    .. versionadded:: 0.4
    """

    def open_event_stream(self, run_id: str) -> EventStreamWriter:
        """A writer for the run's event stream; its owner's, one per attempt. Never blocks.

        Nothing is opened nor checked until its first write.
        """
        ...

    async def read_events(
        self, run_id: str, start: int = 0, *, limit: int = DEFAULT_READ_LIMIT
    ) -> EventSlice:
        """Up to ``limit`` events of the run's stream from position ``start`` on.

        Events older than what the store keeps are skipped (the slice starts
        later); a batch the writer has not finished is left for a later read.

        Raises:
            InvalidRunIdError: ``run_id`` is not a valid run id.
            EncryptionKeyError: a batch is encrypted with a key the store lacks.
        """
        ...


# --- for the runtime and stores -----------------------------------------------------


_encode = msgspec.msgpack.Encoder().encode


def encode_event(time: float, agent: str, type_name: str, event: object) -> bytes:
    """One event as a batch holds it (``event`` is encoded as MessagePack).

    Raises:
        TypeError, ValueError, OverflowError, RecursionError, msgspec.EncodeError:
            ``event`` cannot be encoded.
    """
    return _encode((time, agent, type_name, event))


class _Event(msgspec.Struct, frozen=True, array_like=True):
    time: float
    agent: str
    type: str
    event: msgspec.Raw


class _Batch(msgspec.Struct, frozen=True, array_like=True):
    first: int
    end: bool
    events: list[msgspec.Raw]


_decode_batch = msgspec.msgpack.Decoder(_Batch).decode
_decode_event = msgspec.msgpack.Decoder(_Event).decode
_encode_batch = msgspec.msgpack.Encoder().encode

_PREFIX = struct.Struct(">4sQI")
_MAGIC = b"AFEV"
PREFIX_SIZE: Final = _PREFIX.size


def _slot(first: int) -> str:
    return f"events/{first}"


def _array_header(n: int) -> bytes:
    """The MessagePack header of an array of ``n`` items."""
    if n < 16:
        return bytes((0x90 | n,))
    if n < 0x10000:
        return b"\xdc" + n.to_bytes(2, "big")
    return b"\xdd" + n.to_bytes(4, "big")


def seal_batch(
    codec: Codec, events: Sequence[bytes], *, run_id: str, first: int, end: bool
) -> bytes:
    """A batch as it is stored: the plain prefix, then the sealed events."""
    # the MessagePack of a ``_Batch``, put together from the events' own bytes:
    # no object per event (the writer thread does this for every event it writes)
    head = b"\x93" + _encode_batch((first, end))[1:]  # an array of 3, not the pair's 2
    raw = b"".join((head, _array_header(len(events)), *events))
    sealed = codec.seal(raw, kind=Kind.EVENTS, run_id=run_id, slot=_slot(first))
    return _PREFIX.pack(_MAGIC, first, len(events)) + sealed


def frame_length(data: memoryview) -> tuple[int, int, int] | None:
    """``(first, count, length)`` of the stored batch ``data`` starts with, if it is whole.

    ``None``: it is cut short (not all written yet, or torn).

    Raises:
        CorruptedDataError: it does not start like a batch.
    """
    if len(data) < PREFIX_SIZE:
        return None
    magic, first, count = _PREFIX.unpack_from(data)
    if magic != _MAGIC:
        raise CorruptedDataError("event stream", "a batch does not start with its magic")
    size = sealed_size(data[PREFIX_SIZE:])
    if size is None or PREFIX_SIZE + size > len(data):
        return None
    return first, count, PREFIX_SIZE + size


class OpenedBatch(msgspec.Struct, frozen=True, kw_only=True):
    """A batch read back: its first position, whether it ends a stream, its events."""

    first: int
    end: bool
    events: list[StreamedEvent]


def open_batch(codec: Codec, data: bytes, *, run_id: str, location: str) -> OpenedBatch:
    """Verify, open and decode one stored batch (prefix included).

    Raises:
        CorruptedDataError: it is damaged, or not the batch its prefix says.
        EncryptionKeyError: encrypted with a key the codec lacks.
    """
    _, first, count = _PREFIX.unpack_from(data)
    raw = codec.open(
        data[PREFIX_SIZE:], kind=Kind.EVENTS, run_id=run_id, slot=_slot(first), location=location
    )
    try:
        batch = _decode_batch(raw)
        decoded = [_decode_event(e) for e in batch.events]
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise CorruptedDataError(location, f"an event batch does not decode: {exc}") from exc
    if batch.first != first or len(decoded) != count:
        raise CorruptedDataError(location, "an event batch is not the one its prefix names")
    events = [
        StreamedEvent(
            position=first + i, time=e.time, agent=e.agent, type=e.type, data=bytes(e.event)
        )
        for i, e in enumerate(decoded)
    ]
    return OpenedBatch(first=first, end=batch.end, events=events)
