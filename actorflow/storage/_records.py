"""Every stored record: frozen, keyword-only, tagged msgspec Structs.

Records evolve only by adding fields with defaults; the codec's header carries
the format version. User values (inputs, results, agent states) are stored as
already-encoded MessagePack bytes, so this layer never needs the user's types
and loading stored data never imports or runs anything.
"""

from __future__ import annotations

import enum
import re
from typing import Final

import msgspec

from actorflow._text import error_message
from actorflow.errors import InvalidRunIdError

__all__ = [
    "FORMAT_VERSION",
    "AgentSnapshot",
    "ChunkRef",
    "DecisionRecord",
    "ErrorInfo",
    "EventRecord",
    "ForkEdit",
    "HistoryChunk",
    "HistoryEntry",
    "LogRecord",
    "LogWindow",
    "MessageRef",
    "MilestoneRecord",
    "PhaseEndRecord",
    "RunManifest",
    "RunStatus",
    "Snapshot",
    "SnapshotInfo",
    "SnapshotStatus",
    "StateRef",
    "StepRecord",
    "validate_run_id",
]

FORMAT_VERSION: Final = 2
"""The snapshot format this actorflow writes, and the newest it reads.

2 (0.6): a snapshot may name its settled entries by a :class:`LogWindow`,
which a reader of format 1 would not know. A snapshot of a newer format is
refused by name (``NewerFormatError``), never read as far as it goes.
"""

_RUN_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]{0,127}")


def validate_run_id(run_id: object) -> str:
    """Return ``run_id`` if it is safe as a folder name and an S3 key, else raise.

    Raises:
        InvalidRunIdError: not a string, empty, over 128 characters, a path
            separator, ``..``, or a character outside ``[A-Za-z0-9_.-]``.
    """
    if not isinstance(run_id, str):
        raise InvalidRunIdError(run_id, f"expected a string, got {type(run_id).__name__}")
    if not _RUN_ID.fullmatch(run_id) or ".." in run_id:
        reason = "too long" if len(run_id) > 128 else "contains a character that is not allowed"
        if not run_id:
            reason = "empty"
        elif ".." in run_id or "/" in run_id or "\\" in run_id:
            reason = "contains a path separator or '..'"
        raise InvalidRunIdError(run_id, reason)
    return run_id


class RunStatus(enum.StrEnum):
    """Where a run stands.

    ``blocked``: re-running its code diverged from its log
    (``NonDeterminismError``); it waits for code that replays the log, and
    ``recover()`` takes it up again under another ``code_version``, or when
    named. (``blocked`` is new in 0.2.)

    ``queued``: submitted (``Runtime.submit``) for a worker to start; no
    code of it has run. (``queued`` is new in 0.4.)
    """

    QUEUED = "queued"
    RUNNING = "running"
    PAUSED = "paused"
    INTERRUPTED = "interrupted"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    BLOCKED = "blocked"

    @property
    def finished(self) -> bool:
        """True for completed, failed and cancelled: nothing left to resume (blocked is not)."""
        return self in (RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED)


class SnapshotStatus(enum.StrEnum):
    """A snapshot's lifecycle, as kept in the run's manifest."""

    CREATED = "created"
    EXPIRED = "expired"
    DELETED = "deleted"


class ErrorInfo(msgspec.Struct, frozen=True, kw_only=True):
    """An error as stored: its type name and message, never the object."""

    type: str
    message: str

    @classmethod
    def of(cls, error: BaseException) -> ErrorInfo:
        """Describe ``error`` for storage, safely: never raises.

        The message is capped at ``MAX_ERROR_MESSAGE`` (4096) characters, with a
        marker saying how many were cut; an error whose ``__str__`` raises is
        stored as ``<unprintable TypeName>``.
        """
        return cls(type=type(error).__name__, message=error_message(error))


