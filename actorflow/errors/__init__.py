"""Every exception actorflow raises, rooted at :class:`ActorflowError`.

The tree::

    ActorflowError
    ├── ConfigurationError              a bad option value (also ValueError)
    │   ├── RetryPolicyError            a RetryPolicy with values it cannot use
    │   └── LimitValueError             a Limit with a zero or negative rate or cap
    ├── UnknownLimitError               a limit name the runtime did not declare (also LookupError)
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
    │   ├── StoreReadOnlyError          a write to a store this process may only read
    │   ├── StoreSchemaError            a database store's schema is newer, or not actorflow's
    │   ├── CorruptedDataError          stored bytes fail their checksum or do not decode
    │   │   ├── CheckpointCorruptedError    a snapshot is corrupt
    │   │   ├── HistoryFileError            an exported run history cannot be read:
    │   │   │   ├── HistoryFileTruncatedError   it ends early
    │   │   │   ├── HistoryFileCorruptedError   it fails its checksum
    │   │   │   └── HistoryFileNewerError       a newer actorflow wrote it
    │   │   ├── LogCorruptedError           a log record a reader needs is corrupt
    │   │   ├── InboxCorruptedError         an entry of a run's inbox is corrupt
    │   │   ├── NewerFormatError            sound, but written by a newer actorflow
    │   │   ├── RunFolderNotEmptyError      a run's folder holds data but no manifest
    │   │   └── UnreadableFileError         a FIFO, a device, or too large, where data should be
    │   ├── LogPrunedError              log records asked for were pruned by retention
    │   ├── CheckpointNotFoundError     no such snapshot (also LookupError)
    │   ├── EncodingError               a value cannot be encoded (also TypeError)
    │   ├── CheckpointTooLargeError     a snapshot is over the size limit
    │   ├── EncryptionKeyError          a wrong key, or:
    │   │   └── EncryptionKeyMissingError   a key the store was not given
    │   ├── InboxUnsupportedError       the store keeps no inbox for its runs
    │   ├── IncompatibleStateError      a stored state does not fit its class any more
    │   ├── RunLockedError              another live owner holds the run
    │   ├── RunEndNotStoredError        a run's end is in its log, its manifest not updated
    │   └── LeaseLostError              this owner's lease was taken over (fenced)
    ├── RunError                        something about one workflow run
    │   ├── RunNotFoundError            no run with that id (also LookupError)
    │   ├── RunNotFinishedError         the run has no result yet
    │   │   └── RunNotPausedError       resume of a run that is not paused
    │   ├── RunFailedError              the run ended in failure; carries the cause
    │   │   └── RunBlockedError         its code no longer replays its log; it waits, not failed
    │   ├── RunFinishedError            a signal or update sent to a run that has ended
    │   ├── WaitNotPendingError         an answer to a wait the run no longer has (also LookupError)
    │   ├── ReservedInboxNameError      a signal's type or id in actorflow's own namespace
    │   ├── SignalTooLargeError         a signal or update over ``max_signal_size``
    │   ├── WaitTimeoutError            a wait's deadline passed with no default (also TimeoutError)
    │   ├── UpdateRejectedError         the run refused an update (validator, no handler)
    │   ├── UpdateFailedError           an accepted update's handler raised
    │   ├── RunInputMismatchError       a run id reused with different input
    │   ├── RunInputTypeError           an input that does not fit the workflow (also TypeError)
    │   ├── StepFailedError             a step of the run failed
    │   ├── NonDeterminismError         re-run code diverged from the recorded log
    │   ├── NondeterministicCallError   orchestrator code called time/random/... outside ctx
    │   ├── UnawaitedStepError          a step was issued but never awaited
    │   ├── RecoveryFailedError         a run could not be recovered
    │   ├── ForkEditError               a fork's edit cannot be applied (also ValueError)
    │   │   ├── UnknownEditedAgentError     no such agent at the checkpoint (also LookupError)
    │   │   └── InvalidStateEditError       the new state does not fit the agent's state type
    │   └── MissingResponseError        a test run paused and no response answers it
    ├── FlowControlError                a queue or schedule argument (also ValueError)
    │   ├── QueueNotDeclaredError       ``submit`` to an undeclared queue (also LookupError)
    │   ├── DedupKeyError               a dedup key that is not a string (also TypeError)
    │   ├── CronExpressionError         a cron expression or interval that does not parse
    │   └── ScheduleNotFoundError       no schedule with that id (also LookupError)
    ├── RegistryError                   workflow or agent class lookup failed
    ├── ClusterError                    something about the cluster (``actorflow.ray``)
    │   ├── ClusterUnreachableError     its address does not answer (also ConnectionError)
    │   ├── ClassNotShippedError        its workers cannot import a class a run needs
    │   ├── HostStartError              a host could not start (its store unreachable)
    │   └── HostsOutdatedError          running hosts were started with another setup
    └── RunPaused                       control flow: the run waits for input

Exceptions build their message from their fields; call sites pass data.
"""

