"""One attempt at a run, in order: load what is recorded, restore the agents, execute, finish.

The order is the recovery contract: the caller has already taken the run
(lock or lease), and a heartbeat keeps a lease alive while the attempt runs;
the newest valid snapshot plus the log after it becomes the run's view;
agents come back with their crash-time states; a fresh orchestrator runs
from the top, replaying recorded steps and running the rest live; the
outcome is stored with a final snapshot; the agents stop and the run is let
go before its handle hears the outcome. How an attempt ends (its status and
what is stored of it) is ``_ending``'s. First starts, recoveries, resumes and
forks all go through ``RunDriver.drive``.
"""

from __future__ import annotations

import functools
import time
from typing import TYPE_CHECKING, Any

import anyio
import msgspec

from actorflow._text import error_message
from actorflow.errors import CorruptedDataError, LeaseLostError, StorageError
from actorflow.runtime.actors import Actor, state_type
from actorflow.runtime.workflow._adoption import adoption_record
from actorflow.runtime.workflow._agents import RunAgents
from actorflow.runtime.workflow._checkpointer import CheckpointQueue
from actorflow.runtime.workflow._context import RunContext
from actorflow.runtime.workflow._determinism import guarded
from actorflow.runtime.workflow._ending import Outcome, cut_short, settle, store_outcome
from actorflow.runtime.workflow._env import StepEnv
from actorflow.runtime.workflow._outcomes import progressed, recorded_end, run_signature
from actorflow.runtime.workflow._pruning import worth_pruning
from actorflow.runtime.workflow._recorder import Recorder
from actorflow.runtime.workflow._replay import RunView, load_view
from actorflow.runtime.workflow._signals import SignalDesk, WatchClock
from actorflow.runtime.workflow._tracing import start_run_trace
from actorflow.runtime.workflow._triggers import peak_memory
from actorflow.runtime.workflow._updates import UpdateRunner
from actorflow.runtime.workflow.steps import PauseRun, close_namespace
from actorflow.storage import (
    LogWriter,
    RunManifest,
    RunStatus,
    SupportsEventStream,
    update_run_unsynced,
)
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
    from actorflow.runtime.workflow._export import EmitExporter
    from actorflow.runtime.workflow._flow import FlowControl
    from actorflow.runtime.workflow._handle import RunTracker
    from actorflow.runtime.workflow._otel import RunTrace
    from actorflow.storage import Lease, Store

__all__ = ["RunDriver"]