class SnapshotInfo(msgspec.Struct, frozen=True, kw_only=True):
    """What the manifest and ``list_snapshots`` say about one snapshot.

    ``durable`` is false for a snapshot written without a sync (the file
    store's, until ``sync_snapshots``): a power loss may take it or leave it
    torn, and recovery then skips it. Nothing but speed depends on such a
    snapshot; retention relies only on durable ones.

    .. versionchanged:: 0.2
       ``durable``.
    """

    snapshot_id: str
    position: int
    phase: str | None
    trigger: str
    created: float
    stored_size: int = 0
    raw_size: int = 0
    status: SnapshotStatus = SnapshotStatus.CREATED
    durable: bool = True


class ForkEdit(msgspec.Struct, frozen=True, kw_only=True):
    """An agent whose state a fork replaced at its checkpoint (``runtime.fork(edit=...)``).

    ``type`` is the agent's class (its registered name) and ``state_hash`` the
    SHA-256 (hex) of the new state's MessagePack bytes, as stored.

    .. versionadded:: 0.5
    """

    agent: str
    type: str
    state_hash: str


class RunManifest(msgspec.Struct, frozen=True, kw_only=True, tag_field="tag", tag="manifest"):
    """One run: what it runs, on what input, and where it stands.

    ``input`` and ``result`` are MessagePack bytes of the user's values.
    ``recovery_errors`` are the causes of the newest failed recovery attempts;
    ``blocked_code_version`` is the ``code_version`` of the runtime that
    found a ``blocked`` run's code diverging from its log (``error`` says how).
    ``epoch`` is the lease epoch of the owner that last replaced it, on a
    store whose leases time out (S3): such a store refuses the update of an
    owner whose epoch is older. Other stores leave it 0.

    ``prompt`` and ``deadline`` describe a paused run's wait: what it asks
    and when (``time.time()``) it stops waiting, if it has a timeout.

    ``parent_run`` and ``parent_step`` name the run, and its step, that
    started this one as a child run (``ctx.start_child``); distinct from
    ``parent``, the run a fork was copied from.

    ``progressed_attempt`` is the newest attempt that made progress (made a
    record of its own durable in the log); ``max_recovery_attempts`` bounds
    the attempts after it, those in a row that made none.
    ``workflow_module`` is the module that defines the workflow class, which
    a process that has not imported it imports to find it (``None`` for a
    class defined in ``__main__``, and in runs recorded before it existed).

    ``fork_edits`` lists the agents whose state a fork was started with
    edited, in the order given (empty for any other run).

    ``queue``, ``priority`` and ``dedup_key`` are what ``Runtime.submit``
    was given: the queue a worker takes the run from (``None``: none),
    its priority there (higher first) and its deduplication key.
    ``schedule`` names the schedule whose tick started the run.

    .. versionchanged:: 0.2
       ``epoch`` added.
    .. versionchanged:: 0.3
       ``deadline``, ``parent_run`` and ``parent_step`` added.
    .. versionchanged:: 0.4
       ``progressed_attempt`` and ``workflow_module`` added.
    ``trace_context`` is the W3C ``traceparent`` of the newest attempt's
    ``actorflow.run`` span, kept when tracing is on: the next attempt's run
    span links to it (``None`` without tracing, and in older runs).

    .. versionchanged:: 0.5
       ``fork_edits`` and ``trace_context`` added.
    .. versionchanged:: 0.6
       ``queue``, ``priority``, ``dedup_key`` and ``schedule`` added.
    """

    run_id: str
    workflow: str
    input: bytes
    input_hash: str
    status: RunStatus = RunStatus.RUNNING
    code_version: str | None = None
    attempt: int = 0
    owner: str | None = None
    created: float = 0.0
    updated: float = 0.0
    phase: str | None = None
    result: bytes | None = None
    error: ErrorInfo | None = None
    prompt: str | None = None
    parent: str | None = None
    parent_snapshot: str | None = None
    snapshots: tuple[SnapshotInfo, ...] = ()
    tombstone: bool = False
    recovery_errors: tuple[ErrorInfo, ...] = ()
    blocked_code_version: str | None = None
    epoch: int = 0
    deadline: float | None = None
    parent_run: str | None = None
    parent_step: str | None = None
    progressed_attempt: int = 0
    workflow_module: str | None = None
    fork_edits: tuple[ForkEdit, ...] = ()
    trace_context: str | None = None
    queue: str | None = None
    priority: int = 0
    dedup_key: str | None = None
    schedule: str | None = None


