"""The public ``Runtime``: actors (from the core) plus durable workflow runs, a facade.

What touches runs (the handle table, creating, taking, driving and following
them, recovery, child runs, workers) and the order in which ``async with``
starts and stops it all is ``Runs``' (``_runs.py``); a ``Runtime`` method
checks its arguments, documents what the user sees and hands on. Its
actor verbs are the facade's other half (``_runtime_actors.py``); schedules'
verbs are ``runtime.schedules`` (``_schedules.py``).
"""

from __future__ import annotations

import functools
import os
import socket
import uuid
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from actorflow.runtime.actors import Actor, ActorSystem, class_name
from actorflow.runtime.workflow._adoption import AdoptionPolicy
from actorflow.runtime.workflow._config import RuntimeConfig
from actorflow.runtime.workflow._flow import FlowControl
from actorflow.runtime.workflow._outcomes import stored_result
from actorflow.runtime.workflow._query import RunQuery, query_run
from actorflow.runtime.workflow._queues import QueueTable
from actorflow.runtime.workflow._runs import Runs
from actorflow.runtime.workflow._runtime_actors import RuntimeActors
from actorflow.runtime.workflow._schedules import (
    ScheduleInfo,
    Schedules,
)
from actorflow.runtime.workflow._signals import (
    send_signal,
)
from actorflow.runtime.workflow._updates import call_update
from actorflow.runtime.workflow._watch import DEFAULT_POLL_INTERVAL, watch_run
from actorflow.storage import (
    CatchUp,
    InboxEntry,
    RunManifest,
    RunStatus,
    Store,
    validate_run_id,
)

if TYPE_CHECKING:
    from collections.abc import AsyncGenerator, Callable, Iterable, Mapping, Sequence
    from datetime import timedelta
    from typing import Self

    from actorflow.runtime.flow import Clock, Limit, LimitStats
    from actorflow.runtime.reading import QueueStats
    from actorflow.runtime.workflow._cluster import Cluster
    from actorflow.runtime.workflow._handle import R, RunHandle
    from actorflow.runtime.workflow._outcomes import Workflow
    from actorflow.runtime.workflow._queues import Queue
    from actorflow.runtime.workflow._watch import WatchEvent

__all__ = ["Runtime"]

A = TypeVar("A", bound=Actor)


