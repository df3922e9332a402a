"""Every exception actorflow raises, rooted at :class:`ActorflowError`.

The tree::

    ActorflowError
    ├── ConfigurationError              a bad option value (also ValueError)
    ├── InvalidNameError                a bad actor name (also ValueError)
    │   └── InvalidRunIdError           a bad run id
    ├── ActorError                      something about one actor
    │   ├── UnhandledMessageError       no handler for the message type (also TypeError)
    │   ├── ActorFailedError            a handler raised; the cause is chained
    │   ├── ActorStoppedError           the actor stopped before it could answer
    │   ├── AskTimeoutError             no reply in time (also TimeoutError)
    │   ├── DuplicateActorNameError     a live actor already has that name
    │   ├── ActorNotFoundError          no actor by that name (also LookupError)
    │   ├── MailboxFullError            send_nowait on a full mailbox (also anyio.WouldBlock)
    │   ├── MailboxClosedError          sending to a closed mailbox (also anyio.ClosedResourceError)
    │   └── EscalationError             an actor used up its restart budget
    ├── ActorDefinitionError            an actor class is declared wrongly (also TypeError)
    ├── RuntimeNotRunningError          the Runtime is not (or no longer) running
    ├── StorageError                    a store operation failed; names the operation
    │   ├── StoreUnavailableError       the store cannot be reached
    │   ├── CorruptedDataError          stored bytes fail their checksum or do not decode
    │   │   ├── CheckpointCorruptedError    a snapshot is corrupt
    │   │   └── LogCorruptedError           a log record in the middle is corrupt
    │   ├── CheckpointNotFoundError     no such snapshot (also LookupError)
    │   ├── EncodingError               a value cannot be encoded (also TypeError)
    │   ├── CheckpointTooLargeError     a snapshot is over the size limit
    │   ├── EncryptionKeyError          a missing or wrong key
    │   ├── IncompatibleStateError      a stored state does not fit its class any more
    │   ├── RunLockedError              another live owner holds the run
    │   └── LeaseLostError              this owner's lease was taken over (fenced)
    ├── RunError                        something about one workflow run
    │   ├── RunNotFoundError            no run with that id (also LookupError)
    │   ├── RunNotFinishedError         the run has no result yet
    │   ├── RunFailedError              the run ended in failure; carries the cause
    │   ├── RunInputMismatchError       a run id reused with different input
    │   ├── StepFailedError             a step of the run failed
    │   ├── NonDeterminismError         re-run code diverged from the recorded log
    │   ├── UnawaitedStepError          a step was issued but never awaited
    │   └── RecoveryFailedError         a run could not be recovered
    ├── RegistryError                   workflow or agent class lookup failed
    └── RunPaused                       control flow: the run waits for input

Exceptions build their message from their fields; call sites pass data.
"""

from __future__ import annotations

import anyio

__all__ = [
    "ActorDefinitionError",
    "ActorError",
    "ActorFailedError",
    "ActorNotFoundError",
    "ActorStoppedError",
    "ActorflowError",
    "AskTimeoutError",
    "CheckpointCorruptedError",
    "CheckpointNotFoundError",
    "CheckpointTooLargeError",
    "ConfigurationError",
    "CorruptedDataError",
    "DuplicateActorNameError",
    "EncodingError",
    "EncryptionKeyError",
    "EscalationError",
    "IncompatibleStateError",
    "InvalidNameError",
    "InvalidRunIdError",
    "LeaseLostError",
    "LogCorruptedError",
    "MailboxClosedError",
    "MailboxFullError",
    "NonDeterminismError",
    "RecoveryFailedError",
    "RegistryError",
    "RunError",
    "RunFailedError",
    "RunInputMismatchError",
    "RunLockedError",
    "RunNotFinishedError",
    "RunNotFoundError",
    "RunPaused",
    "RuntimeNotRunningError",
    "StepFailedError",
    "StorageError",
    "StoreUnavailableError",
    "UnawaitedStepError",
    "UnhandledMessageError",
]


class ActorflowError(Exception):
    """Base class of every error actorflow raises."""


class ConfigurationError(ActorflowError, ValueError):
    """An option has a value actorflow cannot use."""

    def __init__(self, option: str, value: object, expected: str) -> None:
        self.option = option
        self.value = value
        self.expected = expected
        super().__init__(f"invalid value {value!r} for {option}: expected {expected}")


