"""Driving one attempt at a run: load what is recorded, re-run, store the outcome.

The order is the recovery contract: the caller has already taken the run
(lock or lease); then the newest valid snapshot plus the log after it becomes
the run's view; agents come back with their crash-time states; a fresh
orchestrator runs from the top, replaying recorded steps and running the rest
live; the outcome (completed, failed, paused, interrupted, cancelled) is
stored with a final snapshot.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import anyio

from actorflow.errors import (
    CorruptedDataError,
    RunFailedError,
    RunPaused,
    StorageError,
)
from actorflow.runtime._checkpointer import CheckpointQueue
from actorflow.runtime._context import PauseRun, RunContext
from actorflow.runtime._recorder import Recorder, decode, encode
from actorflow.runtime._run import RunExecution, run_signature
from actorflow.runtime._view import RunView
from actorflow.storage import ErrorInfo, RunManifest, RunStatus

if TYPE_CHECKING:
    from actorflow.runtime._handle import RunHandle
    from actorflow.storage import Lease, Store
    from actorflow.storage._logwriter import LogWriter

__all__ = ["drive", "load_view"]


async def load_view(store: Store, run_id: str, emit: Any) -> tuple[RunView, int]:
    """The run as recorded: newest valid snapshot plus the log after it.

    A snapshot that fails its checksum is reported and skipped for the one
    before it; with none usable the whole log is read. Returns the view and
    how many log records were read after the snapshot.
    """
    view: RunView | None = None
    for info in reversed(await store.list_snapshots(run_id)):
        try:
            snapshot = await store.read_snapshot(run_id, info.snapshot_id)
        except CorruptedDataError as exc:
            emit(
                "checkpoint_corrupted",
                snapshot_id=info.snapshot_id,
                error=str(exc),
                level="warning",
            )
            continue
        view = RunView.from_snapshot(snapshot)
        emit("checkpoint_restored", snapshot_id=info.snapshot_id, position=snapshot.position)
        break
    if view is None:
        view = RunView(run_id)
    view.snapshots_taken = len(await store.list_snapshots(run_id))
    records = await store.read_log(run_id, view.position)
    for record in records:
        view.apply(record)
    view.steps_since_snapshot = 0
    return view, len(records)


async def drive(
    runtime: Any,
    handle: RunHandle,
    manifest: RunManifest,
    cls: type[Any],
    lease: Lease,
) -> None:
    """Run one attempt and record its outcome in the store and the handle."""
    store: Store = runtime.store
    run_id = manifest.run_id
    emit = handle.emit
    try:
        view, replayed = await load_view(store, run_id, emit)
        handle.replayed_steps = replayed
        if replayed or view.position:
            emit("recovery_started", position=view.position, records=replayed)
        from actorflow.storage._logwriter import LogWriter

        writer = LogWriter(store, run_id, start=view.position)
        await _attempt(runtime, handle, manifest, cls, view, writer)
    finally:
        with anyio.CancelScope(shield=True):
            try:
                await store.release(lease)
            except StorageError as exc:
                emit("lease_release_failed", error=str(exc), level="warning")


async def _attempt(
    runtime: Any,
    handle: RunHandle,
    manifest: RunManifest,
    cls: type[Any],
    view: RunView,
    writer: LogWriter,
) -> None:
    store: Store = runtime.store
    run_id = manifest.run_id
    input_type, result_type = run_signature(cls)
    checkpointer = runtime._checkpointer_ref()
    queue = CheckpointQueue(store=store, writer=writer, emit=handle.emit)
    scope = runtime._open_scope(
        run_id,
        on_escalate=lambda e: handle.emit(
            "agent_escalated", agent=e.actor, error=str(e), level="warning"
        ),
    )
    status: RunStatus = RunStatus.FAILED
    result: Any = None
    error: BaseException | None = None
    started = time.perf_counter()
    try:
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
            ctx = RunContext(
                run_id=run_id, recorder=recorder, config=runtime.config, runner=execution
            )
            value = decode(manifest.input, input_type, f"input of run {run_id}")
            handle.emit("run_started", workflow=manifest.workflow, agents_restored=restored)
            with anyio.CancelScope() as cancel_scope:
                handle._cancel_scope = cancel_scope
                try:
                    result = await execution.execute(cls, value, ctx)
                    status = RunStatus.COMPLETED
                except PauseRun as pause:
                    status, error = RunStatus.PAUSED, RunPaused(run_id, pause.prompt)
                except (StorageError, RunFailedError) as exc:
                    status, error = RunStatus.FAILED, exc
                except Exception as exc:
                    status = RunStatus.FAILED
                    error = RunFailedError(run_id, type(exc).__name__, str(exc))
                    error.__cause__ = exc
            if cancel_scope.cancel_called and status is RunStatus.FAILED and error is None:
                status = RunStatus.CANCELLED
            handle.metrics = dict(view.metrics)
            await _store_outcome(
                runtime, handle, recorder, queue, status, result, error, result_type
            )
    except BaseException as exc:
        if isinstance(exc, anyio.get_cancelled_exc_class()):
            with anyio.CancelScope(shield=True):
                await _mark(store, run_id, RunStatus.INTERRUPTED, None, None)
            handle.emit("run_interrupted")
            handle._finish(RunStatus.INTERRUPTED, error=exc)
        elif not handle.done:
            handle._finish(RunStatus.FAILED, error=exc)
        raise
    finally:
        with anyio.CancelScope(shield=True):
            await scope.aclose(timeout=runtime.shutdown_timeout)
    handle.emit(
        "run_finished",
        status=str(status),
        elapsed=round(time.perf_counter() - started, 6),
        steps=view.metrics.get("steps", 0),
        checkpoints=queue.written,
        level="info",
    )


async def _store_outcome(
    runtime: Any,
    handle: RunHandle,
    recorder: Recorder,
    queue: CheckpointQueue,
    status: RunStatus,
    result: Any,
    error: BaseException | None,
    result_type: Any,
) -> None:
    store: Store = runtime.store
    run_id = recorder.run_id
    if isinstance(error, StorageError):
        # The log itself failed: nothing more can be made durable. The run
        # stays as it is in the store, for `recover()` to pick up later.
        handle._finish(RunStatus.RUNNING, error=error)
        return
    result_bytes = (
        encode(result, f"result of run {run_id}") if status is RunStatus.COMPLETED else None
    )
    recorder.view.status = status
    with anyio.CancelScope(shield=status is not RunStatus.COMPLETED):
        await recorder.flush()
        recorder.snapshot(str(status))
        await queue.wait_idle()
        info = (
            ErrorInfo.of(error.__cause__ or error) if status is RunStatus.FAILED and error else None
        )
        prompt = error.prompt if isinstance(error, RunPaused) else None
        await _mark(
            store, run_id, status, result_bytes, info, prompt=prompt, phase=recorder.view.phase
        )
    handle._finish(status, result=result, error=error)
    if status is RunStatus.COMPLETED and runtime.config.retention is not None:
        runtime._prune_soon()


async def _mark(
    store: Store,
    run_id: str,
    status: RunStatus,
    result: bytes | None,
    error: ErrorInfo | None,
    *,
    prompt: str | None = None,
    phase: str | None = None,
) -> None:
    def change(m: RunManifest) -> RunManifest:
        import msgspec

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

    await store.update_run(run_id, change)
