"""How an attempt at a run ends: the status it ends with, and that status stored.

What stopped the attempt decides its ``Outcome``: a result completes the run,
a pausing wait pauses it, code that no longer replays the log blocks it, a
cancel cancels it and any other error fails it; an error of the store or the
cluster leaves it unfinished, as the store has it, for ``recover()``.
``store_outcome`` makes the outcome durable: a finished run's end record (the
truth; its format is ``RunEnd`` in ``_outcomes``), the final snapshot, then the
manifest (a cache of it, ``status_change``). ``settle`` repairs a manifest
that a power loss kept from hearing of a logged end; ``cut_short`` marks how an
attempt that raised left its run (interrupted, left to newer code, kept for a
later recovery with its cause).
"""

from __future__ import annotations

import functools
import time
from typing import TYPE_CHECKING, Any

import anyio
import msgspec

from actorflow._text import error_message
from actorflow.errors import (
    ClusterError,
    CorruptedDataError,
    EncodingError,
    NewerFormatError,
    NonDeterminismError,
    RecoveryFailedError,
    RunBlockedError,
    RunEndNotStoredError,
    RunFailedError,
    RunPaused,
    StorageError,
)
from actorflow.runtime.workflow._outcomes import (
    RunEnd,
    end_record,
    left_for_newer,
    recovery_failed,
    run_signature,
)
from actorflow.runtime.workflow._triggers import final_trigger
from actorflow.storage import ErrorInfo, RunManifest, RunStatus, update_run_unsynced
from actorflow.storage import decode_value as decode

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from actorflow.runtime.workflow._checkpointer import CheckpointQueue
    from actorflow.runtime.workflow._handle import RunTracker
    from actorflow.runtime.workflow._recorder import Recorder
    from actorflow.runtime.workflow._replay import RunView
    from actorflow.storage import Store

__all__ = [
    "Outcome",
    "cancelled_unowned",
    "cut_short",
    "settle",
    "status_change",
    "store_outcome",
]

_CAUSE_CHARS = 1000
"""Characters of a cause's message kept in the message of the error it caused."""


class Outcome:
    """How an attempt ended, handed to the run's handle once the run is let go."""

    __slots__ = ("code_version", "error", "result", "status")

    def __init__(self) -> None:
        self.status = RunStatus.RUNNING
        self.result: Any = None
        self.error: BaseException | None = None
        self.code_version: str | None = None

    def cancelled(self, run_id: str, reason: str | None = None) -> None:
        """Cancelled, with ``reason`` if one was given."""
        self.status = RunStatus.CANCELLED
        self.error = RunFailedError(run_id, "cancelled", reason or "the run was cancelled")

    def stopped(self, run_id: str, handle: RunTracker) -> None:
        """Stopped from outside: failed if the handle says why (``fail``), else cancelled."""
        if handle.failure is not None:
            self.failed(run_id, handle.failure)
        else:
            self.cancelled(run_id, handle.cancel_reason)

    def failed(self, run_id: str, exc: Exception) -> None:
        """Failed by ``exc``: the cause of a ``RunFailedError``, or that error itself."""
        self.status = RunStatus.FAILED
        if isinstance(exc, RunFailedError):
            self.error = exc
            return
        self.error = RunFailedError(run_id, type(exc).__name__, error_message(exc))
        self.error.__cause__ = exc

    def blocked(self, run_id: str, exc: NonDeterminismError, code_version: str | None) -> None:
        """Blocked by ``exc`` under ``code_version``: the code no longer replays the log."""
        # not failed: code that replays the log (a rollback) may continue it
        self.status = RunStatus.BLOCKED
        self.code_version = code_version
        self.error = RunBlockedError(run_id, type(exc).__name__, error_message(exc), code_version)
        self.error.__cause__ = exc

    def paused(self, run_id: str, prompt: str, deadline: float | None) -> None:
        """Paused by a wait for input (``RunPaused``)."""
        self.status = RunStatus.PAUSED
        self.error = RunPaused(run_id, prompt, deadline)

    def caught(
        self,
        run_id: str,
        exc: Exception,
        *,
        interrupting: bool,
        code_version: str | None,
        emit: Callable[..., None],
    ) -> bool:
        """Take what the orchestrator raised as the attempt's end; False to raise it on.

        Any error but the store's or the cluster's (or a value that cannot be
        encoded) raised while the runtime interrupts the run is a consequence
        of that stop: the caller raises it on, and ``cut_short`` marks the
        run interrupted.
        """
        if isinstance(exc, EncodingError):
            # the run's own values (not the store) are at fault: it fails
            self.failed(run_id, exc)
        elif isinstance(exc, StorageError):
            # The log itself failed: nothing more can be made durable. The
            # run stays as the store has it, for `recover()` to pick up later.
            self.error = exc
        elif isinstance(exc, ClusterError):
            # the cluster cannot take an agent now (its code not shipped, say):
            # the run stays as stored, for a later attempt, not failed by the deploy
            self.error = exc
        elif interrupting:
            return False
        elif (diverged := _divergence(exc)) is not None:
            self.blocked(run_id, diverged, code_version)
            emit(
                "run_blocked",
                step_id=diverged.step_id,
                error=error_message(diverged),
                code_version=code_version,
                level="warning",
            )
        else:
            self.failed(run_id, exc)
        return True


