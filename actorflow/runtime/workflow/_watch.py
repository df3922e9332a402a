"""Following a run from any process that shares its store: ``runtime.watch(run_id)``.

A watcher owns nothing: it reads the run's manifest (status, checkpoints)
and the log after the last position it has seen, yields typed events, and
sleeps ``poll_interval`` between reads (a process that does not run the run
has no event to wait on). The manifest is read before the log, so once it
says the run stopped, that read of the log holds every record the run made.
Reading never cuts nor repairs a torn tail: stores leave it out of
``read_log``, and only the run's owner cuts it.

With ``events``, each read also takes what the run's event stream holds
after the last position seen (a :class:`~actorflow.storage.SupportsEventStream`
store: ephemeral emits from any process), yielded after that read's log
records. A gap in the stream's positions (events the owner dropped, or that
the store's bound removed before they were read) is yielded as ``EmitsLost``.
Before the watch ends on the run's stop it reads the stream until the
attempt's writer has ended it (the owner waits for that before it stores its
outcome), or for ``STREAM_GRACE`` seconds when the owner could not.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

import anyio
import msgspec

from actorflow.runtime.workflow._stream import RawEmitPayload
from actorflow.storage import (
    DecisionRecord,
    ErrorInfo,
    LogRecord,
    PhaseEndRecord,
    RunStatus,
    SnapshotInfo,
    StepRecord,
    StreamedEvent,
    SupportsEventStream,
)
from actorflow.storage import decode_value as decode

if TYPE_CHECKING:
    from collections.abc import AsyncGenerator

    from actorflow.storage import Store

__all__ = [
    "CheckpointSaved",
    "DecisionMade",
    "EmitRecorded",
    "EmitStreamed",
    "EmitsLost",
    "PhaseEnded",
    "Recorded",
    "RunEnded",
    "StatusChanged",
    "StepCompleted",
    "WatchEvent",
    "watch_run",
]

DEFAULT_POLL_INTERVAL = 0.25
"""Seconds between two reads of a watched run's store."""

_READ_LIMIT = 10_000
"""Streamed events one read of the store returns at most."""

STREAM_GRACE = 1.0
"""Seconds a watch of a stopped run waits for the rest of its event stream, at most."""


class StepCompleted(msgspec.Struct, frozen=True, kw_only=True):
    """A step's record reached the log (``ctx.ask``, ``ctx.spawn``, ``ctx.now``...).

    .. versionadded:: 0.2
    """

    position: int
    record: StepRecord


class DecisionMade(msgspec.Struct, frozen=True, kw_only=True):
    """A decision (``ctx.decide``) reached the log.

    .. versionadded:: 0.2
    """

    position: int
    record: DecisionRecord


class PhaseEnded(msgspec.Struct, frozen=True, kw_only=True):
    """A phase's end (and result) reached the log.

    .. versionadded:: 0.2
    """

    position: int
    record: PhaseEndRecord


class EmitRecorded(msgspec.Struct, frozen=True, kw_only=True):
    """A durable emit (``await ctx.emit(event, durable=True)``) reached the log.

    Attributes:
        position: its position in the log.
        record: its record (a step of kind ``emit``).
        agent: who emitted it.
        type: the event's class name (the watcher need not be able to import it).
        data: the event, MessagePack bytes: ``decode()`` it.

    .. versionadded:: 0.2
    """

    position: int
    record: StepRecord
    agent: str
    type: str
    data: bytes

    def decode(self, type: Any = Any) -> Any:
        """The event as ``type`` (a msgspec Struct class, say); plain data by default.

        Raises:
            CorruptedDataError: the bytes are not a ``type``.
        """
        return decode(self.data, type, "emitted event at position", str(self.position))