class InvalidNameError(ActorflowError, ValueError):
    """A name that cannot be used, because names become parts of storage keys."""

    kind = "actor name"

    def __init__(self, name: object, reason: str) -> None:
        self.name = name
        self.reason = reason
        super().__init__(
            f"invalid {self.kind} {name!r}: {reason}; use 1-128 characters from "
            "letters, digits, '-', '_' and '.', not starting with '.'"
        )


class InvalidRunIdError(InvalidNameError):
    """A run id that is unsafe as a file name or an S3 key."""

    kind = "run id"


# --- actors ---------------------------------------------------------------


class ActorError(ActorflowError):
    """An error about one actor, named by ``actor``."""

    def __init__(self, actor: str, message: str) -> None:
        self.actor = actor
        super().__init__(message)


class UnhandledMessageError(ActorError, TypeError):
    """The actor has no handler for the message's type."""

    def __init__(self, actor: str, message_type: type, handled: tuple[type, ...] = ()) -> None:
        self.message_type = message_type
        self.handled = handled
        names = ", ".join(sorted(t.__qualname__ for t in handled)) or "none"
        super().__init__(
            actor,
            f"actor {actor!r} has no handler for {message_type.__qualname__}; "
            f"it handles: {names}. Add an @handler method taking this type.",
        )


class ActorFailedError(ActorError):
    """A handler raised while handling a message; ``__cause__`` is the original error."""

    def __init__(self, actor: str, error: BaseException) -> None:
        self.error = error
        super().__init__(actor, f"actor {actor!r} failed: {type(error).__name__}: {error}")


class ActorStoppedError(ActorError):
    """The actor is stopped (or stopped while a request was pending)."""

    def __init__(self, actor: str, detail: str = "") -> None:
        extra = f" ({detail})" if detail else ""
        super().__init__(actor, f"actor {actor!r} is stopped{extra}")


class AskTimeoutError(ActorError, TimeoutError):
    """An ``ask`` got no reply within its timeout."""

    def __init__(self, actor: str, timeout: float, message_type: type) -> None:
        self.timeout = timeout
        self.message_type = message_type
        super().__init__(
            actor,
            f"actor {actor!r} did not answer {message_type.__qualname__} within {timeout:g}s",
        )


class DuplicateActorNameError(ActorError):
    """A live actor already has this name in this scope."""

    def __init__(self, actor: str) -> None:
        super().__init__(
            actor, f"an actor named {actor!r} is already running; stop it or pick another name"
        )


class ActorNotFoundError(ActorError, LookupError):
    """No live actor has this name."""

    def __init__(self, actor: str) -> None:
        super().__init__(actor, f"no running actor named {actor!r}")


class MailboxFullError(ActorError, anyio.WouldBlock):
    """``send_nowait`` found the mailbox full; ``await send`` waits instead."""

    def __init__(self, actor: str, size: int) -> None:
        self.size = size
        super().__init__(
            actor,
            f"mailbox of actor {actor!r} is full ({size} messages); "
            "use `await ref.send(...)` to wait for room",
        )


class MailboxClosedError(ActorError, anyio.ClosedResourceError):
    """The actor's mailbox is closed: the actor stopped or is stopping."""

    def __init__(self, actor: str) -> None:
        super().__init__(actor, f"mailbox of actor {actor!r} is closed: the actor has stopped")


class EscalationError(ActorError):
    """An actor failed more often than its supervisor's restart budget allows."""

    def __init__(self, actor: str, restarts: int, within: float, error: BaseException) -> None:
        self.restarts = restarts
        self.within = within
        self.error = error
        super().__init__(
            actor,
            f"actor {actor!r} failed {restarts + 1} times within {within:g}s, over its restart "
            f"budget; last error: {type(error).__name__}: {error}",
        )


class ActorDefinitionError(ActorflowError, TypeError):
    """An actor class is declared wrongly; found when it is first spawned."""

    def __init__(self, where: str, problem: str) -> None:
        self.where = where
        self.problem = problem
        super().__init__(f"{where}: {problem}")


class RuntimeNotRunningError(ActorflowError, RuntimeError):
    """The Runtime was used outside its ``async with`` block."""

    def __init__(self, action: str) -> None:
        self.action = action
        super().__init__(
            f"cannot {action}: the Runtime is not running; use it inside "
            "`async with Runtime() as runtime:`"
        )


# --- storage ----------------------------------------------------------------