def _divergence(exc: Exception) -> NonDeterminismError | None:
    """The ``NonDeterminismError`` that ``exc`` is, or holds among others (from a task group)."""
    if isinstance(exc, NonDeterminismError):
        return exc
    if isinstance(exc, ExceptionGroup):
        for inner in exc.exceptions:
            found = _divergence(inner)
            if found is not None:
                return found
    return None


async def cut_short(
    exc: BaseException,
    *,
    store: Store,
    run_id: str,
    fresh: bool,
    interrupting: bool,
    stop_agents: Callable[[], Awaitable[None]],
    outcome: Outcome,
    emit: Callable[..., None],
) -> BaseException:
    """Mark how an attempt that raised ``exc`` left its run; return what the attempt raises.

    A run its runtime stopped (``interrupting``) is interrupted, whatever it
    raised on its way out (a cancellation, or an error caused by it); so is
    one whose task trio chose to raise Ctrl-C's ``KeyboardInterrupt`` in. Its
    agents stop before it is marked. Sound data this code cannot read leaves
    a recorded run to a newer worker, the attempt it took given back. Any
    other error leaves a recorded run as it was, for a later ``recover()``,
    the cause kept in its manifest; damaged data is raised as
    ``RecoveryFailedError``, the cause chained.
    """
    stopped_here = isinstance(exc, anyio.get_cancelled_exc_class() | KeyboardInterrupt | SystemExit)
    if interrupting or stopped_here:
        with anyio.CancelScope(shield=True):
            await stop_agents()
            await store.update_run(run_id, status_change(RunStatus.INTERRUPTED))
        emit("run_interrupted")
        outcome.status = RunStatus.INTERRUPTED
    elif isinstance(exc, NewerFormatError) and not fresh:
        with anyio.CancelScope(shield=True):
            await store.update_run(run_id, left_for_newer)
        emit("run_left_for_newer_code", error=error_message(exc), level="warning")
        outcome.status = RunStatus.INTERRUPTED
    elif isinstance(exc, Exception) and not fresh:
        error = _unrecoverable(run_id, exc)
        with anyio.CancelScope(shield=True):
            await _note_recovery_error(store, run_id, exc, emit)
        if error is not exc:
            outcome.error = error
            return error
    outcome.error = exc
    return exc