class EmitStreamed(msgspec.Struct, frozen=True, kw_only=True):
    """An ephemeral emit (``Actor.emit``, ``ctx.emit(event)``) from the run's event stream.

    Only with ``runtime.watch(..., events=True)``, on a store that keeps one.

    Attributes:
        position: its place in the run's event stream (resume with ``event_position``).
        time: when it was emitted, in seconds since the epoch.
        agent: who emitted it.
        type: the event's class name (the watcher need not be able to import it).
        data: the event, MessagePack bytes: ``decode()`` it.

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
        return decode(self.data, type, "streamed event at position", str(self.position))


class EmitsLost(msgspec.Struct, frozen=True, kw_only=True):
    """Events of the run's stream this watch will never see: ``count`` from ``position`` on.

    The run's owner dropped them (its writer fell behind), or the store's
    bound removed them before they were read (the watch fell behind, or
    started from a position older than what is kept).

    .. versionadded:: 0.4
    """

    position: int
    count: int


class Recorded(msgspec.Struct, frozen=True, kw_only=True):
    """Any other record: a milestone, a wait's request, a patch marker, the run's end.

    .. versionadded:: 0.2
    """

    position: int
    record: LogRecord


class CheckpointSaved(msgspec.Struct, frozen=True, kw_only=True):
    """A checkpoint (snapshot) of the run was written; ``snapshot.position`` is where.

    .. versionadded:: 0.2
    """

    snapshot: SnapshotInfo


class StatusChanged(msgspec.Struct, frozen=True, kw_only=True):
    """The run's status as its manifest says it (the first one read, then each change).

    ``prompt`` is what a paused run waits for.

    .. versionadded:: 0.2
    """

    status: RunStatus
    prompt: str | None = None


class RunEnded(msgspec.Struct, frozen=True, kw_only=True):
    """The run finished (completed, failed or cancelled): the last event of a watch.

    ``result`` is the MessagePack bytes of a completed run's result.

    .. versionadded:: 0.2
    """

    status: RunStatus
    position: int
    result: bytes | None = None
    error: ErrorInfo | None = None


WatchEvent = (
    StepCompleted
    | DecisionMade
    | PhaseEnded
    | EmitRecorded
    | EmitStreamed
    | EmitsLost
    | Recorded
    | CheckpointSaved
    | StatusChanged
    | RunEnded
)
"""What ``runtime.watch`` yields."""

_emit_payload = msgspec.msgpack.Decoder(RawEmitPayload)


def _event_of(position: int, record: LogRecord) -> WatchEvent:
    match record:
        case StepRecord(kind="emit", result=bytes() as result, error=None):
            try:
                payload = _emit_payload.decode(result)
            except msgspec.DecodeError:
                return StepCompleted(position=position, record=record)
            return EmitRecorded(
                position=position,
                record=record,
                agent=payload.agent,
                type=payload.type,
                data=bytes(payload.event),
            )
        case StepRecord():
            return StepCompleted(position=position, record=record)
        case DecisionRecord():
            return DecisionMade(position=position, record=record)
        case PhaseEndRecord():
            return PhaseEnded(position=position, record=record)
        case _:
            return Recorded(position=position, record=record)


class _StreamReader:
    """A watch's place in the run's event stream, and what each read adds."""

    def __init__(self, store: SupportsEventStream, run_id: str, position: int) -> None:
        self._store = store
        self._run_id = run_id
        self.position = position
        self.ended = True

    async def read(self) -> list[EmitStreamed | EmitsLost]:
        """What the stream holds from the position on (in slices, until one comes short)."""
        found: list[EmitStreamed | EmitsLost] = []
        while True:
            got = await self._store.read_events(self._run_id, self.position, limit=_READ_LIMIT)
            for event in got.events:
                found.extend(self._at(event))
            if got.next > self.position:
                found.append(EmitsLost(position=self.position, count=got.next - self.position))
                self.position = got.next
            self.ended = got.ended
            if len(got.events) < _READ_LIMIT:
                return found

    def _at(self, event: StreamedEvent) -> list[EmitStreamed | EmitsLost]:
        found: list[EmitStreamed | EmitsLost] = []
        if event.position > self.position:
            found.append(EmitsLost(position=self.position, count=event.position - self.position))
        found.append(
            EmitStreamed(
                position=event.position,
                time=event.time,
                agent=event.agent,
                type=event.type,
                data=event.data,
            )
        )
        self.position = event.position + 1
        return found

    async def finish(self, poll_interval: float) -> list[EmitStreamed | EmitsLost]:
        """The rest of a stopped run's stream: until its writer ended it, or ``STREAM_GRACE``."""
        found: list[EmitStreamed | EmitsLost] = []
        deadline = anyio.current_time() + STREAM_GRACE
        while not self.ended and (left := deadline - anyio.current_time()) > 0:
            await anyio.sleep(min(poll_interval, STREAM_GRACE / 4, left))
            found += await self.read()
        return found


async def watch_run(
    store: Store,
    run_id: str,
    *,
    position: int = 0,
    poll_interval: float = DEFAULT_POLL_INTERVAL,
    until: Literal["stopped", "finished"] = "stopped",
    events: bool = False,
    event_position: int = 0,
) -> AsyncGenerator[WatchEvent, None]:
    """Follow run ``run_id`` in ``store``: its records and checkpoints, in log order.

    See :meth:`Runtime.watch`.

    Raises:
        RunNotFoundError: the store has no such run.
        StorageError: ``position`` is below what retention kept of the log.
    """
    seen: set[str] = set()
    status: RunStatus | None = None
    start = position
    stream = (
        _StreamReader(store, run_id, event_position)
        if events and isinstance(store, SupportsEventStream)
        else None
    )
    while True:
        manifest = await store.read_run(run_id)
        records = await store.read_log(run_id, position)
        streamed = await stream.read() if stream is not None else []
        changed = manifest.status is not status
        status = manifest.status
        if changed and status is RunStatus.RUNNING:
            # (re)started: what follows in the log was made while it ran
            yield StatusChanged(status=status)
        checkpoints = sorted(
            (s for s in manifest.snapshots if s.snapshot_id not in seen and s.position >= start),
            key=lambda s: s.position,
        )
        seen.update(s.snapshot_id for s in manifest.snapshots)
        i = 0
        for record in records:
            # a checkpoint at p holds the records before p: it comes before the record at p
            while i < len(checkpoints) and checkpoints[i].position <= position:
                yield CheckpointSaved(snapshot=checkpoints[i])
                i += 1
            yield _event_of(position, record)
            position += 1
        for snapshot in checkpoints[i:]:
            yield CheckpointSaved(snapshot=snapshot)
        for item in streamed:
            yield item
        if changed and status is not RunStatus.RUNNING:
            stops = status.finished or (until == "stopped" and status is not RunStatus.QUEUED)
            if stream is not None and stops:
                for item in await stream.finish(poll_interval):
                    yield item
            # read before the log: every record it made is above
            if status.finished:
                yield RunEnded(
                    status=status, position=position, result=manifest.result, error=manifest.error
                )
                return
            yield StatusChanged(status=status, prompt=manifest.prompt)
            if stops:  # queued: a worker starts it
                return
        await anyio.sleep(poll_interval)
