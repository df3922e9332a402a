"""One attempt at a run: load what is recorded, restore the agents, execute, finish.

The order is the recovery contract: the caller has already taken the run
(lock or lease); the newest valid snapshot plus the log after it becomes the
run's view; agents come back with their crash-time states; a fresh
orchestrator runs from the top, replaying recorded steps and running the rest
live; the outcome (completed, failed, paused, interrupted, cancelled) is
stored with a final snapshot. First starts, recoveries, resumes and forks all
go through ``RunDriver.drive``.
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
    LeaseLostError,
    NewerFormatError,
    NonDeterminismError,
    RecoveryFailedError,
    RunBlockedError,
    RunEndNotStoredError,
    RunFailedError,
    RunPaused,
    StorageError,
)
from actorflow.runtime.actors import Actor, state_type
from actorflow.runtime.workflow._adoption import adoption_record
from actorflow.runtime.workflow._agents import RunAgents
from actorflow.runtime.workflow._checkpointer import CheckpointQueue
from actorflow.runtime.workflow._context import RunContext
from actorflow.runtime.workflow._env import StepEnv
from actorflow.runtime.workflow._outcomes import (
    RunEnd,
    end_record,
    left_for_newer,
    progressed,
    recorded_end,
    recovery_failed,
    run_signature,
)
from actorflow.runtime.workflow._recorder import Recorder
from actorflow.runtime.workflow._replay import RunView, load_view
from actorflow.runtime.workflow._signals import SignalDesk, WatchClock
from actorflow.runtime.workflow._triggers import final_trigger, peak_memory
from actorflow.runtime.workflow._updates import UpdateRunner
from actorflow.runtime.workflow.steps import PauseRun, close_namespace
from actorflow.storage import ErrorInfo, LogWriter, RunManifest, RunStatus, update_run_unsynced
from actorflow.storage import decode_value as decode
from actorflow.storage import encode_value as encode

if TYPE_CHECKING:
    from collections.abc import Callable

    from actorflow.errors import EscalationError
    from actorflow.runtime.actors import ActorRef, ActorScope
    from actorflow.runtime.workflow._checkpointer import Checkpointer
    from actorflow.runtime.workflow._cluster import AgentPlacer
    from actorflow.runtime.workflow._config import RuntimeConfig
    from actorflow.runtime.workflow._env import ChildRuns
    from actorflow.runtime.workflow._handle import RunTracker
    from actorflow.storage import Lease, RetentionPolicy, Store

__all__ = ["RunDriver"]

_CAUSE_CHARS = 1000
"""Characters of a cause's message kept in the message of the error it caused."""


class _Outcome:
    """How an attempt ended, handed to the run's handle once the run is let go."""

    __slots__ = ("code_version", "error", "placers", "result", "status")

    def __init__(self) -> None:
        self.placers: set[AgentPlacer] = set()  # where the attempt placed agents, to release
        self.status = RunStatus.RUNNING
        self.result: Any = None
        self.error: BaseException | None = None
        self.code_version: str | None = None

    def cancelled(self, run_id: str, reason: str | None = None) -> None:
        self.status = RunStatus.CANCELLED
        self.error = RunFailedError(run_id, "cancelled", reason or "the run was cancelled")

    def failed(self, run_id: str, exc: Exception) -> None:
        self.status = RunStatus.FAILED
        if isinstance(exc, RunFailedError):
            self.error = exc
            return
        self.error = RunFailedError(run_id, type(exc).__name__, error_message(exc))
        self.error.__cause__ = exc

    def blocked(self, run_id: str, exc: NonDeterminismError, code_version: str | None) -> None:
        # not failed: code that replays the log (a rollback) may continue it
        self.status = RunStatus.BLOCKED
        self.code_version = code_version
        self.error = RunBlockedError(run_id, type(exc).__name__, error_message(exc), code_version)
        self.error.__cause__ = exc