def _unrecoverable(run_id: str, exc: Exception) -> Exception:
    """What a failed attempt at a recorded run raises: damaged data as ``RecoveryFailedError``.

    Damage that the newest valid checkpoint does not cover (a log record
    after it, a state blob it needs) stops every attempt the same way, so the
    error says it is the recorded data, with the cause chained. Anything else
    is raised as itself.
    """
    if not isinstance(exc, CorruptedDataError):
        return exc
    cause = f"{type(exc).__name__}: {error_message(exc, _CAUSE_CHARS)}"
    error = RecoveryFailedError(run_id, f"what it recorded cannot be read: {cause}")
    error.__cause__ = exc
    return error


async def _note_recovery_error(
    store: Store, run_id: str, cause: BaseException, emit: Callable[..., None]
) -> None:
    """Keep why this attempt failed in the manifest (``recovery_errors``), if the store can."""
    change = functools.partial(recovery_failed, cause=ErrorInfo.of(cause))
    try:
        await store.update_run(run_id, change)
    except StorageError as exc:
        emit("recovery_error_not_kept", error=error_message(exc), level="warning")


async def store_outcome(
    handle: RunTracker,
    recorder: Recorder,
    queue: CheckpointQueue,
    outcome: Outcome,
    result: bytes | None,
) -> None:
    """Make the outcome durable, then write the final snapshot and tell the manifest.

    A finished run (completed, failed, cancelled) ends its log with one
    record holding its status and result: that append is the one durable
    write of its end. The manifest is a cache of it, written without a sync
    of its own (``recover()`` repairs it from the log after a power loss), and
    the final snapshot, an optimisation, is written by the run itself without
    waiting for the snapshots still queued. A paused or blocked run goes on
    later, so its status goes to the manifest durably and no end is logged.
    An outcome the store cannot take leaves the run unfinished, as the store
    has it (for ``recover()``): the handle says running, with the
    ``StorageError`` as its error.
    """
    status, error = outcome.status, outcome.error
    if status is RunStatus.RUNNING:
        return
    run_id = recorder.run_id
    recorder.view.status = status
    info = None
    if status in (RunStatus.FAILED, RunStatus.BLOCKED) and error is not None:
        info = ErrorInfo.of(error.__cause__ or error)
    elif status is RunStatus.CANCELLED:
        info = _cancel_info(handle.cancel_reason)
    paused = error if isinstance(error, RunPaused) else None
    change = status_change(
        status,
        result,
        info,
        prompt=paused.prompt if paused is not None else None,
        deadline=paused.deadline if paused is not None else None,
        phase=recorder.view.phase,
        code_version=outcome.code_version,
    )
    # taken before the end record: a fork from it replays to the end, it does not inherit it
    final = recorder.view.snapshot(final_trigger(status))
    if status is RunStatus.COMPLETED:
        # a completed run's outcome may be interrupted (it is then marked interrupted)
        end = RunEnd(status=status, result=result)
        await _log_end(handle, recorder, outcome, end, change, lambda: queue.write_final(final))
        return
    # any other is made durable whatever happens, but holds the runtime's
    # shutdown only as long as the runtime lets it (``RunTracker.shield``)
    with anyio.CancelScope(shield=True) as shielded:
        handle.shield(shielded)
        try:
            if status.finished:
                end = RunEnd(status=status, error=info)
                await _log_end(
                    handle, recorder, outcome, end, change, lambda: queue.write_final(final)
                )
                return
            try:
                await recorder.flush()
                await recorder.store.update_run(run_id, change)
            except StorageError as exc:
                # not paused (or blocked) as far as the store knows: unfinished, for recover()
                outcome.status, outcome.error = RunStatus.RUNNING, exc
                handle.emit("run_status_not_stored", error=error_message(exc), level="warning")
                return
            await queue.write_final(final)
        finally:
            handle.shield(None)


