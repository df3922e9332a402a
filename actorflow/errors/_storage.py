"""Errors of the stores: unreachable, corrupt, unencodable, owned by another."""

from __future__ import annotations

from actorflow.errors._base import ActorflowError

__all__ = [
    "CheckpointCorruptedError",
    "CheckpointNotFoundError",
    "CheckpointTooLargeError",
    "CorruptedDataError",
    "EncodingError",
    "EncryptionKeyError",
    "EncryptionKeyMissingError",
    "HistoryFileCorruptedError",
    "HistoryFileError",
    "HistoryFileNewerError",
    "HistoryFileTruncatedError",
    "InboxCorruptedError",
    "InboxUnsupportedError",
    "IncompatibleStateError",
    "LeaseLostError",
    "LogCorruptedError",
    "LogPrunedError",
    "RunEndNotStoredError",
    "RunFolderNotEmptyError",
    "RunLockedError",
    "StorageError",
    "StoreReadOnlyError",
    "StoreSchemaError",
    "StoreUnavailableError",
    "UnreadableFileError",
]


class StorageError(ActorflowError):
    """A store operation failed; ``operation`` names it and ``__cause__`` holds the cause."""

    def __init__(self, operation: str, detail: str) -> None:
        self.operation = operation
        self.detail = detail
        super().__init__(f"{operation} failed: {detail}")


class StoreUnavailableError(StorageError):
    """The store cannot be reached (missing folder or bucket, network, credentials)."""


class StoreReadOnlyError(StorageError):
    """This process may read the store but not write it, and what it was asked to do writes.

    Reading needs no write access (``actorflow runs``, ``show``, ``query``);
    running, recovering, signalling or cancelling runs does.

    .. versionadded:: 0.4
    """

    def __init__(self, location: str, operation: str) -> None:
        self.location = location
        super().__init__(
            operation,
            f"the store at {location} is read-only to this process, and this writes to it; "
            "give the process write access to it (commands that only read, such as "
            "`actorflow runs`, work as they are)",
        )


class CorruptedDataError(StorageError):
    """Stored bytes failed their checksum or could not be decoded; never loaded."""

    advice = "Run `actorflow validate` to list corrupt data."
    """What the user can do about it, after the location and cause (each subclass says)."""

    def __init__(self, location: str, cause: str) -> None:
        self.location = location
        self.cause_text = cause
        super().__init__(
            "read", f"{location} is corrupt ({cause}); it was not loaded. {self.advice}"
        )


class NewerFormatError(CorruptedDataError):
    """Stored bytes passed their checksum but hold a record, field value or status this
    actorflow does not know: a newer actorflow wrote them.

    Nothing is damaged and nothing is changed: a worker that meets one leaves
    the run for a newer worker and spends none of its recovery attempts.

    .. versionadded:: 0.4
    """

    advice = (
        "A newer actorflow wrote it: upgrade this process (or let a newer worker take the "
        "run); the data is sound and was left as it is."
    )


class HistoryFileError(CorruptedDataError):
    """An exported run history (``actorflow export``'s ``.afh`` file) cannot be read.

    .. versionadded:: 0.5
    """

    advice = "Export the run again with `actorflow export RUN -o FILE`."


class HistoryFileTruncatedError(HistoryFileError):
    """A history file ends before its last byte: an interrupted copy or download.

    .. versionadded:: 0.5
    """

    advice = (
        "The file ends early (an interrupted copy or download?): copy it again, or export "
        "the run again with `actorflow export RUN -o FILE`."
    )


class HistoryFileCorruptedError(HistoryFileError):
    """A history file fails its checksum, or is no history file at all.

    .. versionadded:: 0.5
    """

    advice = (
        "Its bytes changed since it was exported (or it is another kind of file): export "
        "the run again with `actorflow export RUN -o FILE`."
    )


class HistoryFileNewerError(HistoryFileError):
    """A history file was written by a newer actorflow, in a format version this one cannot read.

    .. versionadded:: 0.5
    """

    def __init__(self, location: str, version: int, supported: int, written_by: str) -> None:
        self.version = version
        self.supported = supported
        self.written_by = written_by
        self.location = location
        self.cause_text = f"history format version {version}"
        StorageError.__init__(
            self,
            "read",
            f"{location} was written by actorflow {written_by} in history format version "
            f"{version}; this actorflow reads versions up to {supported}: upgrade actorflow "
            "where you replay it (the file is sound)",
        )