class StorageError(ActorflowError):
    """A store operation failed; ``operation`` names it and ``__cause__`` holds the cause."""

    def __init__(self, operation: str, detail: str) -> None:
        self.operation = operation
        self.detail = detail
        super().__init__(f"{operation} failed: {detail}")


class StoreUnavailableError(StorageError):
    """The store cannot be reached (missing folder or bucket, network, credentials)."""


class CorruptedDataError(StorageError):
    """Stored bytes failed their checksum or could not be decoded; never loaded."""

    def __init__(self, location: str, cause: str) -> None:
        self.location = location
        self.cause_text = cause
        super().__init__(
            "read",
            f"{location} is corrupt ({cause}); it was not loaded. "
            "Run `actorflow validate` to list corrupt data; recovery falls back to older data.",
        )


class CheckpointCorruptedError(CorruptedDataError):
    """A snapshot failed its checksum or could not be decoded."""


class LogCorruptedError(CorruptedDataError):
    """A log record before the tail is corrupt; the log cannot be read past it."""


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


# --- runs -------------------------------------------------------------------


class RunError(ActorflowError):
    """An error about one workflow run, named by ``run_id``."""

    def __init__(self, run_id: str, message: str) -> None:
        self.run_id = run_id
        super().__init__(message)


class RunNotFoundError(RunError, LookupError):
    """No run with this id is in the store."""

    def __init__(self, run_id: str) -> None:
        super().__init__(run_id, f"no run {run_id!r} in the store; `actorflow runs` lists them")


class RunNotFinishedError(RunError):
    """The run exists but has no result yet."""

    def __init__(self, run_id: str, status: str) -> None:
        self.status = status
        super().__init__(run_id, f"run {run_id!r} has not finished (status: {status})")


class RunFailedError(RunError):
    """The run ended in failure; ``error_type`` and ``error_message`` say why."""

    def __init__(self, run_id: str, error_type: str, error_message: str) -> None:
        self.error_type = error_type
        self.error_message = error_message
        super().__init__(run_id, f"run {run_id!r} failed: {error_type}: {error_message}")


class RunInputMismatchError(RunError):
    """A run id was reused with an input different from the stored one."""

    def __init__(self, run_id: str) -> None:
        super().__init__(
            run_id,
            f"run {run_id!r} exists with a different input; a run id names one run — "
            "use a new id for new input",
        )


class StepFailedError(RunError):
    """A step failed; ``error_type`` and ``error_message`` are as recorded in the log.

    Live and replayed failures raise the same error, built from the record.
    """

    def __init__(self, run_id: str, step_id: str, error_type: str, error_message: str) -> None:
        self.step_id = step_id
        self.error_type = error_type
        self.error_message = error_message
        super().__init__(run_id, f"step {step_id} failed: {error_type}: {error_message}")


class NonDeterminismError(RunError):
    """Re-running the orchestrator issued a step that differs from its record."""

    def __init__(self, run_id: str, step_id: str, expected: str, got: str, where: str) -> None:
        self.step_id = step_id
        self.expected = expected
        self.got = got
        self.where = where
        super().__init__(
            run_id,
            f"run {run_id!r} step {step_id} at {where}: the log recorded {expected} but the "
            f"code now issues {got}. Workflow code must be deterministic; guard intended "
            "changes with `if ctx.patched('change-id'):`",
        )


class UnawaitedStepError(RunError):
    """A step was issued but never awaited before its phase ended."""

    def __init__(self, run_id: str, step_ids: list[str]) -> None:
        self.step_ids = step_ids
        super().__init__(
            run_id, f"steps issued but never awaited: {', '.join(step_ids)}; await every ctx call"
        )


class RecoveryFailedError(RunError):
    """A run could not be recovered (too many attempts, timeout, or no usable data)."""

    def __init__(self, run_id: str, reason: str) -> None:
        self.reason = reason
        super().__init__(run_id, f"run {run_id!r} could not be recovered: {reason}")


class RegistryError(ActorflowError, LookupError):
    """A workflow or agent class named in stored data is unknown or ambiguous."""

    def __init__(self, name: str, detail: str) -> None:
        self.name = name
        super().__init__(f"class {name!r}: {detail}")


class RunPaused(ActorflowError):
    """The run waits for human input; resume it with ``runtime.resume(run_id, response)``."""

    def __init__(self, run_id: str, prompt: str) -> None:
        self.run_id = run_id
        self.prompt = prompt
        super().__init__(f"run {run_id!r} paused for input: {prompt}")