async def _log_end(
    handle: RunTracker,
    recorder: Recorder,
    outcome: Outcome,
    end: RunEnd,
    change: Callable[[RunManifest], RunManifest],
    final: Callable[[], Awaitable[None]],
) -> None:
    """Append the run's end and make it durable; then its ``final`` snapshot; then the
    manifest, its cache.

    The end record decides the run's status. One that cannot be made durable
    leaves the run unfinished (as the store has it, for ``recover``), the
    append's ``StorageError`` its error, and no final snapshot is written.
    The final snapshot goes before the manifest: a store that writes an
    owner's snapshot with its next write (PostgreSQL) carries it in the
    manifest's. Once the end is durable, a manifest that cannot be updated
    changes nothing but the outcome's error: a ``RunEndNotStoredError``
    (``recover`` repairs the manifest).
    """
    recorder.record(end_record(end))
    try:
        await recorder.flush()
    except StorageError as exc:
        outcome.status, outcome.result, outcome.error = RunStatus.RUNNING, None, exc
        handle.emit("run_end_not_logged", error=error_message(exc), level="warning")
        return
    await final()
    try:
        await update_run_unsynced(recorder.store, recorder.run_id, change)
    except StorageError as exc:
        error = RunEndNotStoredError(recorder.run_id, str(end.status), error_message(exc))
        error.__cause__ = exc
        outcome.error = error
        handle.emit("run_end_not_stored", error=error_message(exc), level="warning")


async def settle(
    handle: RunTracker,
    store: Store,
    workflow: type[Any],
    view: RunView,
    end: RunEnd,
    outcome: Outcome,
) -> None:
    """The log says the run finished but the manifest did not hear of it: repair it.

    (A power loss can take the manifest's write, which follows the durable
    end record without a sync of its own.) Nothing runs again: no agent is
    restored, the orchestrator is not called.
    """
    run_id = view.run_id
    change = status_change(end.status, end.result, end.error, phase=view.phase)
    await store.update_run(run_id, change)
    handle.emit("run_end_restored", status=str(end.status), level="warning")
    if end.status is RunStatus.COMPLETED:
        result_type = run_signature(workflow)[1]
        outcome.result = decode(end.result or b"\xc0", result_type, f"result of run {run_id}")
        outcome.status = RunStatus.COMPLETED
    elif end.status is RunStatus.CANCELLED:
        outcome.cancelled(run_id, end.error.message if end.error else None)
    else:
        error = end.error or ErrorInfo(type="RunFailedError", message="the run failed")
        outcome.status = RunStatus.FAILED
        outcome.error = RunFailedError(run_id, error.type, error.message)


def status_change(
    status: RunStatus,
    result: bytes | None = None,
    error: ErrorInfo | None = None,
    *,
    prompt: str | None = None,
    deadline: float | None = None,
    phase: str | None = None,
    code_version: str | None = None,
) -> Callable[[RunManifest], RunManifest]:
    """The manifest change that records how an attempt ended (pure: may run twice).

    ``code_version`` is the code a ``blocked`` run was blocked under.
    """

    def change(m: RunManifest) -> RunManifest:
        return msgspec.structs.replace(
            m,
            status=status,
            result=result if result is not None else m.result,
            error=error,
            prompt=prompt,
            deadline=deadline,
            phase=phase if phase is not None else m.phase,
            updated=time.time(),
            owner=None,
            blocked_code_version=code_version if status is RunStatus.BLOCKED else None,
        )

    return change


def cancelled_unowned(reason: str | None) -> Callable[[RunManifest], RunManifest]:
    """The manifest change that cancels a run nobody drives (pure: may run twice).

    No claim on the run is held, so no end record is appended: the manifest
    alone says it ended. A run that finished meanwhile is left as it is.
    """
    error = _cancel_info(reason)

    def change(m: RunManifest) -> RunManifest:
        if m.status.finished:
            return m
        return msgspec.structs.replace(
            m, status=RunStatus.CANCELLED, error=error, updated=time.time()
        )

    return change


def _cancel_info(reason: str | None) -> ErrorInfo | None:
    """What a cancelled run's manifest and end record keep of why: the reason, if given."""
    return ErrorInfo(type="cancelled", message=reason) if reason is not None else None
