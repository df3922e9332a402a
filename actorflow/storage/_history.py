"""A run's settled past in chunks, so that a snapshot costs what changed, not the whole run.

Most of what a snapshot holds never changes once it happened: finished
top-level phases and their results, decisions, top-level steps and events,
the inbox entries taken. Embedding all of it made every snapshot of a long
run larger than the one before. Instead a snapshot *head* holds the run's
current state (agents, metrics, open phases and steps) plus the settled
entries not yet in its *history*, and names the newest :class:`HistoryChunk`
(a blob), which names the chunks before it.

Chunks are merged as in a log-structured merge tree: a new chunk (level 1)
is written once the entries a head carries pass ``FLUSH_BYTES`` or
``FLUSH_ENTRIES``; when ``FANOUT`` chunks of one level would stand side by
side they are written as one chunk of the next level instead. Each entry is
therefore written about once per level (the levels grow geometrically), a
head never carries more than a chunk's worth of settled entries, and a
history is a short list of chunks, read concurrently when a run recovers.

Settled entries of records the run's log still holds need not be copied at
all until there are many: a snapshot names them by a :class:`LogWindow` (the
log records from a position up to its own) instead of carrying them, and
readers take them from the log. A chunk is written once a window passes
``WINDOW_BYTES``, ``WINDOW_ENTRIES`` or ``WINDOW_RECORDS``, which bound what a
recovery reads from the log and how much of it retention keeps below the
oldest kept snapshot (see ``actorflow.storage._retention``). A run in ``sync``
durability thus writes each settled entry once, in its log record, until its
window fills; entries without a known log position (carried by a snapshot
from before windows) go to the snapshot or a chunk as before.

Chunks are blobs: content-addressed, sealed and encrypted like the run's
other blobs, collected by retention once no kept snapshot names them. They
are written without a sync where the store allows (the snapshot that names
them needs none either); :func:`sync_snapshots` makes a snapshot's chunks
durable before the snapshot itself. Snapshots written before chunks existed
(no ``history``) hold everything inline and read as they always did.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import msgspec

from actorflow.errors import CorruptedDataError, LogPrunedError, StorageError
from actorflow.storage._protocol import (
    SupportsSnapshotSync,
    put_unsynced_blob,
    sync_blobs,
)
from actorflow.storage._records import (
    ChunkRef,
    DecisionRecord,
    EventRecord,
    HistoryChunk,
    HistoryEntry,
    LogRecord,
    PhaseEndRecord,
    Snapshot,
    StepRecord,
)

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from actorflow.storage._protocol import Store

__all__ = [
    "FANOUT",
    "FLUSH_BYTES",
    "FLUSH_ENTRIES",
    "WINDOW_BYTES",
    "WINDOW_ENTRIES",
    "WINDOW_RECORDS",
    "History",
    "HistoryWriter",
    "history_addresses",
    "logged_entries",
    "read_full_snapshot",
    "read_history",
    "read_window",
    "read_window_and_after",
    "resolve_snapshot",
    "settled_entries",
    "settled_key",
    "sync_snapshots",
    "with_history",
]

FLUSH_BYTES = 4096
"""Settled bytes a snapshot head may carry before they go to a chunk."""

FLUSH_ENTRIES = 64
"""Settled entries a snapshot head may carry before they go to a chunk."""

FANOUT = 16
"""How many chunks of one level are merged into one of the next."""

WINDOW_BYTES = 64 * 1024
"""Settled bytes a snapshot may leave in the log (its window) before they go to a chunk."""

WINDOW_ENTRIES = 256
"""Settled entries a snapshot may leave in the log before they go to a chunk."""

WINDOW_RECORDS = 1024
"""Log records a window may span (settled or not) before its entries go to a chunk."""

_ENCODER = msgspec.msgpack.Encoder()
_DECODER = msgspec.msgpack.Decoder(HistoryChunk)


def settled_key(key: str) -> bool:
    """Whether a phase, step or event id (or an event's kind) is at the run's top level.

    Such entries are never removed by what happens later (a phase's end
    drops only what is inside it, ``<phase>/...`` and its retries'
    ``<phase>@<attempt>...``), so they may move to the history.
    """
    return "/" not in key and "@" not in key


def _entry_size(entry: HistoryEntry) -> int:
    """A cheap estimate of an entry's stored size: its payload plus a fixed overhead."""
    match entry:
        case PhaseEndRecord():
            return 48 + len(entry.result) + len(entry.phase_id) + len(entry.name)
        case StepRecord():
            message = entry.message
            sent = len(message.data or b"") if message is not None else 0
            return 96 + len(entry.result or b"") + len(entry.step_id) + sent
        case DecisionRecord():
            return (
                64
                + len(entry.description)
                + len(entry.rationale)
                + sum(len(a) for a in entry.alternatives)
            )
        case EventRecord():
            return 32 + len(entry.data or b"") + len(entry.kind)
        case _:
            return 8


def logged_entries(records: Iterable[LogRecord], start: int) -> list[tuple[int, HistoryEntry]]:
    """The settled entries log ``records`` hold (read from position ``start``), with positions.

    Inbox ``seq`` numbers are not among them: a snapshot carries those itself.
    This is what a run's view journals as it applies the records, and what a
    :class:`LogWindow` stands for.
    """
    found: list[tuple[int, HistoryEntry]] = []
    for position, record in enumerate(records, start):
        match record:
            case StepRecord():
                if settled_key(record.step_id):
                    found.append((position, record))
            case PhaseEndRecord():
                if settled_key(record.phase_id):
                    found.append((position, record))
            case DecisionRecord():
                found.append((position, record))
            case EventRecord():
                if settled_key(record.step_id or record.kind):
                    found.append((position, record))
            case _:
                pass
    return found


async def read_window(store: Store, snapshot: Snapshot) -> list[tuple[int, HistoryEntry]]:
    """The settled entries ``snapshot``'s window names, read from the log, with positions.

    Raises:
        CorruptedDataError: the log no longer holds them all (pruned below the
            window, or shorter than the snapshot), holds a different number,
            or is damaged.
        StorageError: the store cannot be read.
    """
    if snapshot.window is None:
        return []
    return (await read_window_and_after(store, snapshot))[0]


async def read_window_and_after(
    store: Store, snapshot: Snapshot
) -> tuple[list[tuple[int, HistoryEntry]], list[LogRecord]]:
    """The entries ``snapshot``'s window names, and the log records after the snapshot.

    One read of the log, from the window's start (without a window, from the
    snapshot's position): all that recovery reads of it.

    Raises:
        CorruptedDataError: as :func:`read_window`.
        LogPrunedError: the snapshot has no window and the log was pruned past it.
        StorageError: the store cannot be read.
    """
    window = snapshot.window
    if window is None:
        return [], await store.read_log(snapshot.run_id, snapshot.position)
    location = f"snapshot {snapshot.snapshot_id!r} of run {snapshot.run_id!r}"
    if not 0 <= window.start < snapshot.position or window.entries < 0:
        raise CorruptedDataError(
            location,
            f"its window ({window.start}, {window.entries} entries) is not in the log "
            f"before its position {snapshot.position}",
        )
    try:
        records = await store.read_log(snapshot.run_id, window.start)
    except LogPrunedError:
        raise CorruptedDataError(
            location, f"the log records it names from position {window.start} were pruned"
        ) from None
    wanted = snapshot.position - window.start
    if len(records) < wanted:
        raise CorruptedDataError(location, "the log ends before the records it names")
    entries = logged_entries(records[:wanted], window.start)
    if len(entries) != window.entries:
        raise CorruptedDataError(location, "the log does not hold the entries it names")
    return entries, records[wanted:]


def settled_entries(snapshot: Snapshot) -> list[HistoryEntry]:
    """The settled entries a snapshot holds inline, in the order they are applied."""
    entries: list[HistoryEntry] = [p for k, p in snapshot.phases.items() if settled_key(k)]
    entries.extend(s for s in snapshot.steps if settled_key(s.step_id))
    entries.extend(e for e in snapshot.events if settled_key(e.step_id or e.kind))
    entries.extend(snapshot.decisions)
    entries.extend(snapshot.inbox_taken)
    return entries


def with_history(
    snapshot: Snapshot, entries: Iterable[HistoryEntry], history: ChunkRef | None
) -> Snapshot:
    """``snapshot`` with settled ``entries`` put before its own, naming ``history``.

    Settled entries come first in each field, as they happened before the
    open ones; a later entry for an id replaces an earlier one.
    """
    phases: dict[str, PhaseEndRecord] = {}
    steps: dict[str, StepRecord] = {}
    events: dict[str, EventRecord] = {}
    decisions: list[DecisionRecord] = []
    taken: list[int] = []
    for entry in entries:
        _sort(entry, phases, steps, events, decisions, taken)
    if not (phases or steps or events or decisions or taken):
        return msgspec.structs.replace(snapshot, history=history)
    phases.update(snapshot.phases)
    for step in snapshot.steps:
        steps[step.step_id] = step
    for event in snapshot.events:
        events[event.step_id or event.kind] = event
    return msgspec.structs.replace(
        snapshot,
        phases=phases,
        steps=tuple(steps.values()),
        events=tuple(events.values()),
        decisions=(*decisions, *snapshot.decisions),
        inbox_taken=tuple(sorted({*taken, *snapshot.inbox_taken})),
        history=history,
    )


def _sort(
    entry: HistoryEntry,
    phases: dict[str, PhaseEndRecord],
    steps: dict[str, StepRecord],
    events: dict[str, EventRecord],
    decisions: list[DecisionRecord],
    taken: list[int],
) -> None:
    match entry:
        case PhaseEndRecord():
            phases[entry.phase_id] = entry
        case StepRecord():
            steps[entry.step_id] = entry
        case EventRecord():
            events[entry.step_id or entry.kind] = entry
        case DecisionRecord():
            decisions.append(entry)
        case _:
            taken.append(entry)


class History(msgspec.Struct, frozen=True):
    """What a snapshot's chunks hold: their entries in order, and the chunks' addresses."""

    entries: tuple[HistoryEntry, ...]
    addresses: tuple[str, ...]


async def _read_chunk(store: Store, run_id: str, ref: ChunkRef) -> HistoryChunk:
    location = f"history chunk {ref.address} of run {run_id!r}"
    try:
        data = await store.get_blob(run_id, ref.address)
    except CorruptedDataError:
        raise
    except StorageError:
        if await store.has_blob(run_id, ref.address):
            raise  # there, but the store cannot be read now: not damage
        # lost to a power loss (written unsynced, like the snapshot naming it)
        raise CorruptedDataError(location, "it is missing") from None
    try:
        chunk = _DECODER.decode(data)
    except msgspec.DecodeError as exc:
        raise CorruptedDataError(location, str(exc)) from None
    if chunk.run_id != run_id or len(chunk.entries) != ref.entries:
        raise CorruptedDataError(location, "it does not hold what the snapshot names")
    return chunk


async def read_history(store: Store, run_id: str, ref: ChunkRef) -> History:
    """The history ending with chunk ``ref``: the newest chunk, then the older ones at once.

    Raises:
        CorruptedDataError: a chunk is missing, fails its checksum, cannot be
            decoded or is not the one named.
        StorageError: the store cannot be read.
    """
    newest = await _read_chunk(store, run_id, ref)
    older: list[HistoryChunk | None] = [None] * len(newest.older)
    failure: list[BaseException] = []

    async def read(i: int, older_ref: ChunkRef) -> None:
        try:
            older[i] = await _read_chunk(store, run_id, older_ref)
        except (CorruptedDataError, StorageError) as exc:
            failure.append(exc)

    async with anyio.create_task_group() as tg:
        for i, older_ref in enumerate(newest.older):
            tg.start_soon(read, i, older_ref)
    if failure:
        raise failure[0]
    entries: list[HistoryEntry] = []
    for chunk in older:
        assert chunk is not None  # every read either filled its slot or failed
        entries.extend(chunk.entries)
    entries.extend(newest.entries)
    addresses = (*(r.address for r in newest.older), ref.address)
    return History(entries=tuple(entries), addresses=addresses)


async def resolve_snapshot(
    store: Store,
    snapshot: Snapshot,
    *,
    window: Sequence[tuple[int, HistoryEntry]] | None = None,
) -> Snapshot:
    """The whole snapshot: its history's and window's entries put back inline, both cleared.

    A snapshot with neither is returned as it is. ``window``: its window's
    entries already read (:func:`read_window`), else they are read here.

    Raises:
        CorruptedDataError: a chunk is missing, fails its checksum or cannot be
            decoded, or the log no longer holds the window's records.
        StorageError: the store cannot be read.
    """
    if snapshot.history is None and snapshot.window is None:
        return snapshot
    entries: list[HistoryEntry] = []
    if snapshot.history is not None:
        entries.extend((await read_history(store, snapshot.run_id, snapshot.history)).entries)
    if snapshot.window is not None:
        if window is None:
            window = await read_window(store, snapshot)
        entries.extend(entry for _, entry in window)
    whole = with_history(snapshot, entries, None)
    return msgspec.structs.replace(whole, window=None) if whole.window is not None else whole


async def read_full_snapshot(store: Store, run_id: str, snapshot_id: str) -> Snapshot:
    """``store.read_snapshot`` with the snapshot's history put back inline.

    Raises:
        CheckpointNotFoundError: no such snapshot.
        CorruptedDataError: the snapshot or one of its chunks is damaged or missing.
        StorageError: the store cannot be read.
    """
    return await resolve_snapshot(store, await store.read_snapshot(run_id, snapshot_id))


async def history_addresses(store: Store, snapshot: Snapshot) -> tuple[str, ...]:
    """The addresses of the chunks a snapshot names, directly or through its newest chunk.

    Raises:
        CorruptedDataError: the newest chunk is damaged or missing.
        StorageError: the store cannot be read.
    """
    if snapshot.history is None:
        return ()
    ref = snapshot.history
    newest = await _read_chunk(store, snapshot.run_id, ref)
    return (*(r.address for r in newest.older), ref.address)


async def sync_snapshots(store: Store, run_id: str, snapshot_ids: Sequence[str]) -> None:
    """Make snapshots durable, with the history chunks they name.

    A store without ``sync_snapshots`` (:class:`SupportsSnapshotSync`)
    writes snapshots and blobs durably already, so there is nothing to do.

    Raises:
        CheckpointNotFoundError: one of them does not exist (stores that sync).
        CorruptedDataError: one of them, or a chunk it names, is damaged.

    .. versionadded:: 0.2
    .. versionchanged:: 0.5
       A snapshot's history chunks are made durable first.
    """
    if not snapshot_ids or not isinstance(store, SupportsSnapshotSync):
        return
    chunks: dict[str, None] = {}
    for snapshot_id in snapshot_ids:
        snapshot = await store.read_snapshot(run_id, snapshot_id)
        chunks.update(dict.fromkeys(await history_addresses(store, snapshot)))
    await sync_blobs(store, run_id, list(chunks))
    await store.sync_snapshots(run_id, snapshot_ids)


class HistoryWriter:
    """One run's history as the checkpoint actor extends it: which chunks exist, and merging.

    ``base`` is the newest chunk the run's last snapshot named when this
    attempt began (None for a new run, or a snapshot from before chunks).
    """

    def __init__(self, store: Store, run_id: str, base: ChunkRef | None) -> None:
        self.store = store
        self.run_id = run_id
        self.newest = base
        self.bytes_written = 0
        # the chunks standing, oldest first; read from ``base`` at the first flush
        self._chunks: list[ChunkRef] | None = None if base is not None else []
        # entries of chunks read or written here, for merging without reading them back
        self._entries: dict[str, tuple[HistoryEntry, ...]] = {}

    @staticmethod
    def due(entries: Sequence[HistoryEntry], span: int | None = None) -> bool:
        """Whether ``entries``, carried inline or left in the log so far, should go to a chunk.

        ``span``: how many log records they lie in, when a window may name them
        (the higher ``WINDOW_*`` bounds apply); None when the snapshot must
        carry them (``FLUSH_*``).
        """
        if span is not None and span >= WINDOW_RECORDS:
            return True
        most, most_bytes = (
            (FLUSH_ENTRIES, FLUSH_BYTES) if span is None else (WINDOW_ENTRIES, WINDOW_BYTES)
        )
        if len(entries) >= most:
            return True
        size = 0
        for entry in entries:
            size += _entry_size(entry)
            if size >= most_bytes:
                return True
        return False

    async def flush(self, entries: Sequence[HistoryEntry]) -> ChunkRef:
        """Write ``entries`` (the next in the run's history) as a chunk; return the newest chunk.

        When ``FANOUT - 1`` chunks of a level stand last, they and the new
        entries are written as one chunk of the next level, and so on up.

        Raises:
            CorruptedDataError, StorageError: an older chunk to merge cannot be read.
        """
        # on a copy: a failed write leaves the history as it was, to try again
        chunks = list(await self._standing())
        merged = tuple(entries)
        level = 1
        absorbed: list[ChunkRef] = []
        while len(chunks) >= FANOUT - 1 and all(c.level == level for c in chunks[1 - FANOUT :]):
            siblings = chunks[1 - FANOUT :]
            del chunks[1 - FANOUT :]
            parts = [await self._entries_of(c) for c in siblings]
            merged = (*(e for part in parts for e in part), *merged)
            absorbed.extend(siblings)
            level += 1
        chunk = HistoryChunk(run_id=self.run_id, level=level, entries=merged, older=tuple(chunks))
        data = _ENCODER.encode(chunk)
        address = await put_unsynced_blob(self.store, self.run_id, data)
        self.bytes_written += len(data)
        ref = ChunkRef(address, level, len(merged))
        chunks.append(ref)
        self._chunks = chunks
        for gone in absorbed:
            self._entries.pop(gone.address, None)
        self._entries[address] = merged
        self.newest = ref
        return ref

    async def _standing(self) -> list[ChunkRef]:
        if self._chunks is None:
            assert self.newest is not None  # set from ``base``
            newest = await _read_chunk(self.store, self.run_id, self.newest)
            self._chunks = [*newest.older, self.newest]
            self._entries[self.newest.address] = newest.entries
        return self._chunks

    async def _entries_of(self, ref: ChunkRef) -> tuple[HistoryEntry, ...]:
        entries = self._entries.get(ref.address)
        if entries is None:
            entries = (await _read_chunk(self.store, self.run_id, ref)).entries
        return entries
