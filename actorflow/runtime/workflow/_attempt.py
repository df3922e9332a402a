"""Driving one attempt at a run: load what is recorded, re-run, store the outcome.

The order is the recovery contract: the caller has already taken the run
(lock or lease); then the newest valid snapshot plus the log after it becomes
the run's view; agents come back with their crash-time states; a fresh
orchestrator runs from the top, replaying recorded steps and running the rest
live; the outcome (completed, failed, paused, interrupted, cancelled) is
stored with a final snapshot.
"""

from __future__ import annotations

import resource
import time
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any

import anyio
import msgspec

from actorflow.errors import (
    EncodingError,
    RunFailedError,
    RunPaused,
    StorageError,
)
from actorflow.runtime.workflow._checkpointer import CheckpointQueue
from actorflow.runtime.workflow._context import PauseRun, RunContext
from actorflow.runtime.workflow._execution import RunExecution, run_signature
from actorflow.runtime.workflow._recorder import Recorder, decode, encode
from actorflow.runtime.workflow._replay import RunView, load_view
from actorflow.storage import ErrorInfo, LogWriter, RunManifest, RunStatus

if TYPE_CHECKING:
    from collections.abc import Callable

    from actorflow.runtime.actors import ActorScope
    from actorflow.runtime.workflow._handle import RunHandle
    from actorflow.storage import Lease, RetentionPolicy, Store

__all__ = ["drive", "drive_in_background", "load_view"]


class _Outcome:
    """How an attempt ended, handed to the run's handle once the run is let go."""

    __slots__ = ("error", "result", "status")

    def __init__(self) -> None:
        self.status = RunStatus.RUNNING
        self.result: Any = None
        self.error: BaseException | None = None

    def cancelled(self, run_id: str) -> None:
        self.status = RunStatus.CANCELLED
        self.error = RunFailedError(run_id, "cancelled", "the run was cancelled")


async def drive_in_background(
    runtime: Any,
    handle: RunHandle,
    manifest: RunManifest,
    workflow: type[Any],
    lease: Lease,
    fresh: bool,
) -> None:
    """A run's own task: drive it, renewing its lease where the store needs that.

    A run's failure belongs to its handle, never to the runtime's task group.
    """
    store: Store = runtime.store
    renew = store.renew_interval
    if renew is None:
        # no lease to renew: no heartbeat, so no task group to host one
        await _drive_caught(runtime, handle, manifest, workflow, lease, fresh)
        return
    async with anyio.create_task_group() as tg:
        tg.start_soon(_heartbeat, store, lease, renew)
        try:
            await _drive_caught(runtime, handle, manifest, workflow, lease, fresh)
        finally:
            tg.cancel_scope.cancel()


async def _drive_caught(
    runtime: Any,
    handle: RunHandle,
    manifest: RunManifest,
    workflow: type[Any],
    lease: Lease,
    fresh: bool,
) -> None:
    try:
        await drive(runtime, handle, manifest, workflow, lease, fresh=fresh)
    except anyio.get_cancelled_exc_class():
        raise
    except Exception as exc:
        if not handle.done:
            handle._finish(RunStatus.FAILED, error=exc)
    finally:
        runtime._retire(handle)


async def _heartbeat(store: Store, lease: Lease, interval: float) -> None:
    while True:
        await anyio.sleep(interval)
        lease = await store.renew(lease)


