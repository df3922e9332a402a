"""The runs of one runtime: its lifetime, and every way a run comes to be driven.

:class:`Runs` is what ``Runtime`` delegates its workflow runs to. It holds
the handle table (a :class:`RunTable`: live runs, and the newest finished
ones), creates runs (one function for ``start``, ``submit`` and child
runs), takes stored ones (the claim, then the manifest marked running under
it, counting a recovery attempt), and drives them here through the
:class:`RunDriver`, or hands them to a cluster and follows them from the
store. Recovery, child runs, the adopter and the follower all take a run
through it, so a run is claimed in one place, whoever asks for it. It also
starts and stops the runtime around its runs (``enter``, ``exit``): the
actor system, the cluster, a worker's loops, retention still pruning
(a :class:`Pruner`), the runs interrupted before any actor stops.
"""

from __future__ import annotations

import functools
import os
import uuid
from typing import TYPE_CHECKING, Any

import anyio
import msgspec

from actorflow._log import get_logger
from actorflow.errors import (
    ActorDefinitionError,
    RecoveryFailedError,
    RunInputMismatchError,
    RunLockedError,
    RuntimeNotRunningError,
)
from actorflow.runtime.actors import class_name, is_abstract, register
from actorflow.runtime.workflow._adoption import Adopter
from actorflow.runtime.workflow._attempt import RunDriver
from actorflow.runtime.workflow._checkpointer import Checkpointer
from actorflow.runtime.workflow._children import RuntimeChildren
from actorflow.runtime.workflow._cluster import LimitsCluster, RunFollower
from actorflow.runtime.workflow._ending import status_change
from actorflow.runtime.workflow._export import EmitExporter
from actorflow.runtime.workflow._fork import copy_for_fork
from actorflow.runtime.workflow._handle import RunHandle, RunTracker
from actorflow.runtime.workflow._outcomes import (
    decode_result,
    finished_error,
    new_manifest,
    taken,
    workflow_class,
)
from actorflow.runtime.workflow._pruning import Pruner
from actorflow.runtime.workflow._queues import (
    QueueTable,
    check_dedup_key,
    run_fields,
    submit_deduplicated,
)
from actorflow.runtime.workflow._recovery import ORPHANS, Recovery
from actorflow.runtime.workflow._run_table import RunTable
from actorflow.runtime.workflow._schedules import (
    Scheduler,
    schedule_store,
)
from actorflow.runtime.workflow._signals import WatchClock, cancel_stored
from actorflow.storage import (
    RunManifest,
    RunStatus,
    ScheduleStore,
    SharedLimits,
    Store,
    open_store,
    update_run_unsynced,
    validate_run_id,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

    from anyio.abc import TaskGroup

    from actorflow.runtime.actors import ActorRef, ActorSystem
    from actorflow.runtime.workflow._adoption import AdoptionPolicy
    from actorflow.runtime.workflow._cluster import Cluster, ClusterRuntime
    from actorflow.runtime.workflow._config import RuntimeConfig
    from actorflow.runtime.workflow._flow import FlowControl

__all__ = ["Runs"]

_log = get_logger("actorflow.runtime")


def _unchanged(manifest: RunManifest) -> RunManifest:
    return manifest


class Runs:
    """The runs of one runtime: see the module's docstring.

    Args:
        system: the actor system the runs' agents, checkpointer and tasks live in.
        store: where runs live (``Runtime``'s ``store`` argument; opened on first use).
        config: the runtime's workflow options.
        owner: the runtime's owner name (what its claims and manifests say).
        cluster: where runs go; ``None``: this process.
        flow: the runtime's clock and limiters (schedules read its time).
        queues: the queues ``submit`` may name.
    """

    def __init__(
        self,
        system: ActorSystem,
        *,
        store: Store | str | os.PathLike[str] | None,
        config: RuntimeConfig,
        owner: str,
        cluster: Cluster | None,
        flow: FlowControl,
        queues: QueueTable | None = None,
    ) -> None:
        self._system = system
        self.flow = flow
        self.queues = queues or QueueTable()
        self.scheduler: Scheduler | None = None
        self._store_spec = store
        self._store: Store | None = store if isinstance(store, Store) else None
        self.config = config
        self.owner = owner
        self.cluster = cluster
        self.pruner = Pruner()
        self.exporter = EmitExporter()
        self.stopping = False
        """Whether the runtime began to stop: no run starts from here on."""
        self.adopter: Adopter | None = None
        self._adopting: anyio.CancelScope | None = None
        self.table = RunTable()
        """The handles of the runs it drives or follows, and of the newest finished."""
        self._follower: RunFollower | None = None
        self._checkpointer: ActorRef[Checkpointer] | None = None
        self._driver: RunDriver | None = None

    @property
    def shutdown_timeout(self) -> float:
        """Seconds what a run does as the runtime stops gets (the actor system's)."""
        return self._system.shutdown_timeout

    # --- the store ------------------------------------------------------------

    @property
    def store(self) -> Store:
        """The store runs live in (opened on first use)."""
        if self._store is None:
            spec = self._store_spec or os.environ.get("ACTORFLOW_STORE") or ".actorflow"
            assert not isinstance(spec, Store)
            self._store = open_store(os.fspath(spec))
        return self._store

    async def _close_store(self) -> None:
        """Close the store if this object opened it (a ``Store`` passed in is the caller's)."""
        if self._store is not None and not isinstance(self._store_spec, Store):
            with anyio.CancelScope(shield=True):
                await self._store.aclose()

    # --- the runtime's lifetime -------------------------------------------------

    async def enter(
        self,
        runtime: ClusterRuntime,
        *,
        cluster: Cluster | None,
        adoption: AdoptionPolicy | None,
    ) -> None:
        """``runtime`` enters ``async with``: its actor system, its runs, its cluster, its worker.

        The actor system starts first; then runs are accepted again, the
        cluster is opened with ``runtime`` at hand, and with ``adoption`` the
        runtime becomes a worker. What fails after the actor system started
        stops it again.

        Raises:
            ConfigurationError: ``adoption`` on a store that keeps no index of unfinished runs.
        """
        await self._system.__aenter__()
        self.stopping = False
        self._follower = None
        try:
            if cluster is not None:
                await cluster.open(runtime)
            if adoption is not None:
                self._start_adopting(adoption)
        except BaseException:
            await self._system.__aexit__(None, None, None)
            raise

    async def exit(self, exc_info: tuple[Any, ...], *, cluster: Cluster | None) -> None:
        """The runtime leaves ``async with`` (``exc_info``: how): everything stops, in order.

        No new run or adoption first; retention finishes what finished runs
        started (after a clean exit, within ``shutdown_timeout``); live runs
        are interrupted before any actor stops (:meth:`_interrupt_all`); the
        cluster is let go; then the actor system stops. Whatever happens,
        the emits the runs queued reach the store (bounded) and a store this
        object opened is closed.
        """
        self._begin_stop()
        try:
            if exc_info[1] is None:
                await self.pruner.settle(self.shutdown_timeout)
            await self._interrupt_all()
            if cluster is not None:
                with anyio.CancelScope(shield=True):
                    await cluster.aclose()
            await self._system.__aexit__(*exc_info)
        finally:
            with anyio.CancelScope(shield=True):
                # the runs ended their streams: what they queued reaches the store (bounded)
                await self.exporter.aclose(self.shutdown_timeout)
            await self._close_store()

    def _start_adopting(self, adoption: AdoptionPolicy) -> None:
        """Make the runtime a worker: adopt runs no live process drives, while it runs.

        Raises:
            ConfigurationError: the store keeps no index of unfinished runs.
        """
        self.adopter = Adopter(
            self.store,
            adoption,
            self.recovery,
            queues=self.queues,
            owner=self.owner,
            clock=self.flow.clock.now,
        )
        if isinstance(self.store, ScheduleStore):
            self.scheduler = Scheduler(
                schedule_store(self.store), self.store, self.flow.clock, self.adopter.nudge
            )
        self._adopting = anyio.CancelScope()
        self._system.require_running("adopt runs").start_soon(
            self._adopt_runs, self.adopter, self.scheduler, self._adopting
        )

    async def _adopt_runs(
        self, adopter: Adopter, scheduler: Scheduler | None, scope: anyio.CancelScope
    ) -> None:
        with scope:
            async with anyio.create_task_group() as tg:
                if scheduler is not None:
                    tg.start_soon(scheduler.run, adopter.policy.poll_interval)
                await adopter.run()

    def adopt_now(self) -> None:
        """See ``Runtime.adopt_now``."""
        if self.adopter is not None:
            self.adopter.nudge()
        if self.scheduler is not None:
            self.scheduler.nudge()

    def _begin_stop(self) -> None:
        """The runtime begins to stop: no new run, no new adoption (adopted runs stop later)."""
        self.stopping = True
        if self._adopting is not None:
            self._adopting.cancel()

    async def _interrupt_all(self) -> None:
        """Interrupt every live run and wait for each to be marked so (bounded).

        Runs stop before any actor does: a run whose agents (or checkpoint
        actor) stopped first would see its steps fail and be stored failed,
        or wait for a snapshot nobody writes. Each run gets ``shutdown_timeout``
        for what it does shielded (storing its outcome) and again for its
        agents to stop; what is still running after that is the actor
        system's to cancel.
        """
        timeout = self.shutdown_timeout
        # runs driven elsewhere (a cluster's hosts) go on without this process
        live = self._driven()
        for tracker in live:
            tracker.interrupt(timeout)
        # shielded: a body cancelled from outside (Ctrl-C on asyncio) still stops its runs
        with anyio.CancelScope(shield=True) as scope:
            scope.deadline = anyio.current_time() + 2 * timeout
            for tracker in live:
                await tracker.ended.wait()

    # --- the handle table -------------------------------------------------------

    def _driven(self) -> list[RunTracker]:
        """The trackers of the runs this process drives now (not those it follows)."""
        return self.table.driven(self._follower if self._follower is not None else ())

    @property
    def active(self) -> int:
        """See ``Runtime.active_runs``."""
        return len(self._driven())

    def tracker(self, run_id: str) -> RunTracker | None:
        """The tracker of run ``run_id`` if this runtime has one (live or kept finished)."""
        return self.table.tracker(run_id)

    def live(self, run_id: str) -> RunTracker | None:
        """The tracker of run ``run_id`` if it is live here (driven or followed)."""
        return self.table.live(run_id)

    def drives(self, run_id: str) -> bool:
        """Whether this runtime drives (or follows) run ``run_id`` now."""
        return self.table.live(run_id) is not None

    def _run_ended(self, tracker: RunTracker, prune: bool) -> None:
        """Apply retention if asked (off the run's path); keep the handle among the newest."""
        if prune:
            self.pruner.after_run(self.store, tracker, self.config.retention, self._system)
        self.table.finished(tracker)

    def accepting(self) -> TaskGroup:
        """The task group runs go in; refused once the runtime began to stop.

        Raises:
            RuntimeNotRunningError: outside ``async with``, or leaving it.
        """
        if self.stopping:  # a run started now would be interrupted at once
            raise RuntimeNotRunningError("start a run")
        return self._system.require_running("start a run")

    # --- creating runs ----------------------------------------------------------

    async def create(
        self,
        workflow: type[Any],
        input: Any,
        *,
        run_id: str | None,
        queued: bool = False,
        parent_run: str | None = None,
        parent_step: str | None = None,
        fields: Mapping[str, Any] | None = None,
    ) -> tuple[RunManifest, bool]:
        """Record a new run (or find the one stored under ``run_id``): ``(manifest, created)``.

        The one way a run is created: by ``start`` (running, owned here), by
        ``submit`` (``queued``, owned by nobody) and for a child run
        (``parent_run``, ``parent_step``). ``run_id`` ``None``: a new id.
        ``fields``: more manifest fields (a queued run's queue, priority and
        dedup key; a scheduled run's schedule). A dedup key's run is created
        under the key's run id, or the key's unfinished run is found.

        Raises:
            InvalidRunIdError: ``run_id`` is not a valid run id.
            RunInputMismatchError: ``run_id`` exists with a different input.
            RunInputTypeError: ``input`` does not fit the workflow's input type
                (nothing is stored).
        """
        register(workflow)
        run_id = validate_run_id(run_id) if run_id is not None else uuid.uuid4().hex
        manifest = new_manifest(
            workflow,
            input,
            run_id=run_id,
            owner=None if queued else self.owner,
            code_version=self.config.code_version,
        )
        if queued:
            manifest = msgspec.structs.replace(manifest, status=RunStatus.QUEUED)
        if parent_run is not None:
            manifest = msgspec.structs.replace(
                manifest, parent_run=parent_run, parent_step=parent_step
            )
        if fields:
            manifest = msgspec.structs.replace(manifest, **fields)
        if manifest.dedup_key is not None:
            return await submit_deduplicated(
                self.store, manifest, manifest.queue, manifest.dedup_key
            )
        stored, created = await self.store.create_run(manifest)
        if not created and stored.input_hash != manifest.input_hash:
            raise RunInputMismatchError(run_id)
        return stored, created

    async def start(self, workflow: type[Any], input: Any, run_id: str | None) -> RunHandle:
        """See ``Runtime.start``."""
        _require_concrete(workflow, "a workflow is a subclass of it")
        register(workflow)
        self.accepting()  # before the run is recorded: none is left behind unstarted
        if self.cluster is not None and self.cluster.drives_runs:
            return await self._start_elsewhere(workflow, input, run_id)
        stored, created = await self.create(workflow, input, run_id=run_id)
        if created:
            return await self.launch(workflow, stored, fresh=True)
        live = self.live(stored.run_id)
        if live is not None:
            return live.handle
        if stored.status in ORPHANS:
            if await self.store.is_owned(stored.run_id):
                raise RunLockedError(stored.run_id, stored.owner)
            return await self.launch(workflow, stored)
        return self._ended(stored, workflow)

    async def submit(
        self,
        workflow: type[Any],
        input: Any,
        run_id: str | None,
        *,
        queue: str | None = None,
        priority: int = 0,
        dedup_key: str | None = None,
    ) -> str:
        """See ``Runtime.submit``."""
        _require_concrete(workflow, "submit a subclass of it")
        if queue is not None:
            self.queues.require(queue)
        if dedup_key is not None:
            check_dedup_key(dedup_key, run_id)
        fields = run_fields(queue, priority, dedup_key)
        stored, created = await self.create(
            workflow, input, run_id=run_id, queued=True, fields=fields
        )
        if created:
            self.adopt_now()
        return stored.run_id

    async def _start_elsewhere(
        self, workflow: type[Any], input: Any, run_id: str | None
    ) -> RunHandle:
        """``start`` on a cluster: store the run queued, have the cluster drive it, follow it."""
        assert self.cluster is not None
        run_id = await self.submit(workflow, input, run_id)
        handle = await self.follow(run_id, workflow)
        if not handle.done:
            # a run some host drives already just refuses to be driven twice
            await self.cluster.dispatch(run_id)
        return handle

    async def start_child(
        self,
        workflow: type[Any],
        input: Any,
        *,
        child_id: str,
        parent_run: str,
        parent_step: str,
    ) -> RunManifest | None:
        """Create a child run and drive it here, or take the stored one (see :meth:`drive_child`).

        Raises:
            RunInputMismatchError: the child exists with another input.
        """
        self.accepting()
        stored, created = await self.create(
            workflow, input, run_id=child_id, parent_run=parent_run, parent_step=parent_step
        )
        if created:
            await self.launch(workflow, stored, fresh=True)
            return None
        return await self._drive_stored_child(workflow, stored)

    async def drive_child(self, workflow: type[Any], stored: RunManifest) -> RunManifest | None:
        """Drive a stored child run here if no one does; its manifest if it has finished.

        Like ``recover`` for an orphaned child (the claim decides who drives
        it: a ``recover()`` running beside this never drives it twice).
        Returns None if it is live here or in another process, or waits:
        whoever finishes it posts its end to its parent.

        Raises:
            RuntimeNotRunningError: the runtime is not running, or stops.
        """
        self.accepting()
        return await self._drive_stored_child(workflow, stored)

    async def _drive_stored_child(
        self, workflow: type[Any], stored: RunManifest
    ) -> RunManifest | None:
        if self.live(stored.run_id) is not None:
            return None
        if stored.status in ORPHANS:
            try:
                _, driven = await self.take_and_drive(
                    workflow, stored, fresh=False, recovering=True
                )
            except RunLockedError:
                return None  # another live owner drives it
            if driven:
                return None
            stored = await self.store.read_run(stored.run_id)
        return stored if stored.status.finished else None

    async def fork(
        self,
        run_id: str,
        checkpoint: str,
        new_run_id: str | None,
        edit: Mapping[str, object] | None = None,
    ) -> RunHandle:
        """See ``Runtime.fork``."""
        source = await self.store.read_run(validate_run_id(run_id))
        tracker = self.tracker(run_id)
        if tracker is not None and tracker.done and tracker.checkpoints_written is not None:
            # its phase ends may still be queued after it returned: fork from them too
            await tracker.checkpoints_written()
        workflow = workflow_class(source)
        new_id = (
            validate_run_id(new_run_id)
            if new_run_id
            else f"{run_id[:80]}-fork-{uuid.uuid4().hex[:8]}"
        )
        stored = await copy_for_fork(self.store, source, checkpoint, new_id, edit)
        return await self.launch(workflow, stored)

    @functools.cached_property
    def children(self) -> RuntimeChildren:
        """What runs' steps start child runs through (``ctx.start_child``)."""
        return RuntimeChildren(self)

    @functools.cached_property
    def recovery(self) -> Recovery:
        """What ``recover()`` and a worker's adoptions go through."""
        return Recovery(self)

    # --- following runs driven elsewhere ----------------------------------------

    async def follow(self, run_id: str, workflow: type[Any] | None = None) -> RunHandle:
        """See ``Runtime.follow``."""
        task_group = self.accepting()
        live = self.live(run_id)
        if live is not None:
            return live.handle
        manifest = await self.store.read_run(validate_run_id(run_id))
        if workflow is None:
            try:
                workflow = workflow_class(manifest)
            except Exception:  # not imported here: the result comes back as plain data
                workflow = None
        if manifest.status.finished:
            return self._ended(manifest, workflow)
        if self._follower is None:
            self._follower = RunFollower(self, poll_interval=self.config.signal_poll_interval)
            task_group.start_soon(self._follower.run)
        tracker = RunTracker(run_id, manifest.workflow)
        self.table.add(tracker)
        self._follower.follow(tracker, workflow)
        return tracker.handle

    def _ended(self, stored: RunManifest, workflow: type[Any] | None = None) -> RunHandle:
        """A handle on a run that is not to be driven: its stored result or what it ended as."""
        tracker = RunTracker(stored.run_id, stored.workflow)
        if stored.status is RunStatus.COMPLETED:
            tracker.finish(stored.status, result=decode_result(stored, workflow))
        else:
            tracker.finish(stored.status, error=finished_error(stored))
        return tracker.handle

    # --- cancelling -------------------------------------------------------------

    async def cancel(self, run_id: str, reason: str | None) -> None:
        """See ``Runtime.cancel``."""
        live = self.live(run_id)
        if live is not None:
            live.cancel(reason)
            await live.ended.wait()
            return
        await self.cancel_stored(run_id, reason)

    async def cancel_stored(self, run_id: str, reason: str | None) -> None:
        """Cancel a run through the store (a request in its inbox, or its manifest)."""
        await cancel_stored(self.store, validate_run_id(run_id), reason, sender=self.owner)

    # --- taking and driving -----------------------------------------------------

    async def launch(
        self,
        workflow: type[Any],
        manifest: RunManifest,
        *,
        fresh: bool = False,
        recovering: bool = False,
    ) -> RunHandle:
        """Take the run, mark it running (counting a recovery attempt), drive it.

        A run that finished or paused while this process waited for its claim
        (another process recovered it meanwhile) is never driven again: the
        handle holds its stored outcome.
        """
        return (await self.take_and_drive(workflow, manifest, fresh=fresh, recovering=recovering))[
            0
        ]

    async def take_and_drive(
        self,
        workflow: type[Any],
        manifest: RunManifest,
        *,
        fresh: bool,
        recovering: bool,
        adopting: bool = False,
    ) -> tuple[RunHandle, bool]:
        """:meth:`launch`, also saying whether the run is driven now, here or by the cluster.

        ``False``: it had ended (or paused) by the time it was taken. On a
        cluster that drives runs (``RayCluster``) a stored run is handed to
        it and followed from here, never driven in this process: what
        ``recover``, ``resume`` and ``fork`` take goes to the cluster's hosts.
        """
        if not fresh and self.cluster is not None and self.cluster.drives_runs:
            handle = await self.follow(manifest.run_id, workflow)
            if not handle.done:
                await self.cluster.dispatch(manifest.run_id)
            return handle, not handle.done
        try:
            task_group = self.accepting()
        except RuntimeNotRunningError:
            if fresh and self.stopping:
                # recorded by `start` just before the runtime began to stop:
                # interrupted, like every run the stop caught, for recover()
                with anyio.CancelScope(shield=True):
                    await self.store.update_run(
                        manifest.run_id, status_change(RunStatus.INTERRUPTED)
                    )
            raise
        lease = await self.store.claim(manifest.run_id, self.owner)
        if not fresh:  # a new run's manifest was created running, with this owner
            try:
                taken_over = await self._take(manifest.run_id, recovering=recovering)
            except BaseException:
                with anyio.CancelScope(shield=True):  # a cancelled taker lets go all the same
                    await self.store.release(lease)
                raise
            if taken_over.status is not RunStatus.RUNNING or taken_over.owner != self.owner:
                await self.store.release(lease)
                _log.info("run_not_orphaned", run_id=manifest.run_id, status=str(taken_over.status))
                return self._ended(taken_over, workflow), False
            manifest = taken_over
        tracker = RunTracker(manifest.run_id, manifest.workflow)
        if adopting:
            tracker.adopted_by = self.owner
        self.table.add(tracker)
        task_group.start_soon(
            self._run_driver.drive_in_background, tracker, manifest, workflow, lease, fresh
        )
        if manifest.parent_run is not None:  # a child run: its end goes to its parent
            self.children.follow(tracker, manifest.parent_run)
        return tracker.handle, True

    async def _take(self, run_id: str, *, recovering: bool) -> RunManifest:
        """Mark a claimed run running with this owner, if it is still an orphan.

        The status is read again under the claim: the manifest this process
        listed may be stale by now (another process recovered the run while
        this one waited for the claim). A run past ``max_recovery_attempts``
        is marked failed (``RecoveryFailedError``); any other run that is no
        longer an orphan comes back unchanged. A recovery takes a blocked
        run too (``recover`` decided to try it).
        """
        current = await self.store.read_run(run_id)
        if current.status not in ORPHANS and not (
            recovering and current.status is RunStatus.BLOCKED
        ):
            return current
        limit = self.config.max_recovery_attempts if recovering else None
        # Unsynced: the claim, not the manifest, is what keeps other processes
        # out, so a power loss that takes this write leaves the run an orphan
        # as before, one attempt short in its count. That costs a take nothing.
        manifest = await update_run_unsynced(
            self.store,
            run_id,
            functools.partial(taken, owner=self.owner, limit=limit, unblock=recovering),
        )
        if manifest.status is RunStatus.FAILED and manifest.attempt > current.attempt:
            # no log record says so, so it is made durable before it is reported
            manifest = await self.store.update_run(run_id, _unchanged)
            assert manifest.error is not None
            raise RecoveryFailedError(manifest.run_id, manifest.error.message)
        return manifest

    @property
    def _run_driver(self) -> RunDriver:
        if self._driver is None:
            system = self._system
            store = self.store
            # rate windows live in the cluster, or in the store, when either shares them
            cluster: object = self.cluster  # a Cluster, and maybe a LimitsCluster too
            if isinstance(cluster, LimitsCluster):
                self.flow.limiters.share(cluster.shared_limits())
            else:
                self.flow.limiters.share(store if isinstance(store, SharedLimits) else None)
            self._driver = RunDriver(
                store=self.store,
                config=self.config,
                shutdown_timeout=system.shutdown_timeout,
                open_scope=lambda run_id, escalate: system.open_scope(run_id, on_escalate=escalate),
                checkpointer=self._checkpointer_ref,
                on_finished=self._run_ended,
                children=self.children,
                placer_for=self.cluster.placer_for if self.cluster is not None else None,
                watch_clock=WatchClock(lambda: system.require_running("watch a run's inbox")),
                exporter=self.exporter,
                flow=self.flow,
            )
        return self._driver

    def _checkpointer_ref(self) -> ActorRef[Checkpointer]:
        if self._checkpointer is None or not self._checkpointer.alive:
            self._checkpointer = self._system.spawn_now(
                Checkpointer, name="actorflow.checkpointer", mailbox_size=1_000_000
            )
        return self._checkpointer


def _require_concrete(workflow: type[Any], advice: str) -> None:
    """Refuse a base class (``Orchestrator`` itself) as a run's workflow.

    Raises:
        ActorDefinitionError: ``workflow`` is abstract.
    """
    if is_abstract(workflow):
        raise ActorDefinitionError(
            class_name(workflow),
            f"is a base class; {advice} that defines `async def run(self, ctx, input)`",
        )
