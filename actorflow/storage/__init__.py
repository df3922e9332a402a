"""Where runs live: records, codec, the ``Store`` protocol and its backends.

Shared modules sit here (records, codec, envelope, protocol and optional
capabilities, log writer, retention, state versions, the memory store,
``open_store``); each persistent
backend is a package assembled by composition: ``file``, ``s3``, ``sqlite`` and
``postgres`` (exported lazily: psycopg is imported only when ``PostgresStore`` is used).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from actorflow.storage._capabilities import (
    ClaimInfo,
    ClaimInspector,
    FencedQueueSlots,
    QueueSlot,
    QueueSlots,
    RunIndex,
    RunVersions,
    ScheduleStore,
    SealCheck,
    SealChecker,
    SharedLimits,
    TimedQueueSlots,
    UnreadableLister,
    WorkWatch,
)
from actorflow.storage._codec import (
    ENCODE_ERRORS,
    decode_value,
    decoder_for,
    encode_value,
    encoder,
)
from actorflow.storage._event_stream import (
    EventSlice,
    EventStreamWriter,
    StreamedEvent,
    SupportsEventStream,
    encode_event,
)
from actorflow.storage._history import (
    HistoryWriter,
    logged_entries,
    read_full_snapshot,
    read_window,
    read_window_and_after,
    resolve_snapshot,
    settled_entries,
    settled_key,
    sync_snapshots,
    with_history,
)
from actorflow.storage._inbox import InboxEntry, SupportsInbox, post_message, read_messages
from actorflow.storage._inbox_check import InboxCheck, InboxChecker
from actorflow.storage._inbox_watch import InboxWatch, SupportsInboxWatch, watch_messages
from actorflow.storage._logwriter import LogWriter
from actorflow.storage._memory import MemoryStore
from actorflow.storage._open import open_store, printable_location
from actorflow.storage._protocol import (
    Lease,
    PruneReport,
    RetentionPolicy,
    Store,
    StoreContext,
    SupportsBlobSync,
    SupportsSnapshotSync,
    UnreadableEntry,
    put_unsynced_blob,
    sync_blobs,
    update_run_unsynced,
)
from actorflow.storage._records import (
    FORMAT_VERSION,
    AgentSnapshot,
    ChunkRef,
    DecisionRecord,
    ErrorInfo,
    EventRecord,
    ForkEdit,
    HistoryChunk,
    HistoryEntry,
    LogRecord,
    LogWindow,
    MessageRef,
    MilestoneRecord,
    PhaseEndRecord,
    RunManifest,
    RunStatus,
    Snapshot,
    SnapshotInfo,
    SnapshotStatus,
    StateRef,
    StepRecord,
    validate_run_id,
)
from actorflow.storage._retention import (
    keeps_every,
    prune,
    prune_run,
    run_verifier,
    verify_store,
)
from actorflow.storage._schedules import (
    CatchUp,
    Schedule,
    ScheduleProgress,
    validate_schedule_id,
)
from actorflow.storage._sealing import Codec
from actorflow.storage._state import decode_state, encode_state, state_version
from actorflow.storage._windows import LIMIT_WINDOW, take_window
from actorflow.storage.file import FileStore, FileSystem, OSFileSystem
from actorflow.storage.s3 import S3Store  # aioboto3 is imported only when one is made
from actorflow.storage.sqlite import SqliteStore

if TYPE_CHECKING:
    from actorflow.storage.postgres import PostgresStore

__all__ = [
    "ENCODE_ERRORS",
    "FORMAT_VERSION",
    "LIMIT_WINDOW",
    "AgentSnapshot",
    "CatchUp",
    "ChunkRef",
    "ClaimInfo",
    "ClaimInspector",
    "Codec",
    "DecisionRecord",
    "ErrorInfo",
    "EventRecord",
    "EventSlice",
    "EventStreamWriter",
    "FencedQueueSlots",
    "FileStore",
    "FileSystem",
    "ForkEdit",
    "HistoryChunk",
    "HistoryEntry",
    "HistoryWriter",
    "InboxCheck",
    "InboxChecker",
    "InboxEntry",
    "InboxWatch",
    "Lease",
    "LogRecord",
    "LogWindow",
    "LogWriter",
    "MemoryStore",
    "MessageRef",
    "MilestoneRecord",
    "OSFileSystem",
    "PhaseEndRecord",
    "PostgresStore",
    "PruneReport",
    "QueueSlot",
    "QueueSlots",
    "RetentionPolicy",
    "RunIndex",
    "RunManifest",
    "RunStatus",
    "RunVersions",
    "S3Store",
    "Schedule",
    "ScheduleProgress",
    "ScheduleStore",
    "SealCheck",
    "SealChecker",
    "SharedLimits",
    "Snapshot",
    "SnapshotInfo",
    "SnapshotStatus",
    "SqliteStore",
    "StateRef",
    "StepRecord",
    "Store",
    "StoreContext",
    "StreamedEvent",
    "SupportsBlobSync",
    "SupportsEventStream",
    "SupportsInbox",
    "SupportsInboxWatch",
    "SupportsSnapshotSync",
    "TimedQueueSlots",
    "UnreadableEntry",
    "UnreadableLister",
    "WorkWatch",
    "decode_state",
    "decode_value",
    "decoder_for",
    "encode_event",
    "encode_state",
    "encode_value",
    "encoder",
    "keeps_every",
    "logged_entries",
    "open_store",
    "post_message",
    "printable_location",
    "prune",
    "prune_run",
    "put_unsynced_blob",
    "read_full_snapshot",
    "read_messages",
    "read_window",
    "read_window_and_after",
    "resolve_snapshot",
    "run_verifier",
    "settled_entries",
    "settled_key",
    "state_version",
    "sync_blobs",
    "sync_snapshots",
    "take_window",
    "update_run_unsynced",
    "validate_run_id",
    "validate_schedule_id",
    "verify_store",
    "watch_messages",
    "with_history",
]


def __getattr__(name: str) -> object:
    # psycopg is imported only when PostgresStore is asked for (`import actorflow` never does)
    if name == "PostgresStore":
        from actorflow.storage.postgres import PostgresStore

        return PostgresStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