async def drive(
    runtime: Any,
    handle: RunHandle,
    manifest: RunManifest,
    cls: type[Any],
    lease: Lease,
    *,
    fresh: bool = False,
) -> None:
    """Run one attempt, store its outcome, let go of the run, then tell the handle.

    A ``fresh`` run was created by this call to ``start``: nothing is recorded
    yet, so there is nothing to read back.

    The handle learns the outcome only after the run's agents stopped and its
    claim was released, so whoever waits on it may claim the run at once
    (``resume`` right after ``RunPaused``, say).
    """
    store: Store = runtime.store
    run_id = manifest.run_id
    emit = handle.emit
    outcome = _Outcome()
    started = time.perf_counter()
    scope: ActorScope | None = None
    stopped = False
    try:
        if fresh:
            view, replayed = RunView(run_id), 0
        else:
            view, replayed = await load_view(store, run_id, emit)
        handle.replayed_steps = replayed
        if replayed or view.position:
            emit("recovery_started", position=view.position, records=replayed)
        writer = LogWriter(store, run_id, start=view.position)
        scope = runtime.open_scope(
            run_id,
            on_escalate=lambda e: emit(
                "agent_escalated", agent=e.actor, error=str(e), level="warning"
            ),
        )
        await _attempt(runtime, handle, manifest, cls, view, writer, outcome, scope)
    except BaseException as exc:
        if isinstance(exc, anyio.get_cancelled_exc_class()):
            with anyio.CancelScope(shield=True):
                if scope is not None:  # agents stop before the run is marked
                    stopped = True
                    await scope.aclose(timeout=runtime.shutdown_timeout)
                await _mark(store, run_id, RunStatus.INTERRUPTED, None, None)
            emit("run_interrupted")
            outcome.status = RunStatus.INTERRUPTED
        outcome.error = exc
        raise
    finally:
        # one shielded scope: stop the agents (if still running), then release
        with anyio.CancelScope(shield=True):
            try:
                if scope is not None and not stopped:
                    await scope.aclose(timeout=runtime.shutdown_timeout)
            finally:
                try:
                    await store.release(lease)
                except StorageError as exc:
                    emit("lease_release_failed", error=str(exc), level="warning")
        handle.metrics.update(
            elapsed=round(time.perf_counter() - started, 6),
            peak_memory=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        )
        emit("run_finished", status=str(outcome.status), metrics=dict(handle.metrics))
        handle._finish(outcome.status, result=outcome.result, error=outcome.error)
    policy = runtime.config.retention
    if outcome.status is RunStatus.COMPLETED and policy is not None:
        written = int(handle.metrics.get("checkpoints", 0))
        if not (fresh and _nothing_to_prune(policy, written)):
            runtime._prune_soon(run_id)


def _nothing_to_prune(policy: RetentionPolicy, written: int) -> bool:
    """Whether a run that ran in one go, writing ``written`` snapshots, is within ``policy``.

    Such a run has no snapshots but its own: keeping the last N (per run or
    per phase) keeps them all. Age and deleting completed runs need a look.
    """
    return (
        policy.keep_last is not None
        and written <= policy.keep_last
        and policy.max_age is None
        and not policy.delete_completed
    )


async def _attempt(
    runtime: Any,
    handle: RunHandle,
    manifest: RunManifest,
    cls: type[Any],
    view: RunView,
    writer: LogWriter,
    outcome: _Outcome,
    scope: ActorScope,
) -> None:
    """Restore the agents, run the orchestrator and store the outcome.

    The run's agents (in ``scope``) are stopped by the caller, after this.
    """
    store: Store = runtime.store
    run_id = manifest.run_id
    input_type, _ = run_signature(cls)
    checkpointer = runtime._checkpointer_ref()
    queue = CheckpointQueue(store=store, writer=writer, emit=handle.emit)
    async with anyio.create_task_group() as tg:
        recorder = Recorder(
            run_id=run_id,
            store=store,
            writer=writer,
            view=view,
            config=runtime.config,
            task_group=tg,
            request_snapshot=lambda s: queue.offer(s, checkpointer.send_nowait),
            emit=handle.emit,
        )
        execution = RunExecution(runtime=runtime, recorder=recorder, scope=scope, task_group=tg)
        restored = await execution.restore_agents()
        ctx = RunContext(run_id=run_id, recorder=recorder, config=runtime.config, runner=execution)
        value = decode(manifest.input, input_type, f"input of run {run_id}")
        handle.emit("run_started", workflow=manifest.workflow, agents_restored=restored)
        await _execute(handle, execution, cls, value, ctx, outcome)
        await _store_outcome(store, recorder, queue, checkpointer.send_nowait, outcome)
        handle.metrics.update(
            view.metrics,
            checkpoints=queue.written,
            checkpoint_failures=queue.failed,
            checkpoint_bytes=queue.bytes_written,
            checkpoint_write_ms=round(queue.write_seconds * 1000, 3),
            recoveries=manifest.attempt,
        )


