"""The public ``Runtime``: actors (from the core) plus durable workflow runs."""

from __future__ import annotations

import collections
import functools
import os
import socket
import uuid
from typing import TYPE_CHECKING, Any, Literal

import anyio
import msgspec

from actorflow._log import get_logger
from actorflow.errors import (
    ActorDefinitionError,
    ConfigurationError,
    RecoveryFailedError,
    RunInputMismatchError,
    RunLockedError,
    RunNotFinishedError,
    RunNotFoundError,
    RunNotPausedError,
    RuntimeNotRunningError,
)
from actorflow.runtime.actors import ActorSystem, class_name, is_abstract, register
from actorflow.runtime.workflow._adoption import Adopter, AdopterHooks, AdoptionPolicy
from actorflow.runtime.workflow._attempt import RunDriver
from actorflow.runtime.workflow._checkpointer import Checkpointer
from actorflow.runtime.workflow._children import RuntimeChildren
from actorflow.runtime.workflow._cluster import RunFollower
from actorflow.runtime.workflow._config import RuntimeConfig
from actorflow.runtime.workflow._ending import status_change
from actorflow.runtime.workflow._export import EmitExporter
from actorflow.runtime.workflow._fork import copy_for_fork
from actorflow.runtime.workflow._handle import R, RunHandle, RunTracker
from actorflow.runtime.workflow._outcomes import (
    decode_result,
    finished_error,
    new_manifest,
    taken,
    workflow_class,
)
from actorflow.runtime.workflow._pruning import Pruner
from actorflow.runtime.workflow._query import RunQuery, query_run
from actorflow.runtime.workflow._recovery import ORPHANS, Recovery, woken
from actorflow.runtime.workflow._replay import load_view
from actorflow.runtime.workflow._signals import (
    WatchClock,
    cancel_stored,
    send_signal,
)
from actorflow.runtime.workflow._updates import call_update
from actorflow.runtime.workflow._wait_records import pending_waits, signal_type
from actorflow.runtime.workflow._watch import DEFAULT_POLL_INTERVAL, watch_run
from actorflow.storage import (
    InboxEntry,
    RunManifest,
    RunStatus,
    Store,
    open_store,
    update_run_unsynced,
    validate_run_id,
)

if TYPE_CHECKING:
    from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
    from typing import Self

    from anyio.abc import TaskGroup

    from actorflow.runtime.actors import ActorRef
    from actorflow.runtime.workflow._cluster import Cluster
    from actorflow.runtime.workflow._outcomes import Workflow
    from actorflow.runtime.workflow._watch import WatchEvent

__all__ = ["Runtime"]

_log = get_logger("actorflow.runtime")


def _unchanged(manifest: RunManifest) -> RunManifest:
    return manifest


KEPT_FINISHED_HANDLES = 1000
"""How many finished runs' handles a runtime keeps (live runs' handles are all kept)."""


