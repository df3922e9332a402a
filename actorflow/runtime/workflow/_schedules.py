"""Schedules: declared with ``Runtime.schedule``, their ticks' runs started by workers.

A schedule is stored (:class:`~actorflow.storage.ScheduleStore`) and every
worker of the store looks at it each poll: for each tick that is due (by
its cron expression in its timezone, or every so many seconds from when it
was first declared) it creates the tick's run, ``queued``, under the id
``sched-<schedule id>-<tick>``. ``create_run`` lets one creator win, so
however many workers race, and whichever dies between creating a run and
noting its progress, a tick has one run. The run is then adopted like any
submitted run.

Time comes from the runtime's :class:`~actorflow.runtime.Clock` (``Runtime(clock=...)``): the
system clock, or ``actorflow.testing.FakeClock`` in tests.
"""

from __future__ import annotations

import datetime
import hashlib
import math
import time
import zoneinfo
from typing import TYPE_CHECKING, Any, get_args

import anyio
import cronsim
import msgspec

from actorflow._log import get_logger
from actorflow._text import describe
from actorflow.errors import (
    ConfigurationError,
    CorruptedDataError,
    CronExpressionError,
    EncryptionKeyError,
    RegistryError,
    ScheduleNotFoundError,
    StorageError,
)
from actorflow.runtime.actors import lookup, register
from actorflow.runtime.workflow._outcomes import new_manifest
from actorflow.storage import (
    CatchUp,
    RunManifest,
    RunStatus,
    Schedule,
    ScheduleProgress,
    ScheduleStore,
    validate_schedule_id,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from actorflow.runtime.flow import Clock
    from actorflow.runtime.workflow._config import RuntimeConfig
    from actorflow.storage import Store

__all__ = [
    "MAX_TICKS_PER_LOOK",
    "SKIP_GRACE",
    "ScheduleInfo",
    "Scheduler",
    "Schedules",
    "check_timing",
    "declare",
    "due_ticks",
    "list_schedules",
    "next_tick",
    "schedule_info",
    "schedule_store",
    "set_paused",
    "tick_run_id",
]

_log = get_logger("actorflow.schedules")

SKIP_GRACE = 60.0
"""Seconds after its time a tick still starts under ``catch_up="skip"``."""

MAX_TICKS_PER_LOOK = 1000
"""Ticks one look starts at most per schedule (``catch_up="all"`` goes on at the next)."""


def schedule_store(store: Store) -> ScheduleStore:
    """``store`` as a store of schedules.

    Raises:
        ConfigurationError: the store keeps no schedules.
    """
    if not isinstance(store, ScheduleStore):
        raise ConfigurationError(
            "store",
            type(store).__name__,
            "a store that keeps schedules (ScheduleStore): the file, S3, SQLite, PostgreSQL "
            "or memory store",
        )
    return store


def check_timing(
    cron: object, every: object, timezone: object, catch_up: object
) -> tuple[str | None, float | None, str, CatchUp]:
    """The timing arguments of ``Runtime.schedule``, checked.

    Raises:
        CronExpressionError: neither or both of ``cron`` and ``every``, a cron
            expression that does not parse, or an interval under a second.
        ConfigurationError: an unknown timezone or ``catch_up``.
    """
    if (cron is None) == (every is None):
        raise CronExpressionError((cron, every), "give exactly one of cron and every")
    if not isinstance(timezone, str):
        raise ConfigurationError("timezone", timezone, "an IANA zone name such as 'UTC'")
    try:
        zone = zoneinfo.ZoneInfo(timezone)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ConfigurationError("timezone", timezone, "an IANA zone name such as 'UTC'") from None
    if catch_up not in get_args(CatchUp):
        raise ConfigurationError("catch_up", catch_up, "'skip', 'latest' or 'all'")
    seconds: float | None = None
    if every is not None:
        if isinstance(every, datetime.timedelta):
            seconds = every.total_seconds()
        elif isinstance(every, int | float) and not isinstance(every, bool):
            seconds = float(every)
        if seconds is None or not (seconds >= 1 and math.isfinite(seconds)):
            raise CronExpressionError(every, "every must be a timedelta of a second or more")
    if cron is not None:
        if not isinstance(cron, str):
            raise CronExpressionError(cron, "a cron expression is a string")
        try:
            cronsim.CronSim(cron, datetime.datetime.now(zone))
        except cronsim.CronSimError as exc:
            raise CronExpressionError(cron, str(exc)) from None
    return cron, seconds, timezone, catch_up  # type: ignore[return-value]


def tick_run_id(schedule_id: str, tick: float) -> str:
    """The id of the run a tick starts."""
    return f"sched-{schedule_id}-{round(tick)}"


def _cron_after(schedule: Schedule, after: float, *, reverse: bool = False) -> float | None:
    assert schedule.cron is not None
    zone = zoneinfo.ZoneInfo(schedule.timezone)
    start = datetime.datetime.fromtimestamp(after, zone)
    try:
        return next(cronsim.CronSim(schedule.cron, start, reverse=reverse)).timestamp()
    except StopIteration:
        return None


def next_tick(schedule: Schedule, after: float) -> float | None:
    """The first tick strictly after ``after`` (and not before the anchor)."""
    after = max(after, schedule.anchor - 1)
    if schedule.every is not None:
        k = math.floor((after - schedule.anchor) / schedule.every) + 1
        return schedule.anchor + max(k, 0) * schedule.every
    return _cron_after(schedule, after)


def _newest(schedule: Schedule, now: float) -> float | None:
    """The newest tick at or before ``now`` and not before the anchor."""
    if schedule.every is not None:
        if now < schedule.anchor:
            return None
        return (
            schedule.anchor + math.floor((now - schedule.anchor) / schedule.every) * schedule.every
        )
    tick = _cron_after(schedule, math.floor(now) + 1, reverse=True)
    return tick if tick is not None and tick >= schedule.anchor else None


def due_ticks(
    schedule: Schedule, last: float | None, now: float
) -> tuple[list[float], float | None]:
    """The ticks to start now, oldest first, and the newest tick looked at (the new progress).

    ``last``: the newest tick started (``None``: none yet). ``catch_up``
    decides what happens to ticks missed while no worker looked: ``all``
    starts each (at most ``MAX_TICKS_PER_LOOK`` a look), ``latest`` the
    newest, ``skip`` the newest only if it is at most ``SKIP_GRACE`` late.
    """
    newest = _newest(schedule, now)
    if newest is None or (last is not None and newest <= last):
        return [], None
    if schedule.catch_up == "latest":
        return [newest], newest
    if schedule.catch_up == "skip":
        return ([newest] if now - newest <= SKIP_GRACE else []), newest
    ticks: list[float] = []
    tick = next_tick(schedule, last if last is not None else schedule.anchor - 1)
    while tick is not None and tick <= now and len(ticks) < MAX_TICKS_PER_LOOK:
        ticks.append(tick)
        tick = next_tick(schedule, tick)
    return ticks, (ticks[-1] if ticks else None)


class ScheduleInfo(msgspec.Struct, frozen=True, kw_only=True):
    """A schedule as ``runtime.schedules.list()`` and ``actorflow schedules`` show it.

    Attributes:
        schedule: its stored definition.
        last_tick: the newest tick a worker started a run for (``None``: none yet).
        last_run: that run's id.
        next_tick: its next tick after now (``None``: none, or paused).

    .. versionadded:: 0.6
    """

    schedule: Schedule
    last_tick: float | None = None
    last_run: str | None = None
    next_tick: float | None = None


async def schedule_info(store: ScheduleStore, schedule: Schedule, now: float) -> ScheduleInfo:
    """What is known of ``schedule``: its progress, and its next tick."""
    progress = await store.read_schedule_progress(schedule.schedule_id)
    return ScheduleInfo(
        schedule=schedule,
        last_tick=progress.last_tick if progress is not None else None,
        last_run=progress.last_run if progress is not None else None,
        next_tick=None if schedule.paused else next_tick(schedule, now),
    )


async def list_schedules(store: Store, now: float | None = None) -> list[ScheduleInfo]:
    """Every schedule of ``store``, with its last and next ticks (after ``now``, default now).

    What ``runtime.schedules.list()`` and ``actorflow schedules`` show.

    Raises:
        ConfigurationError: the store keeps no schedules.

    .. versionadded:: 0.6
    """
    schedules = schedule_store(store)
    when = time.time() if now is None else now
    return [await schedule_info(schedules, s, when) for s in await schedules.list_schedules()]


class Scheduler:
    """A worker's look at every schedule: create each due tick's run, note the progress.

    Args:
        store: the store of schedules and runs.
        clock: where the time comes from.
        started: called when a tick's run was created (the worker looks for it at once).
    """

    def __init__(
        self, store: ScheduleStore, runs: Store, clock: Clock, started: Callable[[], None]
    ) -> None:
        self._store = store
        self._runs = runs
        self._clock = clock
        self._started = started
        self._wake = anyio.Event()
        self._told: set[tuple[str, str]] = set()
        self.created = 0
        """Runs of ticks this worker created."""

    def nudge(self) -> None:
        """Look at once instead of at the next poll (a fake clock moved, say)."""
        self._wake.set()

    async def run(self, poll_interval: float) -> None:
        """Look every ``poll_interval`` seconds (or when nudged) until cancelled."""
        while True:
            try:
                await self.look()
            except (StorageError, CorruptedDataError, EncryptionKeyError) as exc:
                _log.warning("schedule_look_failed", error=describe(exc))
            with anyio.move_on_after(poll_interval):
                await self._wake.wait()
            self._wake = anyio.Event()

    def _leave(self, schedule_id: str, reason: str, **details: object) -> None:
        if (schedule_id, reason) not in self._told:
            self._told.add((schedule_id, reason))
            _log.info("schedule_left_alone", schedule_id=schedule_id, reason=reason, **details)

    async def look(self) -> None:
        """One look at every schedule."""
        for schedule in await self._store.list_schedules():
            try:
                await self._one(schedule)
            except (StorageError, ScheduleNotFoundError) as exc:
                _log.warning(
                    "schedule_look_failed", schedule_id=schedule.schedule_id, error=describe(exc)
                )

    async def _one(self, schedule: Schedule) -> None:
        if schedule.paused:
            return
        try:
            lookup(schedule.workflow, schedule.workflow_module)
        except RegistryError:
            # a schedule of code this worker lacks: a worker that has it starts its ticks
            self._leave(schedule.schedule_id, "class_not_imported", workflow=schedule.workflow)
            return
        progress = await self._store.read_schedule_progress(schedule.schedule_id)
        last = progress.last_tick if progress is not None else None
        ticks, newest = due_ticks(schedule, last, self._clock.now())
        last_run = progress.last_run if progress is not None else ""
        for tick in ticks:
            last_run = await self._start(schedule, tick)
        if newest is not None:
            await self._store.put_schedule_progress(
                ScheduleProgress(
                    schedule_id=schedule.schedule_id, last_tick=newest, last_run=last_run
                )
            )

    async def _start(self, schedule: Schedule, tick: float) -> str:
        """Create the tick's run unless it exists; its id."""
        run_id = tick_run_id(schedule.schedule_id, tick)
        now = time.time()
        manifest = RunManifest(
            run_id=run_id,
            workflow=schedule.workflow,
            workflow_module=schedule.workflow_module,
            input=schedule.input,
            input_hash=hashlib.sha256(schedule.input).hexdigest(),
            status=RunStatus.QUEUED,
            code_version=schedule.code_version,
            created=now,
            updated=now,
            schedule=schedule.schedule_id,
        )
        _, created = await self._runs.create_run(manifest)
        if created:
            self.created += 1
            _log.info("schedule_tick_started", schedule_id=schedule.schedule_id, run_id=run_id)
            self._started()
        return run_id


async def declare(
    store: ScheduleStore,
    workflow: type[Any],
    input: Any,
    *,
    schedule_id: str,
    cron: str | None,
    every: datetime.timedelta | float | None,
    catch_up: CatchUp,
    timezone: str,
    code_version: str | None,
    now: float,
) -> Schedule:
    """Store a schedule (see ``Runtime.schedule``); a declared one keeps its anchor and pause.

    Raises:
        ConfigurationError: a bad ``schedule_id``, timezone or ``catch_up``.
        CronExpressionError: bad timing.
        RunInputTypeError: ``input`` does not fit the workflow's input type.
    """
    validate_schedule_id(schedule_id)
    cron, seconds, timezone, catch_up = check_timing(cron, every, timezone, catch_up)
    register(workflow)
    # the input is checked as a run's would be, once, before anything is stored
    sample = new_manifest(
        workflow, input, run_id=tick_run_id(schedule_id, 0), owner=None, code_version=code_version
    )
    anchor, paused = float(math.floor(now)), False
    try:
        old = await store.read_schedule(schedule_id)
    except ScheduleNotFoundError:
        pass
    else:
        anchor, paused = old.anchor, old.paused
    schedule = Schedule(
        schedule_id=schedule_id,
        workflow=sample.workflow,
        workflow_module=sample.workflow_module,
        input=sample.input,
        cron=cron,
        every=seconds,
        timezone=timezone,
        catch_up=catch_up,
        anchor=anchor,
        paused=paused,
        code_version=code_version,
    )
    await store.put_schedule(schedule)
    return schedule


async def set_paused(store: ScheduleStore, schedule_id: str, paused: bool, now: float) -> Schedule:
    """Pause or resume a schedule; a resumed one starts from its next tick after ``now``.

    Raises:
        ScheduleNotFoundError: no such schedule.
    """
    schedule = await store.read_schedule(schedule_id)
    if schedule.paused == paused:
        return schedule
    if not paused:
        # the ticks missed while paused are passed over, whatever catch_up says
        newest = _newest(schedule, now)
        if newest is not None:
            old = await store.read_schedule_progress(schedule_id)
            await store.put_schedule_progress(
                ScheduleProgress(
                    schedule_id=schedule_id,
                    last_tick=max(newest, old.last_tick) if old is not None else newest,
                    last_run=old.last_run if old is not None else "",
                )
            )
    schedule = msgspec.structs.replace(schedule, paused=paused)
    await store.put_schedule(schedule)
    return schedule


class Schedules:
    """A runtime's verbs for the schedules of its store (``runtime.schedules``).

    Every worker of the store starts the ticks' runs; these only store what
    the workers read. Times are the runtime's clock's (``Runtime(clock=...)``).

    .. versionadded:: 0.5
    """

    def __init__(
        self,
        store: Callable[[], Store],
        clock: Clock,
        config: RuntimeConfig,
        look_now: Callable[[], None],
    ) -> None:
        self._store = store
        self._clock = clock
        self._config = config
        self._look_now = look_now

    async def add(
        self,
        workflow: type[Any],
        input: Any = None,
        *,
        schedule_id: str,
        cron: str | None = None,
        every: datetime.timedelta | None = None,
        catch_up: CatchUp = "skip",
        timezone: str = "UTC",
    ) -> ScheduleInfo:
        """Store a schedule: workers of the store start one run of ``workflow`` per tick.

        Ticks come from ``cron`` (five fields, read in ``timezone``) or
        ``every`` (counted from when the schedule was first declared). Each
        tick's run is created ``queued`` under the id
        ``sched-<schedule_id>-<tick>`` (the tick in seconds since the
        epoch), so it is started once however many workers look. Declaring
        the same ``schedule_id`` again replaces what it runs and when, and
        keeps its pause and its progress: an app may declare its schedules
        each time it starts. ``catch_up`` says what becomes of ticks missed
        while no worker ran: ``"skip"`` them (a tick still starts up to a
        minute late), start the ``"latest"``, or ``"all"``.

        Raises:
            CronExpressionError: neither or both of ``cron`` and ``every``,
                a cron expression that does not parse, or ``every`` under a
                second (nothing is stored).
            ConfigurationError: a bad ``schedule_id``, ``timezone`` or
                ``catch_up``; or a store that keeps no schedules.
            RunInputTypeError: ``input`` does not fit the workflow's input type.
        """
        store = schedule_store(self._store())
        schedule = await declare(
            store,
            workflow,
            input,
            schedule_id=schedule_id,
            cron=cron,
            every=every,
            catch_up=catch_up,
            timezone=timezone,
            code_version=self._config.code_version,
            now=self._clock.now(),
        )
        self._look_now()
        return await schedule_info(store, schedule, self._clock.now())

    async def pause(self, schedule_id: str) -> ScheduleInfo:
        """Stop starting the schedule's ticks (a run already started goes on).

        Raises:
            ScheduleNotFoundError: no such schedule.
        """
        store = schedule_store(self._store())
        schedule = await set_paused(store, schedule_id, True, self._clock.now())
        return await schedule_info(store, schedule, self._clock.now())

    async def resume(self, schedule_id: str) -> ScheduleInfo:
        """Start the schedule's ticks again from its next tick (those missed while paused never).

        Raises:
            ScheduleNotFoundError: no such schedule.
        """
        store = schedule_store(self._store())
        schedule = await set_paused(store, schedule_id, False, self._clock.now())
        self._look_now()
        return await schedule_info(store, schedule, self._clock.now())

    async def delete(self, schedule_id: str) -> None:
        """Remove the schedule (the runs it started stay).

        Raises:
            ScheduleNotFoundError: no such schedule.
        """
        await schedule_store(self._store()).delete_schedule(schedule_id)

    async def list(self) -> list[ScheduleInfo]:
        """Every schedule in the store, with its last and next ticks."""
        return await list_schedules(self._store(), self._clock.now())