class Runtime(RuntimeActors):
    """Runs actors and durable workflow runs: ``async with Runtime(store=...) as rt``.

    Args:
        store: where runs live: a ``Store``, a folder path, or a URL (``s3://bucket/prefix``,
            ``sqlite:///file.db``, ``postgresql://…``: see :func:`~actorflow.storage.open_store`);
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
        limits: the :class:`Limit` budgets its runs' asks share by name
            (``@handler(limit=...)``, an agent class's ``limit``). See
            docs/flow-control.md.
        queues: the :class:`Queue` objects ``submit(..., queue=...)`` may
            name; a worker starts only runs of the queues it declares. See
            docs/flow-control.md.
        clock: the time retry backoffs, limits, schedules and queues'
            ``per_minute`` windows read and wait on (default the system's;
            ``actorflow.testing.FakeClock`` in tests).
        mailbox_size, supervisor, shutdown_timeout: see the actor runtime
            (:class:`ActorSystem`).

    Raises:
        LimitValueError: a limit is not a ``Limit``, or two share a name.

    It has an :class:`ActorSystem` (no longer is one): its actors' methods
    (``spawn``, ``get``, ``lookup``, ``stop``, ``running``) are the runtime's too.

    .. versionchanged:: 0.4
       ``adopt_orphans``, ``cluster``; it has an ``ActorSystem`` rather than
       subclassing it.
    .. versionchanged:: 0.5
       ``limits``, ``queues``, ``clock``.
    """

    def __init__(
        self,
        *,
        store: Store | str | os.PathLike[str] | None = None,
        config: RuntimeConfig | None = None,
        adopt_orphans: bool | AdoptionPolicy = False,
        cluster: Cluster | None = None,
        limits: Iterable[Limit] = (),
        queues: Sequence[Queue] = (),
        clock: Clock | None = None,
        **actor_options: Any,
    ) -> None:
        self.flow = FlowControl(limits, clock)  # first: bad limits fail before anything starts
        """The runtime's clock and limiters, shared by all its runs."""
        super().__init__(ActorSystem(**actor_options))
        self.cluster = cluster
        """Where runs and placed agents go; ``None``: this process."""
        if adopt_orphans is True:
            adopt_orphans = AdoptionPolicy()
        self.adoption: AdoptionPolicy | None = adopt_orphans or None
        """The adoption policy of a worker runtime; ``None`` if it adopts nothing."""
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._runs = Runs(
            self._system,
            store=store,
            config=config if config is not None else RuntimeConfig.from_env(),
            owner=self.owner,
            cluster=cluster,
            flow=self.flow,
            queues=QueueTable(queues),
        )

    def limit_stats(self) -> dict[str, LimitStats]:
        """Each declared limit's waits, queue and holders so far, in this process."""
        return self.flow.limiters.stats()

    async def queue_stats(self) -> dict[str, QueueStats]:
        """Each queue's depth, its queued runs' waits and its running runs, from the store.

        Every declared queue, with its caps, and any other queue a run of the
        store names; waits run from a run's submission to now, by the wall
        clock (submissions are stamped by it). See
        :func:`actorflow.runtime.reading.queue_stats`.

        .. versionadded:: 0.6
        """
        from actorflow.runtime.reading import queue_stats  # reads the store, like the CLI

        return await queue_stats(self.store, self.queues)

    @property
    def config(self) -> RuntimeConfig:
        """Workflow options (durability, triggers, retention, retries...)."""
        return self._runs.config

    @config.setter
    def config(self, config: RuntimeConfig) -> None:
        self._runs.config = config

    # --- flow control ------------------------------------------------------------

    @property
    def limits(self) -> tuple[Limit, ...]:
        """The limits declared with ``Runtime(limits=...)``, by name."""
        return self.flow.limiters.declared

    @property
    def queues(self) -> tuple[Queue, ...]:
        """The queues declared with ``Runtime(queues=...)``."""
        return tuple(self._runs.queues.by_name.values())

    @property
    def clock(self) -> Clock:
        """What retries, limits, schedules and rate windows read (``Runtime(clock=...)``)."""
        return self.flow.clock

    # --- runs --------------------------------------------------------------------

    @property
    def store(self) -> Store:
        """The store runs live in (opened on first use)."""
        return self._runs.store

    async def __aexit__(self, *exc_info: Any) -> None:
        await self._runs.exit(exc_info, cluster=self.cluster)

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
        return await self._runs.start(workflow, input, run_id)

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
        return await self._runs.follow(run_id, workflow)

    @property
    def active_runs(self) -> int:
        """How many runs this runtime drives now (runs it only follows are not counted).

        .. versionadded:: 0.4
        """
        return self._runs.active

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
        return await self._runs.recovery.recover(run_id, on_start)

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
        handle = await self._runs.recovery.resume(run_id, response, on_start)
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
        self,
        run_id: str,
        checkpoint: str,
        *,
        edit: Mapping[str, object] | None = None,
        new_run_id: str | None = None,
    ) -> RunHandle:
        """Start a new run from one of ``run_id``'s snapshots, with its records before it.

        The new run replays what the snapshot holds and runs the rest live.
        ``edit`` maps agent names to new states the fork starts them with in
        place of those the snapshot holds: each a value of the agent's state
        type, or plain data (a dict, as JSON decodes) converted to it with
        ``msgspec.convert``. The fork's manifest lists what was edited
        (``RunManifest.fork_edits``).

        Raises:
            RunNotFoundError: no run ``run_id``.
            CheckpointNotFoundError: the run has no such checkpoint.
            ConfigurationError: a run ``new_run_id`` exists.
            UnknownEditedAgentError: ``edit`` names an agent the checkpoint does
                not hold; nothing was stored.
            InvalidStateEditError: a new state does not fit its agent's state
                type (the error names the field); nothing was stored.

        .. versionchanged:: 0.5
           ``edit``.
        """
        return await self._runs.fork(run_id, checkpoint, new_run_id, edit)

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
        await self._runs.cancel(run_id, reason)

    # --- looking at runs -----------------------------------------------------

    async def result(self, run_id: str) -> Any:
        """A finished run's result, decoded to its orchestrator's return type.

        Raises:
            RunNotFoundError: no such run.
            RunNotFinishedError: it has no result yet.
            RunBlockedError: it is blocked: its code no longer replays its log.
            RunFailedError: it failed or was cancelled (with the cause).
        """
        return stored_result(await self.store.read_run(validate_run_id(run_id)))

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
        return self._runs.table.handle(run_id)

    async def __aenter__(self) -> Self:
        await self._runs.enter(self, cluster=self.cluster, adoption=self.adoption)
        return self

    # --- workers ---------------------------------------------------------------

    def adopt_now(self) -> None:
        """Look for runs to adopt at once rather than at the next poll (a worker only).

        For a process that learns a peer died (Ray's report of a dead node,
        say): it only speeds up the search; a run is still taken only once
        the store says no live owner holds it.
        """
        self._runs.adopt_now()

    async def submit(
        self,
        workflow: type[Any],
        input: Any = None,
        *,
        run_id: str | None = None,
        queue: str | None = None,
        priority: int = 0,
        dedup_key: str | None = None,
    ) -> str:
        """Record a run for a worker to start, and return its id; none of it runs here.

        The run is stored ``queued``; a runtime with ``adopt_orphans`` (or
        ``recover()``) starts it. Submitting the same ``run_id`` with the same
        input again changes nothing. Follow it with :meth:`watch`,
        :meth:`query` or :meth:`result`.

        With ``queue``, workers that declare that queue start the run in its
        turn: higher ``priority`` first, oldest first within a priority, as
        the queue's caps allow. With ``dedup_key``, a submit while a run
        with the same key (in the same queue) is still unfinished returns
        that run's id and stores nothing; once it has finished, a new run
        starts. See docs/flow-control.md.

        Raises:
            ActorDefinitionError: ``workflow`` is a base class.
            QueueNotDeclaredError: ``queue`` is not declared on this runtime.
            DedupKeyError: ``dedup_key`` is not a non-empty string, or comes
                with a ``run_id``.
            ConfigurationError: ``priority`` is not an int.
            RunInputMismatchError: ``run_id`` exists with a different input.
            RunInputTypeError: ``input`` does not fit the workflow's input type
                (nothing is stored).

        .. versionadded:: 0.4
        .. versionchanged:: 0.6
           ``queue``, ``priority`` and ``dedup_key``.
        """
        return await self._runs.submit(
            workflow, input, run_id, queue=queue, priority=priority, dedup_key=dedup_key
        )

    # --- schedules -------------------------------------------------------------

    async def schedule(
        self,
        workflow: type[Any],
        input: Any = None,
        *,
        schedule_id: str,
        cron: str | None = None,
        every: timedelta | None = None,
        catch_up: CatchUp = "skip",
        timezone: str = "UTC",
    ) -> ScheduleInfo:
        """Store a schedule: workers of the store start one run of ``workflow`` per tick.

        The same as ``runtime.schedules.add(...)``, where the arguments and
        errors are described; :attr:`schedules` also pauses, resumes,
        deletes and lists them. See docs/flow-control.md.

        .. versionadded:: 0.5
        """
        return await self.schedules.add(
            workflow,
            input,
            schedule_id=schedule_id,
            cron=cron,
            every=every,
            catch_up=catch_up,
            timezone=timezone,
        )

    @functools.cached_property
    def schedules(self) -> Schedules:
        """The store's schedules: ``add``, ``pause``, ``resume``, ``delete``, ``list``.

        .. versionadded:: 0.5
        """
        return Schedules(lambda: self.store, self.flow.clock, self.config, self._runs.adopt_now)

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