class Runtime(ActorSystem):
    """Runs actors and durable workflow runs: ``async with Runtime(store=...) as rt``.

    Args:
        store: where runs live: a ``Store``, a folder path, or ``s3://bucket/prefix``;
            default ``$ACTORFLOW_STORE`` or ``./.actorflow``. Only workflow runs
            touch it: a runtime used for plain actors never opens it.
        config: workflow options (durability, triggers, retention, retries...);
            default ``RuntimeConfig.from_env()``.
        adopt_orphans: make this runtime a worker: while it runs, it keeps
            looking for runs no live process drives (orphaned, queued, paused
            with a wait that can resolve) and recovers them. ``True`` uses the
            default :class:`AdoptionPolicy`. See docs/scale-out.md.
        cluster: where runs and placed agents go (``actorflow.ray.RayCluster``):
            runs it drives elsewhere are stored, handed to it and followed
            through the store; ``None`` (the default): all in this process.
        mailbox_size, supervisor, shutdown_timeout: see the actor runtime.

    .. versionchanged:: 0.4
       ``adopt_orphans``, ``cluster``.
    """

    def __init__(
        self,
        *,
        store: Store | str | os.PathLike[str] | None = None,
        config: RuntimeConfig | None = None,
        adopt_orphans: bool | AdoptionPolicy = False,
        cluster: Cluster | None = None,
        **actor_options: Any,
    ) -> None:
        super().__init__(**actor_options)
        self.cluster = cluster
        """Where runs and placed agents go; ``None``: this process."""
        self._follower: RunFollower | None = None
        if adopt_orphans is True:
            adopt_orphans = AdoptionPolicy()
        self.adoption: AdoptionPolicy | None = adopt_orphans or None
        """The adoption policy of a worker runtime; ``None`` if it adopts nothing."""
        self._adopter: Adopter | None = None
        self._adopting: anyio.CancelScope | None = None
        self._store_spec = store
        self._store: Store | None = store if isinstance(store, Store) else None
        self.config = config if config is not None else RuntimeConfig.from_env()
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._runs: dict[str, RunTracker] = {}
        self._finished: collections.deque[RunTracker] = collections.deque()
        self._checkpointer: ActorRef[Checkpointer] | None = None
        self._pruner = Pruner()
        self._driver: RunDriver | None = None
        self._stopping = False
        self._exporter = EmitExporter()

    @property
    def store(self) -> Store:
        """The store runs live in (opened on first use)."""
        if self._store is None:
            spec = self._store_spec or os.environ.get("ACTORFLOW_STORE") or ".actorflow"
            assert not isinstance(spec, Store)
            self._store = open_store(os.fspath(spec))
        return self._store

    async def __aexit__(self, *exc_info: Any) -> None:
        self._stopping = True
        if self._adopting is not None:  # no new adoption once stopping; adopted runs stop below
            self._adopting.cancel()
        try:
            if exc_info[1] is None and self._pruner.pending:
                # let retention finish what finished runs started, within the deadline
                with anyio.move_on_after(self.shutdown_timeout):
                    await self._pruner.wait()
            await self._interrupt_runs()
            if self.cluster is not None:
                with anyio.CancelScope(shield=True):
                    await self.cluster.aclose()
            await super().__aexit__(*exc_info)
        finally:
            with anyio.CancelScope(shield=True):
                # the runs ended their streams: what they queued reaches the store (bounded)
                await self._exporter.aclose(self.shutdown_timeout)
            if self._store is not None and not isinstance(self._store_spec, Store):
                with anyio.CancelScope(shield=True):
                    await self._store.aclose()

    async def _interrupt_runs(self) -> None:
        """Interrupt every live run and wait for each to be marked so (bounded).

        Runs stop before any actor does: a run whose agents (or checkpoint
        actor) stopped first would see its steps fail and be stored failed,
        or wait for a snapshot nobody writes. Each run gets ``shutdown_timeout``
        for what it does shielded (storing its outcome) and again for its
        agents to stop; what is still running after that is the actor
        system's to cancel.
        """
        followed = self._follower if self._follower is not None else ()
        # runs driven elsewhere (a cluster's hosts) go on without this process
        live = [t for t in self._runs.values() if not t.done and t.run_id not in followed]
        for tracker in live:
            tracker.interrupt(self.shutdown_timeout)
        # shielded: a body cancelled from outside (Ctrl-C on asyncio) still stops its runs
        with anyio.CancelScope(shield=True) as scope:
            scope.deadline = anyio.current_time() + 2 * self.shutdown_timeout
            for tracker in live:
                await tracker.ended.wait()

    @property
    def _runs_driver(self) -> RunDriver:
        if self._driver is None:
            self._driver = RunDriver(
                store=self.store,
                config=self.config,
                shutdown_timeout=self.shutdown_timeout,
                open_scope=lambda run_id, escalate: self.open_scope(run_id, on_escalate=escalate),
                checkpointer=self._checkpointer_ref,
                on_finished=self._run_ended,
                children=self._child_runs,
                placer_for=self.cluster.placer_for if self.cluster is not None else None,
                watch_clock=WatchClock(lambda: self.require_running("watch a run's inbox")),
                exporter=self._exporter,
            )
        return self._driver

    def _checkpointer_ref(self) -> ActorRef[Checkpointer]:
        if self._checkpointer is None or not self._checkpointer.alive:
            self._checkpointer = self.spawn_now(
                Checkpointer, name="actorflow.checkpointer", mailbox_size=1_000_000
            )
        return self._checkpointer

    # --- starting runs -------------------------------------------------------

    async def run(
        self, workflow: type[Workflow[R]], input: Any = None, *, run_id: str | None = None
    ) -> R:
        """Run ``workflow`` on ``input`` to the end and return its result.

        With the id of an existing run: a completed run's stored result comes
        back; an orphaned one resumes; a paused one raises ``RunPaused``. Type
        checkers see the result as what the workflow's ``run`` returns.

        Raises:
            RunPaused: the run waits for input (``resume`` it).
            RunBlockedError: its code no longer replays its log (a ``RunFailedError``;
                the ``NonDeterminismError`` is chained): see ``recover``.
            RunFailedError: the run failed; the cause is chained.
            RunLockedError: another live process owns the run.
            RunInputMismatchError: ``run_id`` exists with a different input.
            RunInputTypeError: ``input`` does not fit the workflow's input type
                (nothing is stored).
            RunEndNotStoredError: the run finished, but its manifest could not
                say so (its end record decides: ``recover`` repairs it).

        .. versionchanged:: 0.4
           Typed result; ``RunInputTypeError``.
        """
        handle = await self.start(workflow, input, run_id=run_id)
        return await handle.result()

    async def start(
        self, workflow: type[Workflow[R]], input: Any = None, *, run_id: str | None = None
    ) -> RunHandle[R]:
        """Start a run in the background and return its handle.

        The run is recorded in the store before any of its code runs, once
        its input decodes as the type the workflow's ``run`` declares for it.
        See :meth:`run` for what an existing ``run_id`` does.

        Raises:
            ActorDefinitionError: ``workflow`` is a base class (``Orchestrator``
                itself): subclass it and define ``run``.
            RunInputTypeError: ``input`` does not fit the workflow's input type
                (nothing is stored).

        .. versionchanged:: 0.4
           A ``RunHandle[R]`` typed by the workflow's result; ``RunInputTypeError``.
        """
        if is_abstract(workflow):
            raise ActorDefinitionError(
                class_name(workflow),
                "is a base class; a workflow is a subclass of it that defines "
                "`async def run(self, ctx, input)`",
            )
        register(workflow)
        self._accepting_runs()  # before the run is recorded: none is left behind unstarted
        if self.cluster is not None and self.cluster.drives_runs:
            return await self._start_elsewhere(workflow, input, run_id)
        run_id = validate_run_id(run_id) if run_id is not None else uuid.uuid4().hex
        manifest = new_manifest(
            workflow, input, run_id=run_id, owner=self.owner, code_version=self.config.code_version
        )
        stored, created = await self.store.create_run(manifest)
        if not created:
            return await self._existing(workflow, stored, manifest.input_hash)
        return await self._launch(workflow, stored, fresh=True)

    async def _start_elsewhere(
        self, workflow: type[Any], input: Any, run_id: str | None
    ) -> RunHandle:
        """``start`` on a cluster: store the run queued, have the cluster drive it, follow it."""
        assert self.cluster is not None
        run_id = await self.submit(workflow, input, run_id=run_id)
        handle = await self.follow(run_id, workflow)
        if not handle.done:
            # a run some host drives already just refuses to be driven twice
            await self.cluster.dispatch(run_id)
        return handle

    async def follow(self, run_id: str, workflow: type[Any] | None = None) -> RunHandle:
        """A handle on a run another process drives (a cluster's host, a worker).

        Its ``result``, ``wait``, ``status`` and ``cancel`` work through the
        store: the handle ends when the run finishes, pauses or is blocked,
        wherever it runs and however often its driver changes; ``events()``
        yields ``run_status`` lifecycle events (``watch`` has the steps).
        ``workflow`` types the result (default: plain data, unless the class
        is registered). A run this runtime drives itself gives its own handle.

        Raises:
            RunNotFoundError: no such run.
            RuntimeNotRunningError: outside ``async with``.

        .. versionadded:: 0.4
        """
        task_group = self._accepting_runs()
        live = self._runs.get(run_id)
        if live is not None and not live.done:
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
            self._follower = RunFollower(
                self.store,
                cancel=self._cancel_stored,
                poll_interval=self.config.signal_poll_interval,
            )
            task_group.start_soon(self._follower.run)
        tracker = RunTracker(run_id, manifest.workflow)
        self._runs[run_id] = tracker
        self._follower.follow(tracker, workflow)
        return tracker.handle

    @property
    def active_runs(self) -> int:
        """How many runs this runtime drives now (runs it only follows are not counted).

        .. versionadded:: 0.4
        """
        followed = self._follower if self._follower is not None else ()
        return sum(1 for t in self._runs.values() if not t.done and t.run_id not in followed)

    def _accepting_runs(self) -> TaskGroup:
        """The task group runs go in; refused once the runtime began to stop.

        Raises:
            RuntimeNotRunningError: outside ``async with``, or leaving it.
        """
        if self._stopping:  # a run started now would be interrupted at once
            raise RuntimeNotRunningError("start a run")
        return self.require_running("start a run")

    async def _existing(
        self, workflow: type[Any], stored: RunManifest, input_hash: str
    ) -> RunHandle:
        if stored.input_hash != input_hash:
            raise RunInputMismatchError(stored.run_id)
        live = self._runs.get(stored.run_id)
        if live is not None and not live.done:
            return live.handle
        if stored.status in ORPHANS:
            if await self.store.is_owned(stored.run_id):
                raise RunLockedError(stored.run_id, stored.owner)
            return await self._launch(workflow, stored)
        return self._ended(stored, workflow)

    def _ended(self, stored: RunManifest, workflow: type[Any] | None = None) -> RunHandle:
        """A handle on a run that is not to be driven: its stored result or what it ended as."""
        tracker = RunTracker(stored.run_id, stored.workflow)
        if stored.status is RunStatus.COMPLETED:
            tracker.finish(stored.status, result=decode_result(stored, workflow))
        else:
            tracker.finish(stored.status, error=finished_error(stored))
        return tracker.handle

    async def _launch(
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
        return (await self._take_and_drive(workflow, manifest, fresh=fresh, recovering=recovering))[
            0
        ]

    async def _take_and_drive(
        self,
        workflow: type[Any],
        manifest: RunManifest,
        *,
        fresh: bool,
        recovering: bool,
        adopting: bool = False,
    ) -> tuple[RunHandle, bool]:
        """``_launch``, also saying whether the run is driven now (see ``TakeAndDrive``).

        On a cluster that drives runs (``RayCluster``) a stored run is handed
        to it and followed from here, never driven in this process: what
        ``recover``, ``resume`` and ``fork`` take goes to the cluster's hosts.
        """
        if not fresh and self.cluster is not None and self.cluster.drives_runs:
            handle = await self.follow(manifest.run_id, workflow)
            if not handle.done:
                await self.cluster.dispatch(manifest.run_id)
            return handle, not handle.done
        try:
            task_group = self._accepting_runs()
        except RuntimeNotRunningError:
            if fresh and self._stopping:
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
        self._runs[manifest.run_id] = tracker
        task_group.start_soon(
            self._runs_driver.drive_in_background, tracker, manifest, workflow, lease, fresh
        )
        if manifest.parent_run is not None:  # a child run: its end goes to its parent
            self._child_runs.follow(tracker, manifest.parent_run)
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

    def _run_ended(self, tracker: RunTracker, prune: bool) -> None:
        """Apply retention if asked; keep the handle among the newest few (a service runs long)."""
        if prune:
            self._prune_soon(tracker.run_id, tracker.checkpoints_written)
        self._finished.append(tracker)
        while len(self._finished) > KEPT_FINISHED_HANDLES:
            old = self._finished.popleft()
            if self._runs.get(old.run_id) is old:
                del self._runs[old.run_id]

    # --- recovery ------------------------------------------------------------

    async def recover(
        self,
        run_id: str | None = None,
        *,
        on_start: Callable[[RunHandle], object] | None = None,
    ) -> dict[str, Any]:
        """Resume orphaned runs (running or interrupted, no live owner), blocked and paused ones.

        A paused run is resumed only if its wait can resolve now: a signal of
        the type it waits for is in its inbox, or its deadline has passed.

        Returns ``{run_id: result}`` for every run that finishes. A run that
        pauses or fails is left in that state (see ``runs()``); one that has
        failed to recover ``max_recovery_attempts`` times is marked failed.
        A run another process finished while this one waited for its claim is
        not run again: a completed one's stored result is returned, any other
        is skipped. ``on_start`` is called with each resumed run's handle as
        it starts, to follow its events (progress displays do).

        A ``blocked`` run (its code diverged from its log) is tried again when
        named as ``run_id``, or when this runtime's ``code_version`` differs
        from the one it was blocked under; else it is skipped
        (``run_blocked_skipped`` event). Code that still diverges blocks it again.

        Raises:
            RunNotFoundError: ``run_id`` is given and unknown.
            RunLockedError: ``run_id`` is given and a live process owns it.

        .. versionchanged:: 0.2
           Blocked runs.
        .. versionchanged:: 0.3
           Paused runs whose wait can resolve.
        """
        return await self._recovery.recover(run_id, on_start)

    # --- pause, resume, fork, cancel -----------------------------------------

    async def resume(
        self,
        run_id: str,
        response: object,
        *,
        on_start: Callable[[RunHandle], object] | None = None,
    ) -> Any:
        """Answer a paused run's wait (``wait_for_input``: a string) and run it on to the end.

        The response is sent as a signal, with an id tied to the wait it
        answers: if an earlier ``resume`` sent its response and crashed before
        the run went on, the run goes on with that first response and
        ``response`` is not used. ``on_start`` is called with the run's handle
        as it starts again, to follow its events (as in :meth:`recover`).

        Raises:
            RunNotFoundError: no such run.
            RunNotPausedError: the run is not paused (its status says why).
            ConfigurationError: the run's wait takes another type of response.
            RunLockedError: another process resumed it meanwhile and drives it
                (the first response sent is the one the run takes).
        """
        manifest = await self.store.read_run(validate_run_id(run_id))
        if manifest.status is not RunStatus.PAUSED:
            raise RunNotPausedError(run_id, str(manifest.status))
        workflow = workflow_class(manifest)
        view, _ = await load_view(self.store, run_id, lambda *a, **k: None)
        waits = [w for w in pending_waits(view.events, view.steps) if w.pause]
        kind = signal_type(type(response))
        fitting = [w for w in waits if w.type == kind]
        if waits and not fitting:
            wanted = " or ".join(sorted({w.type for w in waits}))
            raise ConfigurationError("response", response, f"a {wanted}: what the run waits for")
        if fitting:
            # the wait the run reported (its prompt), else the first
            reported = [w for w in fitting if w.prompt == manifest.prompt] or fitting
            await send_signal(
                self.store,
                run_id,
                response,
                entry_id=None,
                sender=self.owner,
                max_size=None,
                resumes=reported[0].step_id,
            )
        # only while still paused: a resume that lost a race with another
        # (which has taken the run since) must leave the live run as it is
        manifest = await self.store.update_run(run_id, woken)
        handle = await self._launch(workflow, manifest)
        if on_start is not None:
            on_start(handle)
        return await handle.result()

    async def update(
        self,
        run_id: str,
        message: object,
        *,
        update_id: str | None = None,
        result_type: Any = Any,
    ) -> Any:
        """Send ``message`` to the run's ``@update`` handler for its type and return its reply.

        From any process. The run validates it before recording anything,
        then runs the handler as steps of its own and records the reply, which
        is decoded as ``result_type`` (the handler's return annotation is not
        known here: without it, the reply comes back as plain data).
        ``update_id`` makes retries harmless: a second call with the same id
        gets the first one's reply (even once the run has ended), and the
        handler runs once. A refusal is final: the update is never validated
        again, whatever the run's later state. An orphaned or
        paused run answers when it goes on: bound the wait with
        ``anyio.fail_after`` (the update stays in the run's inbox).

        Raises:
            RunNotFoundError: no such run.
            RunFinishedError: the run ended before it replied (or had ended).
            UpdateRejectedError: its validator refused it, or it has no handler for the type.
            UpdateFailedError: the handler raised.
            SignalTooLargeError: ``message`` encodes to more than ``config.max_signal_size``.

        .. versionchanged:: 0.4
           Refusals are final; the size limit; retries after the end.
        """
        return await call_update(
            self.store,
            validate_run_id(run_id),
            message,
            update_id=update_id,
            sender=self.owner,
            poll_interval=self.config.signal_poll_interval,
            max_size=self.config.max_signal_size,
            result_type=result_type,
        )

    async def signal(self, run_id: str, message: object, *, id: str | None = None) -> InboxEntry:
        """Send ``message`` (any msgspec-encodable value) to a run, from any process.

        It is kept durably in the run's inbox until a ``ctx.wait_for`` of its
        type takes it, whether the run is live (its owner is woken at once),
        paused (``recover()`` continues a paused run that waits for it) or
        orphaned (it is taken after recovery). Each signal is taken once;
        signals of one type are taken in the order they were sent. ``id``
        makes retries harmless: a second signal with an id the inbox holds
        adds nothing, even once the run has ended. Returns the inbox entry
        that holds it.

        A signal is only ever read as a signal: type names starting with
        ``actorflow.`` and ids starting with ``actorflow``, ``update:``,
        ``reply:`` or ``resume:`` are actorflow's own, and refused.

        Raises:
            RunNotFoundError: no such run.
            RunFinishedError: the run has ended, and ``id`` is not one it holds.
            ReservedInboxNameError: the type name or ``id`` is in actorflow's namespace.
            SignalTooLargeError: ``message`` encodes to more than ``config.max_signal_size``.
            EncodingError: ``message`` cannot be encoded.
            InboxUnsupportedError: the store keeps no inbox.

        .. versionchanged:: 0.4
           Reserved names refused; the size limit; retries after the end.
        """
        return await send_signal(
            self.store,
            validate_run_id(run_id),
            message,
            entry_id=id,
            sender=self.owner,
            max_size=self.config.max_signal_size,
        )

    async def fork(
        self, run_id: str, checkpoint: str, *, new_run_id: str | None = None
    ) -> RunHandle:
        """Start a new run from one of ``run_id``'s snapshots, with its records before it.

        The new run replays what the snapshot holds and runs the rest live.
        """
        source = await self.store.read_run(validate_run_id(run_id))
        workflow = workflow_class(source)
        new_id = (
            validate_run_id(new_run_id)
            if new_run_id
            else f"{run_id[:80]}-fork-{uuid.uuid4().hex[:8]}"
        )
        stored = await copy_for_fork(self.store, source, checkpoint, new_id)
        return await self._launch(workflow, stored)

    async def cancel(self, run_id: str, *, reason: str | None = None) -> None:
        """Cancel a run, from any process; it ends ``cancelled`` with ``reason`` recorded.

        A run live in this runtime stops now, and this returns once it has
        ended. A run another live process owns gets a durable cancel request
        in its inbox, which its owner takes at once (this returns when the
        request is stored; ``result`` says when it ended). Any other unfinished
        run (orphaned, paused, blocked) is marked cancelled, and the request
        stays for a process that may be recovering it this moment. A finished
        run is left as it is.

        Raises:
            RunNotFoundError: no such run.

        .. versionchanged:: 0.3
           ``reason``; runs owned by other processes.
        """
        live = self._runs.get(run_id)
        if live is not None and not live.done:
            live.cancel(reason)
            await live.ended.wait()
            return
        await self._cancel_stored(run_id, reason)

    async def _cancel_stored(self, run_id: str, reason: str | None) -> None:
        await cancel_stored(self.store, validate_run_id(run_id), reason, sender=self.owner)

    # --- looking at runs -----------------------------------------------------

    async def result(self, run_id: str) -> Any:
        """A finished run's result, decoded to its orchestrator's return type.

        Raises:
            RunNotFoundError: no such run.
            RunNotFinishedError: it has no result yet.
            RunBlockedError: it is blocked: its code no longer replays its log.
            RunFailedError: it failed or was cancelled (with the cause).
        """
        manifest = await self.store.read_run(validate_run_id(run_id))
        if manifest.status is RunStatus.COMPLETED:
            return decode_result(manifest)
        if manifest.status is RunStatus.PAUSED:
            raise RunNotFinishedError(run_id, "paused")
        raise finished_error(manifest)

    async def runs(
        self,
        *,
        status: RunStatus | Sequence[RunStatus] | None = None,
        workflow: str | type[Any] | None = None,
    ) -> list[RunManifest]:
        """Manifests of the store's runs, optionally by status and workflow."""
        name = class_name(workflow) if isinstance(workflow, type) else workflow
        return await self.store.list_runs(status=status, workflow=name)

    def handle(self, run_id: str) -> RunHandle:
        """The handle of a run this runtime started (live, or among its last 1000 finished).

        For older runs, and runs of other processes, use :meth:`result` and
        :meth:`runs`.

        Raises:
            RunNotFoundError: this runtime has no handle for that run.
        """
        try:
            return self._runs[run_id].handle
        except KeyError:
            raise RunNotFoundError(run_id) from None

    # --- housekeeping --------------------------------------------------------

    def _prune_soon(self, run_id: str, after: Callable[[], Awaitable[None]] | None = None) -> None:
        """Apply the retention policy to a finished run, off its path (``after`` it settles)."""
        policy = self.config.retention
        if policy is not None and self.running:
            task_group = self.require_running("prune a run")
            self._pruner.soon(self.store, run_id, policy, task_group, after=after)

    async def __aenter__(self) -> Self:
        await super().__aenter__()
        self._stopping = False
        self._follower = None
        if self.cluster is not None:
            try:
                await self.cluster.open(self)
            except BaseException:
                await super().__aexit__(None, None, None)
                raise
        if self.adoption is not None:
            try:
                self._adopter = Adopter(self.store, self.adoption, self._adopter_hooks())
            except BaseException:
                await super().__aexit__(None, None, None)
                raise
            self._adopting = anyio.CancelScope()
            self.require_running("adopt runs").start_soon(
                self._adopt_runs, self._adopter, self._adopting
            )
        return self

    # --- workers ---------------------------------------------------------------

    async def _adopt_runs(self, adopter: Adopter, scope: anyio.CancelScope) -> None:
        with scope:
            await adopter.run()

    def _adopter_hooks(self) -> AdopterHooks:
        def drives(run_id: str) -> bool:
            tracker = self._runs.get(run_id)
            return tracker is not None and not tracker.done

        return AdopterHooks(
            drives=drives,
            recover=self._recovery.adopt,
            wake_paused=self._recovery.wake_paused,
            retries_blocked=self._recovery.retries_blocked,
        )

    def adopt_now(self) -> None:
        """Look for runs to adopt at once rather than at the next poll (a worker only).

        For a process that learns a peer died (Ray's report of a dead node,
        say): it only speeds up the search; a run is still taken only once
        the store says no live owner holds it.
        """
        if self._adopter is not None:
            self._adopter.nudge()

    async def submit(
        self, workflow: type[Any], input: Any = None, *, run_id: str | None = None
    ) -> str:
        """Record a run for a worker to start, and return its id; none of it runs here.

        The run is stored ``queued``; a runtime with ``adopt_orphans`` (or
        ``recover()``) starts it. Submitting the same ``run_id`` with the same
        input again changes nothing. Follow it with :meth:`watch`,
        :meth:`query` or :meth:`result`.

        Raises:
            ActorDefinitionError: ``workflow`` is a base class.
            RunInputMismatchError: ``run_id`` exists with a different input.
            RunInputTypeError: ``input`` does not fit the workflow's input type
                (nothing is stored).

        .. versionadded:: 0.4
        """
        if is_abstract(workflow):
            raise ActorDefinitionError(
                class_name(workflow),
                "is a base class; submit a subclass of it that defines "
                "`async def run(self, ctx, input)`",
            )
        register(workflow)
        run_id = validate_run_id(run_id) if run_id is not None else uuid.uuid4().hex
        manifest = new_manifest(
            workflow, input, run_id=run_id, owner=None, code_version=self.config.code_version
        )
        manifest = msgspec.structs.replace(manifest, status=RunStatus.QUEUED)
        stored, created = await self.store.create_run(manifest)
        if not created and stored.input_hash != manifest.input_hash:
            raise RunInputMismatchError(run_id)
        if created:
            self.adopt_now()
        return run_id

    async def query(self, run_id: str) -> RunQuery:
        """What run ``run_id`` has recorded, read now: status, agents, waits, inbox and more.

        From any process, the run's owner or not, live, paused, orphaned or
        finished: it reads the newest snapshot and the log after it, takes
        no claim and writes nothing, so it never disturbs the run. The
        runtime need not be running. See :class:`RunQuery`.

        Raises:
            InvalidRunIdError: ``run_id`` is not a valid run id.
            RunNotFoundError: no such run.
        """
        return await query_run(self.store, run_id)

    @functools.cached_property
    def _recovery(self) -> Recovery:
        """What ``recover()`` and a worker's adoptions go through."""
        return Recovery(
            store=self.store,
            config=self.config,
            take_and_drive=self._take_and_drive,
            stopping=lambda: self._stopping,
        )

    # --- child runs ------------------------------------------------------------

    @functools.cached_property
    def _child_runs(self) -> RuntimeChildren:
        """What runs' steps start child runs through (``ctx.start_child``)."""
        return RuntimeChildren(
            store=self.store,
            owner=self.owner,
            code_version=self.config.code_version,
            drive=self._drive_child,
            cancel=lambda run_id, reason: self.cancel(run_id, reason=reason),
            tracker=self._runs.get,
            task_group=self._accepting_runs,
            grace=self.shutdown_timeout,
        )

    async def _drive_child(
        self, workflow: type[Any], manifest: RunManifest, create: bool
    ) -> RunManifest | None:
        """Create a child run (``create``) or take the stored one; drive it here if no one does.

        Like ``start`` for a new child, like ``recover`` for an orphaned one
        (the claim decides who drives it: a ``recover()`` running beside
        this never drives it twice). Returns the child's manifest if it has
        finished, else None (it is live here or in another process, or
        waits: whoever finishes it posts its end to its parent).

        Raises:
            RunInputMismatchError: ``create``, and the child exists with another input.
        """
        self._accepting_runs()
        stored = manifest
        if create:
            register(workflow)
            stored, created = await self.store.create_run(manifest)
            if created:
                await self._launch(workflow, stored, fresh=True)
                return None
            if stored.input_hash != manifest.input_hash:
                raise RunInputMismatchError(stored.run_id)
        live = self._runs.get(stored.run_id)
        if live is not None and not live.done:
            return None
        if stored.status in ORPHANS:
            try:
                _, driven = await self._take_and_drive(
                    workflow, stored, fresh=False, recovering=True
                )
            except RunLockedError:
                return None  # another live owner drives it
            if driven:
                return None
            stored = await self.store.read_run(stored.run_id)
        return stored if stored.status.finished else None

    # --- following runs from anywhere ---------------------------------------------

    def watch(
        self,
        run_id: str,
        *,
        position: int = 0,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
        until: Literal["stopped", "finished"] = "stopped",
        events: bool = False,
        event_position: int = 0,
    ) -> AsyncGenerator[WatchEvent, None]:
        """Follow a run in this runtime's store, whichever process runs it: an async iterator.

        Yields, in log order from ``position`` (0: the beginning), what the run
        makes durable: ``StepCompleted``, ``DecisionMade``, ``PhaseEnded``,
        ``EmitRecorded`` (``ctx.emit(..., durable=True)``), ``Recorded`` (any
        other record), ``CheckpointSaved`` (before the record at its
        position), and ``StatusChanged`` (the status first read, then each
        change). Ends after ``RunEnded`` when the run finishes; with
        ``until="stopped"`` (the default) it also ends when the run stops
        without finishing (paused, blocked, interrupted: nobody runs it now),
        after that ``StatusChanged``, but follows a queued run until a worker
        starts it; ``until="finished"`` follows it through pauses and
        recoveries. A run whose owner died still reads as running until
        something recovers it.

        It owns nothing and never writes: it reads the manifest and the log
        every ``poll_interval`` seconds, so events arrive that much after the
        run's log is durable (in ``batched`` mode, within its flush delay).
        Break out of the loop to stop early (close it with
        ``contextlib.aclosing`` on trio).

        With ``events``, it also yields the run's ephemeral emits
        (``Actor.emit``, ``ctx.emit(event)``) from the store's event stream,
        from position ``event_position`` on: ``EmitStreamed`` after each
        read's log records, and ``EmitsLost`` for a gap (events the owner
        dropped, or that the store's bound removed before they were read).
        Before it ends on the run's stop, it reads the rest of the stream
        (waiting for it at most ``STREAM_GRACE`` seconds). A store without an
        event stream (``S3Store``) yields none: only durable emits.

        Raises:
            RunNotFoundError: the store has no such run.
            StorageError: ``position`` is below what retention kept of the log.

        .. versionadded:: 0.2
        .. versionchanged:: 0.4
           ``events``, ``event_position``.
        """
        return watch_run(
            self.store,
            run_id,
            position=position,
            poll_interval=poll_interval,
            until=until,
            events=events,
            event_position=event_position,
        )