class CheckpointCorruptedError(CorruptedDataError):
    """A snapshot failed its checksum or could not be decoded."""

    advice = (
        "Recovery uses the newest checkpoint that verifies instead (or the log from its "
        "start); `actorflow validate` lists corrupt data."
    )


class LogCorruptedError(CorruptedDataError):
    """A log record is corrupt; a reader that needs it cannot go past it.

    Recovery reads the log only from a run's newest checkpoint on, so a damaged
    record before it does not stop the run.
    """

    advice = (
        "A run recovers past damage before its newest checkpoint, not after it: restore "
        "the file from a backup, or `actorflow fork` the run from its newest checkpoint "
        "(what was recorded after it runs again). `actorflow validate` lists corrupt data."
    )


class InboxCorruptedError(CorruptedDataError):
    """An entry of a run's inbox failed its checksum or could not be decoded.

    Readers skip it (its ``seq`` stays taken, so the entries after it keep
    their places and are read); ``actorflow validate`` names it.

    .. versionadded:: 0.2

    .. versionchanged:: 0.4
       ``read_inbox`` skips such an entry instead of raising this.
    """

    advice = (
        "It is skipped and the messages after it are read: restore the file from a "
        "backup, or post its message again (`actorflow validate` lists corrupt data)."
    )


class UnreadableFileError(CorruptedDataError):
    """A file where actorflow reads its data is no file it would write.

    A FIFO, a device, a socket or a folder (a link to one, too), or a file
    larger than any actorflow writes. It is never read: nothing blocks on a
    FIFO or reads ``/dev/zero`` without end. Like any damaged data it is
    named, and skipped where damage is (an older checkpoint is used instead,
    an inbox entry is skipped).

    .. versionadded:: 0.4
    """

    advice = (
        "actorflow reads only regular files of the sizes it writes: move it out of the "
        "store (`actorflow validate` lists what it cannot read)."
    )


class RunFolderNotEmptyError(CorruptedDataError):
    """A run's folder (or S3 prefix) holds data but no manifest; no new run starts on it.

    .. versionadded:: 0.2
    """

    def __init__(self, run_id: str, location: str) -> None:
        self.run_id = run_id
        self.location = location
        self.cause_text = "data but no manifest"
        # not CorruptedDataError's message: nothing was loaded, and nothing falls back
        StorageError.__init__(
            self,
            "create run",
            f"{location} holds data of an earlier run {run_id!r} but no manifest (it was "
            "deleted or lost), so a new run with this id cannot start there; restore the "
            "manifest from a backup, or move the folder out of the store "
            "(`actorflow validate` lists such folders)",
        )


class LogPrunedError(StorageError):
    """Records asked for are below what retention kept of a run's log.

    Retention cuts a log only below the oldest checkpoint it keeps, so a run
    recovers from that checkpoint and never needs them. Read from ``first``
    (or from a checkpoint's position) instead.

    .. versionadded:: 0.4
    """

    def __init__(self, run_id: str, first: int, start: int) -> None:
        self.run_id = run_id
        self.first = first
        self.start = start
        super().__init__(
            "read log",
            f"records of run {run_id!r} below position {first} were pruned; read from "
            f"a checkpoint's position ({start} asked)",
        )


class CheckpointNotFoundError(StorageError, LookupError):
    """No snapshot with this id exists for the run."""

    def __init__(self, run_id: str, checkpoint: str) -> None:
        self.run_id = run_id
        self.checkpoint = checkpoint
        super().__init__(
            "read checkpoint",
            f"run {run_id!r} has no checkpoint {checkpoint!r}; "
            f"`actorflow checkpoints {run_id}` lists them",
        )


class EncodingError(StorageError, TypeError):
    """A value (state, message, result) cannot be encoded with msgspec."""

    def __init__(self, what: str, cause: str) -> None:
        self.what = what
        super().__init__(
            "encode",
            f"{what} cannot be encoded: {cause}. State, messages and results must be "
            "msgspec-encodable (msgspec.Struct, dataclasses, builtins)",
        )