from __future__ import annotations

from actorflow.errors._actors import (
    ActorError,
    ActorFailedError,
    ActorNotFoundError,
    ActorStoppedError,
    AskTimeoutError,
    DuplicateActorNameError,
    EscalationError,
    MailboxClosedError,
    MailboxFullError,
    UnhandledMessageError,
)
from actorflow.errors._base import (
    ActorDefinitionError,
    ActorflowError,
    ConfigurationError,
    InvalidNameError,
    InvalidRunIdError,
    RegistryError,
    RuntimeNotRunningError,
)
from actorflow.errors._cluster import (
    ClassNotShippedError,
    ClusterError,
    ClusterUnreachableError,
    HostsOutdatedError,
    HostStartError,
)
from actorflow.errors._flow import (
    CronExpressionError,
    DedupKeyError,
    FlowControlError,
    LimitValueError,
    QueueNotDeclaredError,
    RetryPolicyError,
    ScheduleNotFoundError,
    UnknownLimitError,
)
from actorflow.errors._runs import (
    ForkEditError,
    InvalidStateEditError,
    MissingResponseError,
    NonDeterminismError,
    NondeterministicCallError,
    RecoveryFailedError,
    ReservedInboxNameError,
    RunBlockedError,
    RunError,
    RunFailedError,
    RunFinishedError,
    RunInputMismatchError,
    RunInputTypeError,
    RunNotFinishedError,
    RunNotFoundError,
    RunNotPausedError,
    RunPaused,
    SignalTooLargeError,
    StepFailedError,
    UnawaitedStepError,
    UnknownEditedAgentError,
    UpdateFailedError,
    UpdateRejectedError,
    WaitNotPendingError,
    WaitTimeoutError,
)
from actorflow.errors._storage import (
    CheckpointCorruptedError,
    CheckpointNotFoundError,
    CheckpointTooLargeError,
    CorruptedDataError,
    EncodingError,
    EncryptionKeyError,
    EncryptionKeyMissingError,
    HistoryFileCorruptedError,
    HistoryFileError,
    HistoryFileNewerError,
    HistoryFileTruncatedError,
    InboxCorruptedError,
    InboxUnsupportedError,
    IncompatibleStateError,
    LeaseLostError,
    LogCorruptedError,
    LogPrunedError,
    NewerFormatError,
    RunEndNotStoredError,
    RunFolderNotEmptyError,
    RunLockedError,
    StorageError,
    StoreReadOnlyError,
    StoreSchemaError,
    StoreUnavailableError,
    UnreadableFileError,
)

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
    "ClassNotShippedError",
    "ClusterError",
    "ClusterUnreachableError",
    "ConfigurationError",
    "CorruptedDataError",
    "CronExpressionError",
    "DedupKeyError",
    "DuplicateActorNameError",
    "EncodingError",
    "EncryptionKeyError",
    "EncryptionKeyMissingError",
    "EscalationError",
    "FlowControlError",
    "ForkEditError",
    "HistoryFileCorruptedError",
    "HistoryFileError",
    "HistoryFileNewerError",
    "HistoryFileTruncatedError",
    "HostStartError",
    "HostsOutdatedError",
    "InboxCorruptedError",
    "InboxUnsupportedError",
    "IncompatibleStateError",
    "InvalidNameError",
    "InvalidRunIdError",
    "InvalidStateEditError",
    "LeaseLostError",
    "LimitValueError",
    "LogCorruptedError",
    "LogPrunedError",
    "MailboxClosedError",
    "MailboxFullError",
    "MissingResponseError",
    "NewerFormatError",
    "NonDeterminismError",
    "NondeterministicCallError",
    "QueueNotDeclaredError",
    "RecoveryFailedError",
    "RegistryError",
    "ReservedInboxNameError",
    "RetryPolicyError",
    "RunBlockedError",
    "RunEndNotStoredError",
    "RunError",
    "RunFailedError",
    "RunFinishedError",
    "RunFolderNotEmptyError",
    "RunInputMismatchError",
    "RunInputTypeError",
    "RunLockedError",
    "RunNotFinishedError",
    "RunNotFoundError",
    "RunNotPausedError",
    "RunPaused",
    "RuntimeNotRunningError",
    "ScheduleNotFoundError",
    "SignalTooLargeError",
    "StepFailedError",
    "StorageError",
    "StoreReadOnlyError",
    "StoreSchemaError",
    "StoreUnavailableError",
    "UnawaitedStepError",
    "UnhandledMessageError",
    "UnknownEditedAgentError",
    "UnknownLimitError",
    "UnreadableFileError",
    "UpdateFailedError",
    "UpdateRejectedError",
    "WaitNotPendingError",
    "WaitTimeoutError",
]

# Users import these from here, and here is where tracebacks should say they live.
for _name in __all__:
    globals()[_name].__module__ = __name__
del _name