async def _execute(
    handle: RunHandle,
    execution: RunExecution,
    cls: type[Any],
    value: Any,
    ctx: RunContext,
    outcome: _Outcome,
) -> None:
    run_id = ctx.run_id
    if handle._cancelled:  # cancelled before its code could start: none of it runs
        outcome.cancelled(run_id)
        return
    with anyio.CancelScope() as cancel_scope:
        handle._cancel_scope = cancel_scope
        try:
            outcome.result = await execution.execute(cls, value, ctx)
            outcome.status = RunStatus.COMPLETED
        except PauseRun as pause:
            outcome.status = RunStatus.PAUSED
            outcome.error = RunPaused(run_id, pause.prompt)
        except StorageError as exc:
            if isinstance(exc, EncodingError):
                # the run's own values (not the store) are at fault: it fails
                outcome.status = RunStatus.FAILED
                outcome.error = RunFailedError(run_id, type(exc).__name__, str(exc))
                outcome.error.__cause__ = exc
            else:
                # The log itself failed: nothing more can be made durable. The
                # run stays as the store has it, for `recover()` to pick up later.
                outcome.error = exc
        except RunFailedError as exc:
            outcome.status, outcome.error = RunStatus.FAILED, exc
        except Exception as exc:
            outcome.status = RunStatus.FAILED
            outcome.error = RunFailedError(run_id, type(exc).__name__, str(exc))
            outcome.error.__cause__ = exc
    # cancelling now changes nothing; the handle (kept by the runtime) lets go of
    # the scope and the tasks and scopes it still points to
    handle._cancel_scope = None
    if cancel_scope.cancel_called and outcome.status is RunStatus.RUNNING:
        outcome.cancelled(run_id)


async def _store_outcome(
    store: Store,
    recorder: Recorder,
    queue: CheckpointQueue,
    send: Callable[[Any], None],
    outcome: _Outcome,
) -> None:
    """Make the outcome durable: the final status goes with the final snapshot.

    One manifest write lists the final snapshot and records the status (and
    result); if that snapshot cannot be written, the status is written alone.
    """
    status, error = outcome.status, outcome.error
    if status is RunStatus.RUNNING:
        return
    run_id = recorder.run_id
    result = None
    if status is RunStatus.COMPLETED:
        result = encode(outcome.result, f"result of run {run_id}")
    recorder.view.status = status
    info = None
    if status is RunStatus.FAILED and error is not None:
        info = ErrorInfo.of(error.__cause__ or error)
    prompt = error.prompt if isinstance(error, RunPaused) else None
    change = _status_change(status, result, info, prompt=prompt, phase=recorder.view.phase)
    # a completed run's outcome may be interrupted (it is then marked
    # interrupted); any other is made durable whatever happens
    with nullcontext() if status is RunStatus.COMPLETED else anyio.CancelScope(shield=True):
        await recorder.flush()
        final = recorder.view.snapshot(str(status))
        await queue.write_last(final, send, change)
        if final.snapshot_id not in queue.applied:
            await store.update_run(run_id, change)


def _status_change(
    status: RunStatus,
    result: bytes | None,
    error: ErrorInfo | None,
    *,
    prompt: str | None = None,
    phase: str | None = None,
) -> Callable[[RunManifest], RunManifest]:
    """The manifest change that records how an attempt ended (pure: may run twice)."""

    def change(m: RunManifest) -> RunManifest:
        return msgspec.structs.replace(
            m,
            status=status,
            result=result if result is not None else m.result,
            error=error,
            prompt=prompt,
            phase=phase if phase is not None else m.phase,
            updated=time.time(),
            owner=None,
        )

    return change


async def _mark(
    store: Store,
    run_id: str,
    status: RunStatus,
    result: bytes | None,
    error: ErrorInfo | None,
) -> None:
    await store.update_run(run_id, _status_change(status, result, error))