class CheckpointTooLargeError(StorageError):
    """An encoded snapshot exceeds the configured size limit."""

    def __init__(self, run_id: str, size: int, limit: int) -> None:
        self.run_id = run_id
        self.size = size
        self.limit = limit
        super().__init__(
            "write checkpoint",
            f"checkpoint of run {run_id!r} is {size} bytes, over the limit of {limit}; "
            "keep large data out of agent state or raise `max_snapshot_bytes`",
        )


class InboxUnsupportedError(StorageError):
    """The store has no per-run inbox (it is no :class:`~actorflow.storage.SupportsInbox`).

    .. versionadded:: 0.2
    """

    def __init__(self, operation: str, store: str) -> None:
        self.store = store
        super().__init__(
            operation,
            f"{store} keeps no inbox of messages for its runs; use a store that does "
            "(MemoryStore, FileStore, S3Store, SqliteStore, PostgresStore), or implement "
            "SupportsInbox",
        )


class IncompatibleStateError(StorageError):
    """A stored state does not decode as the current state class."""

    def __init__(self, type_name: str, version: int, current: int, cause: str) -> None:
        self.type_name = type_name
        self.version = version
        self.current = current
        super().__init__(
            "decode state",
            f"state of {type_name} stored at version {version} does not decode as the "
            f"current class (version {current}): {cause}. Give new fields defaults, or set "
            "`state_version` on the class and add an `upgrade_state(data, from_version)` "
            "classmethod",
        )


class EncryptionKeyError(StorageError):
    """Data is encrypted with a key this store does not have, or the key is wrong."""

    def __init__(self, key_id: str, detail: str) -> None:
        self.key_id = key_id
        super().__init__("decrypt", f"key {key_id!r}: {detail}")


class EncryptionKeyMissingError(EncryptionKeyError):
    """Data is encrypted with a key the store was not given (it may have been given none).

    .. versionadded:: 0.2
    """

    def __init__(self, key_id: str) -> None:
        self.key_id = key_id
        StorageError.__init__(
            self,
            "decrypt",
            f"this store is encrypted (key {key_id!r}) and was not given that key: give it "
            "with --key-file FILE (the commands that read a store), in ACTORFLOW_KEYS or "
            "ACTORFLOW_KEY_FILE (any command, any program), or as Codec(keys={...}) in code",
        )


class RunLockedError(StorageError):
    """Another live owner holds this run."""

    def __init__(self, run_id: str, owner: str | None = None) -> None:
        self.run_id = run_id
        self.owner = owner
        who = f" by {owner}" if owner else ""
        super().__init__(
            "claim run",
            f"run {run_id!r} is owned{who} by a live process; wait for it to finish or stop it",
        )


class RunEndNotStoredError(StorageError):
    """A run finished (its end is durable in its log) but its manifest could not say so.

    ``status`` is the run's true status: the end record decides it. The
    manifest, a cache of that record, still says the run is unfinished until
    a ``recover`` repairs it from the log (and returns a completed run's
    result).
    """

    def __init__(self, run_id: str, status: str, cause: str) -> None:
        self.run_id = run_id
        self.status = status
        super().__init__(
            "update run",
            f"run {run_id!r} {status} (its end is durable in its log) but its manifest "
            f"could not be updated ({cause}); `runtime.recover({run_id!r})` or "
            f"`actorflow recover {run_id}` repairs it from the log",
        )


class LeaseLostError(StorageError):
    """This owner's lease on the run was taken by another owner; its writes are refused."""

    def __init__(self, run_id: str, epoch: int) -> None:
        self.run_id = run_id
        self.epoch = epoch
        super().__init__(
            "write",
            f"lease on run {run_id!r} (epoch {epoch}) was taken over by another owner; "
            "this process must stop working on the run",
        )


class StoreSchemaError(StorageError):
    """A database store's schema is not one this actorflow can use as it is.

    Either a newer actorflow wrote it (``found`` > ``known``: upgrade this
    process; nothing was changed), or the database is not an actorflow store.

    .. versionadded:: 0.6
    """

    def __init__(self, location: str, found: str, known: str, advice: str) -> None:
        self.location = location
        self.found = found
        self.known = known
        super().__init__(
            "open",
            f"the store at {location} has schema {found}, this actorflow knows {known}; {advice}",
        )