class StateRef(msgspec.Struct, frozen=True, kw_only=True):
    """An agent's encoded state: a content-addressed blob, or inline when small.

    Small states travel inside the record (``data``) so a step costs no
    extra durable write; larger ones are stored once as a blob (``blob``).
    ``module`` is the module that defines the agent's class, to import it by
    where it is not imported; the spawn record carries it (later states of
    the agent leave it out).

    .. versionchanged:: 0.4
       ``module`` added.
    """

    agent: str
    type: str
    blob: str = ""
    version: int = 1
    data: bytes | None = None
    module: str | None = None


class MessageRef(msgspec.Struct, frozen=True, kw_only=True):
    """The message a step sent (``ctx.ask``, ``ctx.send``), as its MessagePack bytes.

    Small messages travel inside the step's record (``data``); larger ones are
    stored once as a content-addressed blob (``blob``), sealed and retained as
    agents' states are. ``type`` is the message class's stored name (its
    ``__actorflow_name__``, else its qualified name). Replay never reads it:
    it compares the record's ``args_hash``.

    .. versionadded:: 0.6
    """

    type: str
    data: bytes | None = None
    blob: str = ""


class StepRecord(msgspec.Struct, frozen=True, kw_only=True, tag_field="tag", tag="step"):
    """One completed step: ``ctx.ask``, ``ctx.spawn``, ``ctx.now``...

    ``result`` is MessagePack bytes (absent for an error). ``state`` points at
    the agent's new state when the step changed it. ``issued`` is when the
    step was issued (its attempt here began), ``time`` when it was recorded:
    their difference is how long it took (``issued`` is 0 in records written
    before it existed).

    ``attempt_errors`` are the errors of its failed attempts, oldest first
    (a retried ask's; empty in records written before it existed).

    ``run_attempt`` is the run's attempt that recorded the step live (the
    manifest's ``attempt`` then: 0 for the first, one more per recovery); the
    later attempts replayed it. ``None`` in records written before it existed.

    ``message`` is what a message step (``ask``, ``send``) sent, when the
    runtime keeps messages (``RuntimeConfig.record_messages``); ``None`` for
    other kinds, and in records written before it existed.

    .. versionchanged:: 0.4
       ``issued`` added.
    .. versionchanged:: 0.5
       ``attempt_errors`` added.
    .. versionchanged:: 0.6
       ``run_attempt`` and ``message`` added.
    """

    step_id: str
    kind: str
    target: str | None = None
    args_hash: str = ""
    result: bytes | None = None
    error: ErrorInfo | None = None
    metrics: dict[str, float] = {}
    state: StateRef | None = None
    time: float = 0.0
    attempts: int = 1
    issued: float = 0.0
    attempt_errors: tuple[ErrorInfo, ...] = ()
    run_attempt: int | None = None
    message: MessageRef | None = None


class MilestoneRecord(msgspec.Struct, frozen=True, kw_only=True, tag_field="tag", tag="milestone"):
    """A specialist's progress in the middle of a task, keyed by the step's idempotency key."""

    key: str
    agent: str
    data: bytes
    time: float = 0.0


class PhaseEndRecord(msgspec.Struct, frozen=True, kw_only=True, tag_field="tag", tag="phase_end"):
    """A finished phase and its result (MessagePack bytes)."""

    phase_id: str
    name: str
    result: bytes
    time: float = 0.0


class DecisionRecord(msgspec.Struct, frozen=True, kw_only=True, tag_field="tag", tag="decision"):
    """Why something was done: who decided, what, on what grounds."""

    step_id: str
    agent: str
    type: str
    description: str = ""
    rationale: str = ""
    confidence: float | None = None
    alternatives: tuple[str, ...] = ()
    time: float = 0.0


class EventRecord(msgspec.Struct, frozen=True, kw_only=True, tag_field="tag", tag="event"):
    """A run-level event worth keeping in the log (pause, input, recovery, status)."""

    kind: str
    step_id: str | None = None
    data: bytes | None = None
    time: float = 0.0