class RunDriver:
    """Drives attempts at runs for one runtime: what each attempt needs of it, typed.

    Args:
        store: where the runs live.
        config: the runtime's workflow options.
        shutdown_timeout: seconds a run's agents get to stop.
        open_scope: opens a run's actor scope (its own names and escalation).
        checkpointer: the runtime's checkpoint actor (started on first use).
        on_finished: told of every run whose attempt ended (its handle), and
            whether the retention policy should look at the run.
        children: starts the runs' child runs (``ctx.start_child``).
        placer_for: where agents of a class run, if not here (a cluster's placer).
        watch_clock: opens the attempts' inbox watches a second in.
    """

    def __init__(
        self,
        *,
        store: Store,
        config: RuntimeConfig,
        shutdown_timeout: float,
        open_scope: Callable[[str, Callable[[EscalationError], None]], ActorScope],
        checkpointer: Callable[[], ActorRef[Checkpointer]],
        on_finished: Callable[[RunTracker, bool], None],
        children: ChildRuns | None = None,
        placer_for: Callable[[type[Any]], AgentPlacer | None] | None = None,
        watch_clock: WatchClock,
    ) -> None:
        self.store = store
        self._watch_clock = watch_clock
        self.config = config
        self.shutdown_timeout = shutdown_timeout
        self._open_scope = open_scope
        self._checkpointer = checkpointer
        self._on_finished = on_finished
        self._children = children
        self._placer_for = placer_for

    async def drive_in_background(
        self,
        handle: RunTracker,
        manifest: RunManifest,
        workflow: type[Any],
        lease: Lease,
        fresh: bool,
    ) -> None:
        """A run's own task: drive it, renewing its lease where the store needs that.

        A run's failure belongs to its handle, never to the runtime's task group.
        """
        renew = self.store.renew_interval
        prune = False
        # the runtime interrupts the run through this scope as it stops (RunTracker.interrupt)
        with anyio.CancelScope() as interruptible:
            handle.attach_driver(interruptible)
            try:
                if renew is None:
                    # no lease to renew: no heartbeat, so no task group to host one
                    prune = await self._drive_caught(handle, manifest, workflow, lease, fresh)
                    return
                async with anyio.create_task_group() as tg:
                    handle.heartbeat = anyio.CancelScope()
                    tg.start_soon(_heartbeat, self.store, lease, renew, handle)
                    try:
                        prune = await self._drive_caught(handle, manifest, workflow, lease, fresh)
                    finally:
                        tg.cancel_scope.cancel()
            finally:
                handle.attach_driver(None)
                self._on_finished(handle, prune)

    async def _drive_caught(
        self,
        handle: RunTracker,
        manifest: RunManifest,
        workflow: type[Any],
        lease: Lease,
        fresh: bool,
    ) -> bool:
        try:
            return await self.drive(handle, manifest, workflow, lease, fresh=fresh)
        except anyio.get_cancelled_exc_class():
            raise
        except Exception as exc:
            if not handle.done:
                handle.finish(RunStatus.FAILED, error=exc)
            return False

    async def drive(
        self,
        handle: RunTracker,
        manifest: RunManifest,
        workflow: type[Any],
        lease: Lease,
        *,
        fresh: bool = False,
    ) -> bool:
        """Run one attempt, store its outcome, let go of the run, then tell the handle.

        A ``fresh`` run was created by this call to ``start``: nothing is
        recorded yet, so there is nothing to read back. The handle learns the
        outcome only after the run's agents stopped and its claim was
        released, so whoever waits on it may claim the run at once (``resume``
        right after ``RunPaused``, say). Returns whether the retention policy
        should look at the run now.
        """
        store = self.store
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
            end = None if fresh else recorded_end(run_id, view.events)
            if end is not None:
                handle.replayed_steps = 0  # nothing replays: the log says how it ended
                await _settle(handle, store, workflow, view, end, outcome)
            else:
                if replayed or view.position:
                    emit("recovery_started", position=view.position, records=replayed)
                writer = LogWriter(store, run_id, start=view.position)
                if handle.adopted_by is not None:
                    writer.add(adoption_record(handle.adopted_by, manifest.attempt))
                scope = self._open_scope(
                    run_id,
                    lambda e: emit(
                        "agent_escalated", agent=e.actor, error=error_message(e), level="warning"
                    ),
                )
                scope.emit_sink = handle.stream.publish  # agents' emit() reaches events() readers
                await self._attempt(handle, manifest, workflow, view, writer, outcome, scope)
        except BaseException as exc:
            # whatever a run stopped by its runtime raised on its way out (a
            # cancellation, or an error caused by it), it was interrupted; so
            # was one whose task trio chose to raise Ctrl-C's KeyboardInterrupt in
            stopped_here = isinstance(
                exc, anyio.get_cancelled_exc_class() | KeyboardInterrupt | SystemExit
            )
            if handle.interrupt_requested or stopped_here:
                with anyio.CancelScope(shield=True):
                    if scope is not None:  # agents stop before the run is marked
                        stopped = True
                        await scope.aclose(timeout=self.shutdown_timeout)
                    await store.update_run(run_id, status_change(RunStatus.INTERRUPTED))
                emit("run_interrupted")
                outcome.status = RunStatus.INTERRUPTED
            elif isinstance(exc, NewerFormatError) and not fresh:
                # sound data this code cannot read: the run is left to a newer
                # worker, and the attempt it took is given back
                with anyio.CancelScope(shield=True):
                    await store.update_run(run_id, left_for_newer)
                emit("run_left_for_newer_code", error=error_message(exc), level="warning")
                outcome.status = RunStatus.INTERRUPTED
            elif isinstance(exc, Exception) and not fresh:
                # the run stays as it was, for a later recover(); what stopped it is kept
                error = _unrecoverable(run_id, exc)
                with anyio.CancelScope(shield=True):
                    await self._note_recovery_error(run_id, exc, emit)
                if error is not exc:
                    outcome.error = error
                    raise error from exc
            outcome.error = exc
            raise
        finally:
            # one shielded scope: stop the agents (if still running), then release
            with anyio.CancelScope(shield=True):
                try:
                    if scope is not None and not stopped:
                        await scope.aclose(timeout=self.shutdown_timeout)
                    for placer in outcome.placers:
                        await placer.release(run_id)
                finally:
                    if handle.heartbeat is not None:  # a renewal racing the release would fail
                        handle.heartbeat.cancel()
                    try:
                        await store.release(lease)
                    except StorageError as exc:
                        emit("lease_release_failed", error=error_message(exc), level="warning")
            handle.metrics.update(
                elapsed=round(time.perf_counter() - started, 6), peak_memory=peak_memory()
            )
            emit("run_finished", status=str(outcome.status), metrics=dict(handle.metrics))
            handle.finish(outcome.status, result=outcome.result, error=outcome.error)
        policy = self.config.retention
        if outcome.status is not RunStatus.COMPLETED or policy is None:
            return False
        written = int(handle.metrics.get("checkpoints", 0))
        return not (fresh and _nothing_to_prune(policy, written))

    async def _note_recovery_error(
        self, run_id: str, cause: BaseException, emit: Callable[..., None]
    ) -> None:
        """Keep why this attempt failed in the manifest (``recovery_errors``), if the store can."""
        change = functools.partial(recovery_failed, cause=ErrorInfo.of(cause))
        try:
            await self.store.update_run(run_id, change)
        except StorageError as exc:
            emit("recovery_error_not_kept", error=error_message(exc), level="warning")

    async def _note_progress(self, handle: RunTracker, run_id: str, attempt: int) -> None:
        """Keep in the manifest that recovery ``attempt`` made progress, if the store can."""
        try:
            await update_run_unsynced(
                self.store, run_id, functools.partial(progressed, attempt=attempt)
            )
        except StorageError as exc:
            # it then counts as an attempt without progress: an earlier end, never a later one
            handle.emit("recovery_progress_not_kept", error=error_message(exc), level="warning")

    async def _attempt(
        self,
        handle: RunTracker,
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
        store = self.store
        run_id = manifest.run_id
        input_type, _ = run_signature(cls)
        checkpointer = self._checkpointer()
        queue = CheckpointQueue(store=store, writer=writer, emit=handle.emit)
        recorder = Recorder(
            run_id=run_id,
            store=store,
            writer=writer,
            view=view,
            config=self.config,
            request_snapshot=lambda s: queue.offer(s, checkpointer.send_nowait),
            emit=handle.emit,
        )
        if manifest.attempt > manifest.progressed_attempt:
            # a recovery attempt: the first record it makes durable is progress
            note = functools.partial(self._note_progress, handle, run_id, manifest.attempt)
            recorder.on_progress(writer.position, note)
        agents = RunAgents(scope, recorder, self._placer_for, outcome.placers)
        # before the run's task group: a state that cannot be restored (an
        # IncompatibleStateError) reaches the caller as itself
        restored = await agents.restore_all()
        value: object = None
        try:
            value = decode(manifest.input, input_type, f"input of run {run_id}")
        except CorruptedDataError as exc:
            # no attempt can ever start from this input: the run fails, with the cause stored
            outcome.failed(run_id, exc)
        async with anyio.create_task_group() as tg:
            signals = SignalDesk(
                store,
                run_id,
                view.inbox_taken,
                poll_interval=self.config.signal_poll_interval,
                task_group=tg,
                on_cancel=handle.cancel,
            )
            signals.start(self._watch_clock)
            env = StepEnv(
                recorder=recorder,
                agents=agents,
                config=self.config,
                task_group=tg,
                signals=signals,
                children=self._children,
            )
            env.publish = handle.stream.publish
            ctx = RunContext(env)
            updates = UpdateRunner(env, ctx, tg)
            signals.on_update = updates.offer
            result = None
            recorder.flush_behind(tg)
            try:
                if outcome.status is RunStatus.RUNNING:
                    handle.emit("run_started", workflow=manifest.workflow, agents_restored=restored)
                    result = await _execute(handle, env, cls, value, ctx, outcome, updates)
            finally:
                # the outcome's own flush carries what is left; a waiting timer
                # would only hold the task group open
                recorder.stop_flushing_behind()
                signals.stop()
                updates.stop()
            await _store_outcome(handle, recorder, queue, outcome, result)
        handle.checkpoints_written = queue.wait_idle
        handle.metrics.update(
            view.metrics,
            checkpoints=queue.written + queue.queued,
            checkpoint_failures=queue.failed,
            checkpoint_bytes=queue.bytes_written,
            checkpoint_write_ms=round(queue.write_seconds * 1000, 3),
            recoveries=manifest.attempt,
        )


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


async def _heartbeat(store: Store, lease: Lease, interval: float, handle: RunTracker) -> None:
    """Keep the run's lease alive until the run releases it; stop if it is lost.

    A lost lease (another owner took the run) is not this task's to act on:
    the run's next write is refused (``LeaseLostError``) and ends its attempt,
    and the runtime's other runs must not stop with it.
    """
    assert handle.heartbeat is not None
    with handle.heartbeat:
        while True:
            await anyio.sleep(interval)
            try:
                lease = await store.renew(lease)
            except LeaseLostError:
                # a renewal already under way when the run stopped it (asyncio
                # delivers a cancellation at the task's next wait) meets the release
                if not handle.heartbeat.cancel_called:
                    handle.emit("lease_lost", level="warning", epoch=lease.epoch)
                return


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


async def _execute(
    handle: RunTracker,
    env: StepEnv,
    cls: type[Any],
    value: object,
    ctx: RunContext,
    outcome: _Outcome,
    updates: UpdateRunner,
) -> bytes | None:
    """Run a fresh orchestrator from the top; return the encoded result if it completed."""
    run_id = ctx.run_id
    if handle.cancel_requested:  # cancelled before its code could start: none of it runs
        outcome.cancelled(run_id, handle.cancel_reason)
        return None
    encoded = None
    with anyio.CancelScope() as cancel_scope:
        handle.attach(cancel_scope)
        try:
            outcome.result = await _orchestrate(env, cls, value, ctx, updates)
            # a result that cannot be stored fails the run now, with that cause
            encoded = encode(outcome.result, f"result of run {run_id}")
            outcome.status = RunStatus.COMPLETED
        except PauseRun as pause:
            outcome.status = RunStatus.PAUSED
            outcome.error = RunPaused(run_id, pause.prompt, pause.deadline)
        except StorageError as exc:
            if isinstance(exc, EncodingError):
                # the run's own values (not the store) are at fault: it fails
                outcome.failed(run_id, exc)
            else:
                # The log itself failed: nothing more can be made durable. The
                # run stays as the store has it, for `recover()` to pick up later.
                outcome.error = exc
        except ClusterError as exc:
            # the cluster cannot take an agent now (its code not shipped, say):
            # the run stays as stored, for a later attempt, not failed by the deploy
            outcome.error = exc
        except Exception as exc:
            if handle.interrupt_requested:
                raise  # a consequence of the runtime stopping the run: it is interrupted
            diverged = _divergence(exc)
            if diverged is not None:
                outcome.blocked(run_id, diverged, env.config.code_version)
                handle.emit(
                    "run_blocked",
                    step_id=diverged.step_id,
                    error=error_message(diverged),
                    code_version=env.config.code_version,
                    level="warning",
                )
            else:
                outcome.failed(run_id, exc)
    # cancelling now changes nothing; the handle (kept by the runtime) lets go of
    # the scope and the tasks and scopes it still points to
    handle.attach(None)
    if cancel_scope.cancel_called and outcome.status is RunStatus.RUNNING:
        outcome.cancelled(run_id, handle.cancel_reason)
    return encoded


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


async def _orchestrate(
    env: StepEnv, cls: type[Any], value: object, ctx: RunContext, updates: UpdateRunner
) -> object:
    # A fresh instance on every attempt: its attributes are rebuilt by
    # replay, never restored, so nothing is applied twice.
    orchestrator = cls()
    orchestrator.name = "orchestrator"
    orchestrator._actorflow_emit = env.publish  # its emit(), as its agents'
    st = state_type(cls) if issubclass(cls, Actor) else type(None)
    orchestrator.state = st() if st is not type(None) else None
    updates.attach(orchestrator)
    result: object = await orchestrator.run(ctx, value)
    await close_namespace(env, ctx.root)
    await env.recorder.output_barrier()
    return result


async def _store_outcome(
    handle: RunTracker,
    recorder: Recorder,
    queue: CheckpointQueue,
    outcome: _Outcome,
    result: bytes | None,
) -> None:
    """Make the outcome durable, then tell the manifest and write the final snapshot.

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
    elif status is RunStatus.CANCELLED and handle.cancel_reason is not None:
        info = ErrorInfo(type="cancelled", message=handle.cancel_reason)
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
        if await _log_end(handle, recorder, outcome, RunEnd(status=status, result=result), change):
            await queue.write_final(final)
        return
    # any other is made durable whatever happens, but holds the runtime's
    # shutdown only as long as the runtime lets it (``RunTracker.shield``)
    with anyio.CancelScope(shield=True) as shielded:
        handle.shield(shielded)
        try:
            if status.finished:
                end = RunEnd(status=status, error=info)
                if not await _log_end(handle, recorder, outcome, end, change):
                    return
            else:
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


async def _settle(
    handle: RunTracker,
    store: Store,
    workflow: type[Any],
    view: RunView,
    end: RunEnd,
    outcome: _Outcome,
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


async def _log_end(
    handle: RunTracker,
    recorder: Recorder,
    outcome: _Outcome,
    end: RunEnd,
    change: Callable[[RunManifest], RunManifest],
) -> bool:
    """Append the run's end and make it durable; then update the manifest, its cache.

    The end record decides the run's status. One that cannot be made durable
    leaves the run unfinished (as the store has it, for ``recover``), the
    append's ``StorageError`` its error; returns False. Once the end is
    durable, a manifest that cannot be updated changes nothing but the
    outcome's error: a ``RunEndNotStoredError`` (``recover`` repairs the manifest).
    """
    recorder.record(end_record(end))
    try:
        await recorder.flush()
    except StorageError as exc:
        outcome.status, outcome.result, outcome.error = RunStatus.RUNNING, None, exc
        handle.emit("run_end_not_logged", error=error_message(exc), level="warning")
        return False
    try:
        await update_run_unsynced(recorder.store, recorder.run_id, change)
    except StorageError as exc:
        error = RunEndNotStoredError(recorder.run_id, str(end.status), error_message(exc))
        error.__cause__ = exc
        outcome.error = error
        handle.emit("run_end_not_stored", error=error_message(exc), level="warning")
    return True


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