STREAM_END_WAIT = 0.5
"""Seconds an attempt waits, at its end, for its streamed emits to reach the store."""


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
        exporter: writes the runs' ephemeral emits to the store's event
            stream (None: they stay in this process).
        flow: the runtime's clock and limiters.
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
        exporter: EmitExporter | None = None,
        flow: FlowControl,
    ) -> None:
        self.store = store
        self.flow = flow
        self._exporter = exporter
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
        outcome = Outcome()
        placers: set[AgentPlacer] = set()  # where the attempt placed agents, to release
        started = time.perf_counter()
        scope: ActorScope | None = None
        stopped = False

        async def stop_agents() -> None:
            nonlocal stopped
            if scope is not None and not stopped:
                stopped = True
                await scope.aclose(timeout=self.shutdown_timeout)

        trace = start_run_trace(self.config.tracing, manifest)  # None: tracing is off
        if trace is not None:
            trace.attach()
            trace.watch(self.flow.limiters)
        try:
            if trace is not None:
                await self._keep_trace(handle, run_id, trace)
            if fresh:
                view, replayed = RunView(run_id), 0
            elif trace is None:
                view, replayed = await load_view(store, run_id, emit)
            else:
                with trace.recovery():
                    view, replayed = await load_view(store, run_id, emit)
            handle.replayed_steps = replayed
            end = None if fresh else recorded_end(run_id, view.events)
            if end is not None:
                handle.replayed_steps = 0  # nothing replays: the log says how it ended
                await settle(handle, store, workflow, view, end, outcome)
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
                self._export(handle)
                await self._attempt(
                    handle, manifest, workflow, view, writer, outcome, placers, scope, trace
                )
        except BaseException as exc:
            error = await cut_short(
                exc,
                store=store,
                run_id=run_id,
                fresh=fresh,
                interrupting=handle.interrupt_requested,
                stop_agents=stop_agents,
                outcome=outcome,
                emit=emit,
            )
            if error is not exc:
                raise error from exc
            raise
        finally:
            # one shielded scope: stop the agents (if still running), then release
            with anyio.CancelScope(shield=True):
                try:
                    await stop_agents()
                    for placer in placers:
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
            if trace is not None:
                trace.end(str(outcome.status), outcome.error)
                trace.detach()
            handle.finish(outcome.status, result=outcome.result, error=outcome.error)
        written = int(handle.metrics.get("checkpoints", 0))
        return worth_pruning(outcome.status, self.config.retention, written=written, fresh=fresh)

    def _export(self, handle: RunTracker) -> None:
        """Send the attempt's ephemeral emits to the store's event stream, if it has one."""
        store = self.store
        if (
            self._exporter is not None
            and self.config.stream_emits
            and isinstance(store, SupportsEventStream)
        ):
            exporter, run_id = self._exporter, handle.run_id
            handle.stream.export(lambda: exporter.outbox(store.open_event_stream(run_id), run_id))

    async def _keep_trace(self, handle: RunTracker, run_id: str, trace: RunTrace) -> None:
        """Keep the attempt's run span in the manifest: a later attempt links to it."""
        traceparent = trace.traceparent
        try:
            await update_run_unsynced(
                self.store,
                run_id,
                lambda m: msgspec.structs.replace(m, trace_context=traceparent),
            )
        except StorageError as exc:
            # only the link from the next attempt's trace is lost
            handle.emit("trace_context_not_kept", error=error_message(exc), level="warning")

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
        outcome: Outcome,
        placers: set[AgentPlacer],
        scope: ActorScope,
        trace: RunTrace | None,
    ) -> None:
        """Restore the agents, run the orchestrator and store the outcome.

        The run's agents (in ``scope``) are stopped by the caller, after this.
        """
        store = self.store
        run_id = manifest.run_id
        input_type, _ = run_signature(cls)
        checkpointer = self._checkpointer()
        queue = CheckpointQueue(
            store=store,
            writer=writer,
            emit=handle.emit,
            journal=view.journal,
            journal_at=view.journal_at,
            history=view.history,
            run_id=run_id,
            fresh=view.snapshots_taken == 0,
        )
        queue.trace = trace
        recorder = Recorder(
            run_id=run_id,
            store=store,
            writer=writer,
            view=view,
            config=self.config,
            request_snapshot=lambda s: queue.offer(s, checkpointer.send_nowait),
            emit=handle.emit,
            attempt=manifest.attempt,
        )
        if manifest.attempt > manifest.progressed_attempt:
            # a recovery attempt: the first record it makes durable is progress
            note = functools.partial(self._note_progress, handle, run_id, manifest.attempt)
            recorder.on_progress(writer.position, note)
        agents = RunAgents(scope, recorder, self._placer_for, placers)
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
            signals.trace = trace
            signals.start(self._watch_clock)
            env = StepEnv(
                recorder=recorder,
                agents=agents,
                config=self.config,
                task_group=tg,
                signals=signals,
                children=self._children,
                flow=self.flow,
            )
            env.publish = handle.stream.publish
            env.trace = trace
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
            outbox = handle.stream.outbox
            if outbox is not None:  # readers elsewhere that see the run stop have its emits
                await outbox.end(STREAM_END_WAIT)
            await store_outcome(handle, recorder, queue, outcome, result)
        handle.checkpoints_written = queue.wait_idle
        handle.keeps_every_checkpoint = queue.keeps_every
        handle.metrics.update(
            view.metrics,
            checkpoints=queue.written + queue.queued,
            checkpoint_failures=queue.failed,
            checkpoint_bytes=queue.bytes_written,
            checkpoint_write_ms=round(queue.write_seconds * 1000, 3),
            recoveries=manifest.attempt,
        )


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


async def _execute(
    handle: RunTracker,
    env: StepEnv,
    cls: type[Any],
    value: object,
    ctx: RunContext,
    outcome: Outcome,
    updates: UpdateRunner,
) -> bytes | None:
    """Run a fresh orchestrator from the top; return the encoded result if it completed."""
    run_id = ctx.run_id
    if handle.cancel_requested:  # cancelled before its code could start: none of it runs
        outcome.stopped(run_id, handle)
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
            outcome.paused(run_id, pause.prompt, pause.deadline)
        except Exception as exc:
            if not outcome.caught(
                run_id,
                exc,
                interrupting=handle.interrupt_requested,
                code_version=env.config.code_version,
                emit=handle.emit,
            ):
                raise  # a consequence of the runtime stopping the run: it is interrupted
    # cancelling now changes nothing; the handle (kept by the runtime) lets go of
    # the scope and the tasks and scopes it still points to
    handle.attach(None)
    if cancel_scope.cancel_called and outcome.status is RunStatus.RUNNING:
        outcome.stopped(run_id, handle)
    return encoded


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
    with guarded(ctx.run_id, env.config.determinism):
        result: object = await orchestrator.run(ctx, value)
    await close_namespace(env, ctx.root)
    await env.recorder.output_barrier()
    return result