LogRecord = StepRecord | MilestoneRecord | PhaseEndRecord | DecisionRecord | EventRecord
"""Anything the decision log holds; decoded by one tagged-union decoder."""


class AgentSnapshot(msgspec.Struct, frozen=True, kw_only=True):
    """One agent as of a snapshot's position (``module``: see :class:`StateRef`).

    .. versionchanged:: 0.4
       ``module`` added.
    """

    name: str
    type: str
    status: str = "running"
    state: StateRef | None = None
    confidence: float | None = None
    blockers: tuple[str, ...] = ()
    module: str | None = None


HistoryEntry = StepRecord | PhaseEndRecord | DecisionRecord | EventRecord | int
"""One settled part of a run's past: a record, or the ``seq`` of an inbox entry taken.

Settled means nothing that happens later removes it: decisions, and the
top-level phases, steps and events (ids without ``/`` or ``@``); a later
entry for the same id replaces an earlier one.
"""


class ChunkRef(msgspec.Struct, frozen=True, array_like=True):
    """Where a history chunk is: its blob address, its level and how many entries it holds.

    .. versionadded:: 0.5
    """

    address: str
    level: int
    entries: int


class LogWindow(msgspec.Struct, frozen=True, array_like=True):
    """Settled entries a snapshot leaves in the run's log instead of copying them.

    They are those of the log records from position ``start`` up to the
    snapshot's own position, ``entries`` of them (inbox ``seq`` numbers
    aside, which the snapshot carries itself): the log holds them durably
    already, so the snapshot names the records instead of storing them again.

    .. versionadded:: 0.6
    """

    start: int
    entries: int


class HistoryChunk(msgspec.Struct, frozen=True, kw_only=True, tag_field="tag", tag="history"):
    """Part of a run's settled past, stored as a blob; a snapshot names the newest one.

    ``older`` names the chunks before this one, oldest first: they and this
    chunk's ``entries`` are the run's history in the order it happened. A
    chunk of level ``n + 1`` holds what several chunks of level ``n`` held, so
    a run's history is always a short list of chunks, however long the run.

    .. versionadded:: 0.5
    """

    run_id: str
    level: int
    entries: tuple[HistoryEntry, ...] = ()
    older: tuple[ChunkRef, ...] = ()


class Snapshot(msgspec.Struct, frozen=True, kw_only=True, tag_field="tag", tag="snapshot"):
    """A run at log position ``position``: everything a re-run needs up to it.

    ``phases`` maps finished phase ids to their recorded results; ``steps``
    holds the records of steps that are not inside a finished phase.
    ``inbox_taken`` lists the ``seq`` of every inbox entry the run has
    taken (its signals), so a log pruned below the snapshot never lets a
    signal be taken twice.

    ``history``, when set, names the newest :class:`HistoryChunk` of the
    run's settled past (see :data:`HistoryEntry`); the snapshot's own fields
    then hold only what came after it, so a snapshot costs what changed, not
    the whole run. ``window``, when set, names the log records after the
    newest chunk whose settled entries are the snapshot's too (see
    :class:`LogWindow`). :func:`~actorflow.storage.read_full_snapshot` and
    :func:`~actorflow.storage.resolve_snapshot` give the whole snapshot.

    .. versionchanged:: 0.3
       ``inbox_taken`` added.
    .. versionchanged:: 0.5
       ``history`` added.
    .. versionchanged:: 0.6
       ``window`` added.
    """

    run_id: str
    snapshot_id: str
    position: int
    created: float
    trigger: str
    format_version: int = FORMAT_VERSION
    phase: str | None = None
    status: RunStatus = RunStatus.RUNNING
    agents: dict[str, AgentSnapshot] = {}
    decisions: tuple[DecisionRecord, ...] = ()
    phases: dict[str, PhaseEndRecord] = {}
    steps: tuple[StepRecord, ...] = ()
    milestones: tuple[MilestoneRecord, ...] = ()
    events: tuple[EventRecord, ...] = ()
    metrics: dict[str, float] = {}
    inbox_taken: tuple[int, ...] = ()
    history: ChunkRef | None = None
    window: LogWindow | None = None
