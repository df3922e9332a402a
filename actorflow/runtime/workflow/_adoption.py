"""Workers that adopt orphaned runs: ``Runtime(adopt_orphans=True)``.

An :class:`Adopter` runs inside a runtime and keeps looking for runs that no
live process drives and that this one can: orphaned runs (running or
interrupted, no live claim), queued ones (``Runtime.submit``), paused ones
whose wait can resolve, and blocked ones under new code. It recovers each
through the runtime's ordinary recovery, so the claim (a flock, or a lease the
store fences) decides who drives a run: two workers never both do.

Finding them reads the store's index of unfinished runs
(:class:`~actorflow.storage.RunIndex`) filtered by what the store can tell
cheaply is owned, never every manifest. A run it cannot or should not take
(another workflow or code version, a class not imported here, data written by
a newer actorflow, a paused run still waiting) is looked at again only after
``recheck_interval``; a run whose adoption failed, after a backoff that
doubles. Leaving a run alone never spends one of its recovery attempts.

A run submitted to a queue goes to the worker's :class:`QueueDispatcher`,
which starts it in its turn within the queue's caps; a run of a queue this
worker does not declare is left alone.
"""

from __future__ import annotations

import math
import random
import time
from typing import TYPE_CHECKING, Protocol

import anyio
import msgspec

from actorflow._log import get_logger
from actorflow._text import describe
from actorflow.errors import (
    ConfigurationError,
    CorruptedDataError,
    EncryptionKeyError,
    RegistryError,
    RunLockedError,
    RunNotFoundError,
    StorageError,
    StoreUnavailableError,
)
from actorflow.runtime.actors import lookup
from actorflow.runtime.workflow._queues import QueueDispatcher, QueueTable
from actorflow.storage import EventRecord, RunIndex, RunManifest, RunStatus, WorkWatch

if TYPE_CHECKING:
    from collections.abc import Callable

    from actorflow.storage import Store

__all__ = ["ADOPTED", "Adopted", "Adopter", "AdoptionPolicy", "Adopts", "adoption_record"]

_log = get_logger("actorflow.adoption")

CREATION_GRACE = 30.0
"""Seconds a run may stay in the index without a manifest before a worker drops it.

A store indexes a run before it writes its manifest; a creation on a busy
disk takes a while, and an entry dropped too soon hides the run from workers
until the next reindex."""

_TAKEN_AS_IS = (RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.INTERRUPTED)

ADOPTED = "adopted"
"""``EventRecord.kind`` of the record an adopted run's attempt starts with."""


class Adopted(msgspec.Struct, frozen=True, kw_only=True):
    """What an ``adopted`` record says: which worker took the run, on which attempt."""

    owner: str
    attempt: int


def adoption_record(owner: str, attempt: int) -> EventRecord:
    """The first record of an attempt a worker adopted: who drives the run from here on."""
    data = msgspec.msgpack.encode(Adopted(owner=owner, attempt=attempt))
    return EventRecord(kind=ADOPTED, data=data, time=time.time())


class AdoptionPolicy(msgspec.Struct, frozen=True, kw_only=True):
    """Which runs a worker adopts, how many at once, and how often it looks.

    Attributes:
        workflows: adopt only runs of these workflows (registry names, as
            ``actorflow runs`` shows them); ``None``: any workflow whose class
            this process has imported, or can import from the module its run
            recorded.
        code_versions: adopt only runs started under one of these
            ``code_version`` values; ``None``: any.
        max_concurrent: adopted runs this worker drives at once; the next one
            waits for a slot.
        poll_interval: seconds between looks at the store's index
            (``Runtime.adopt_now()`` looks at once).
        recheck_interval: seconds before a run left alone (filtered out, its
            class missing, written by a newer actorflow, still paused, blocked)
            is looked at again.
        backoff: seconds before a run whose adoption failed is tried again;
            doubled on each further failure, up to ``max_backoff``.
        max_backoff: the longest backoff.
        reindex_interval: seconds between full rebuilds of the store's index
            (one listing of every manifest: it brings back runs an older
            actorflow wrote or a power loss took from the index); the first
            runs when the worker starts. ``None``: never.

    .. versionadded:: 0.4
    """

    workflows: tuple[str, ...] | None = None
    code_versions: tuple[str, ...] | None = None
    max_concurrent: int = 8
    poll_interval: float = 2.0
    recheck_interval: float = 30.0
    backoff: float = 1.0
    max_backoff: float = 60.0
    reindex_interval: float | None = 600.0

    def __post_init__(self) -> None:
        if self.max_concurrent < 1:
            raise ConfigurationError("max_concurrent", self.max_concurrent, "an int of 1 or more")
        for name in ("poll_interval", "recheck_interval", "backoff", "max_backoff"):
            value = getattr(self, name)
            if not (value > 0 and math.isfinite(value)):
                raise ConfigurationError(name, value, "a positive, finite number of seconds")
        if self.reindex_interval is not None and not self.reindex_interval > 0:
            raise ConfigurationError(
                "reindex_interval", self.reindex_interval, "a positive number of seconds, or None"
            )


class Adopts(Protocol):
    """What the adopter asks of its runtime (its ``Recovery``)."""

    def drives(self, run_id: str) -> bool:
        """Whether this runtime drives the run already."""
        ...

    async def adopt(self, manifest: RunManifest) -> bool:
        """Recover one run to its end: whether this process drove it.

        ``False``: someone else finished or took it first.

        Raises:
            RunLockedError: a live owner holds it.
        """
        ...

    async def wake_paused(self, manifest: RunManifest) -> RunManifest:
        """A paused run marked interrupted if its wait can resolve; else as is."""
        ...

    def retries_blocked(self, manifest: RunManifest) -> bool:
        """Whether a blocked run is tried under this code."""
        ...


class Adopter:
    """The loop of one worker: look, pick, recover; see the module's docstring."""

    def __init__(
        self,
        store: Store,
        policy: AdoptionPolicy,
        recovery: Adopts,
        *,
        queues: QueueTable | None = None,
        owner: str = "",
        clock: Callable[[], float] | None = None,
    ) -> None:
        if not isinstance(store, RunIndex):
            raise ConfigurationError(
                "adopt_orphans",
                True,
                f"a store that keeps an index of unfinished runs (RunIndex); "
                f"{type(store).__name__} keeps none: use the file, S3, SQLite, PostgreSQL "
                "or memory store",
            )
        self._store: RunIndex = store
        self._reader = store
        self.policy = policy
        self._recovery = recovery
        self._slots = anyio.CapacityLimiter(policy.max_concurrent)
        self._wake = anyio.Event()
        self._not_before: dict[str, float] = {}
        self._failures: dict[str, int] = {}
        self._adopting: set[str] = set()
        self._told: set[tuple[str, str]] = set()
        # runs the index lists without a manifest, and since when (monotonic)
        self._missing: dict[str, float] = {}
        self.adopted = 0
        """Runs this worker took over (driven or found finished meanwhile)."""
        self.queues = QueueDispatcher(
            store,
            queues or QueueTable(),
            owner=owner,
            worker_slots=self._slots,
            adopt=self._adopt,
            poll_interval=policy.poll_interval,
            clock=clock,
        )
        """Where runs submitted to a queue wait for their turn and a slot."""

    def nudge(self) -> None:
        """Look at once instead of at the next poll."""
        self._wake.set()
        self.queues.nudge()

    async def run(self) -> None:
        """Look for runs until cancelled; each adoption runs in its own task.

        Raises:
            StoreUnavailableError: the store cannot be reached at the first
                look (a worker pointed at the wrong place says so at once;
                later outages are waited out, with a warning each look).
        """
        policy = self.policy
        next_reindex = time.monotonic()
        first = True
        async with anyio.create_task_group() as tg:
            tg.start_soon(self.queues.run, tg)
            if isinstance(self._reader, WorkWatch):
                tg.start_soon(self._listen, self._reader)
            while True:
                if policy.reindex_interval is not None and time.monotonic() >= next_reindex:
                    next_reindex = time.monotonic() + policy.reindex_interval
                    await self._reindex(first)
                try:
                    await self._look(tg)
                except StorageError as exc:
                    if first and isinstance(exc, StoreUnavailableError):
                        raise
                    # damage or a passing outage is waited out, never fatal to the worker
                    _log.warning("adoption_scan_failed", error=describe(exc))
                first = False
                # jitter keeps a fleet started together from polling in step
                delay = policy.poll_interval * random.uniform(0.8, 1.2)
                with anyio.move_on_after(delay):
                    await self._wake.wait()
                self._wake = anyio.Event()

    async def _listen(self, store: WorkWatch) -> None:
        """Look at once whenever the store says a run may be there to take (``WorkWatch``).

        The polls go on beside it (a killed worker's runs come free without a
        word); a watch that fails leaves the worker to its polls.
        """
        try:
            async with store.watch_work() as watch:
                while True:
                    await watch.changed()
                    self.nudge()
        except StorageError as exc:
            _log.warning("work_watch_failed", error=describe(exc))

    async def _reindex(self, first: bool) -> None:
        try:
            changed = await self._store.reindex()
        except StorageError as exc:
            if first and isinstance(exc, StoreUnavailableError):
                raise
            _log.warning("run_index_not_rebuilt", error=describe(exc))
            return
        if changed:
            _log.info("run_index_rebuilt", changed=changed)

    async def _look(self, tg: anyio.abc.TaskGroup) -> None:
        """One look at the index; each run worth a closer look gets a task of its own.

        The tasks read manifests and take runs concurrently (a take-over is
        some requests in a row on S3), each once it has one of the
        ``max_concurrent`` slots, so the look itself never waits for a slot.
        """
        now = time.monotonic()
        found = await self._store.list_unfinished(unowned=True)
        self._forget_all_but(set(found))
        self.queues.retain(set(found))
        for run_id in found:
            if run_id in self._adopting or self.queues.holds(run_id):
                continue
            if self._recovery.drives(run_id):
                continue
            if self._not_before.get(run_id, 0.0) > now:
                continue
            self._adopting.add(run_id)
            self.queues.reading(+1)
            tg.start_soon(self._consider, run_id)

    def _forget_all_but(self, unfinished: set[str]) -> None:
        """Drop what is kept about runs that left the index: a long-lived worker sees many."""
        for kept in (self._not_before, self._failures):
            for run_id in [r for r in kept if r not in unfinished]:
                del kept[run_id]
        self._told = {told for told in self._told if told[0] in unfinished}
        self._missing = {k: v for k, v in self._missing.items() if k in unfinished}

    def _later(self, run_id: str, seconds: float) -> None:
        self._not_before[run_id] = time.monotonic() + seconds

    def _leave(self, run_id: str, reason: str, **details: object) -> None:
        """Leave a run alone until ``recheck_interval``; say so once per run and reason."""
        self._later(run_id, self.policy.recheck_interval)
        if (run_id, reason) not in self._told:
            self._told.add((run_id, reason))
            _log.info("run_left_alone", run_id=run_id, reason=reason, **details)

    async def _candidate(self, run_id: str) -> RunManifest | None:
        """The run's manifest if this worker should try to take it now, else ``None``."""
        try:
            manifest = await self._reader.read_run(run_id)
        except RunNotFoundError:
            # a store indexes a run before its manifest exists: it may be being
            # created right now (slowly, on a busy disk), so it is dropped only
            # once it has been missing for CREATION_GRACE, however often we poll
            now = time.monotonic()
            since = self._missing.setdefault(run_id, now)
            if now - since >= CREATION_GRACE:
                del self._missing[run_id]
                await self._store.unindex(run_id)  # deleted, or a creation that never finished
            else:
                self._later(run_id, self.policy.poll_interval)
            return None
        except (CorruptedDataError, EncryptionKeyError) as exc:
            # a newer actorflow's status, damage, or another key: nothing to do here
            self._leave(run_id, type(exc).__name__, error=describe(exc))
            return None
        self._missing.pop(run_id, None)
        if manifest.status.finished or manifest.tombstone:
            await self._store.unindex(run_id)
            return None
        policy = self.policy
        if policy.workflows is not None and manifest.workflow not in policy.workflows:
            self._leave(run_id, "workflow", workflow=manifest.workflow)
            return None
        if policy.code_versions is not None and manifest.code_version not in policy.code_versions:
            self._leave(run_id, "code_version", code_version=manifest.code_version)
            return None
        try:
            lookup(manifest.workflow, manifest.workflow_module)
        except RegistryError:
            self._leave(run_id, "class_not_imported", workflow=manifest.workflow)
            return None
        if manifest.queue is not None and not self.queues.knows(manifest.queue):
            self._leave(run_id, "queue_not_declared", queue=manifest.queue)
            return None
        if manifest.status is RunStatus.PAUSED:
            manifest = await self._recovery.wake_paused(manifest)
            if manifest.status is RunStatus.PAUSED:
                wait = policy.recheck_interval
                if manifest.deadline is not None:  # look again when it times out, not later
                    wait = min(wait, max(0.0, manifest.deadline - time.time()))
                self._later(run_id, wait)
                return None
        if manifest.status is RunStatus.BLOCKED:
            if not self._recovery.retries_blocked(manifest):
                self._leave(run_id, "blocked", code_version=manifest.blocked_code_version)
                return None
        elif manifest.status not in _TAKEN_AS_IS:
            self._leave(run_id, f"status {manifest.status}")
            return None
        return manifest

    async def _consider(self, run_id: str) -> None:
        """With a slot: read the run, and adopt it if this worker should."""
        read = True
        try:
            async with self._slots:
                try:
                    manifest = await self._candidate(run_id)
                except StorageError as exc:
                    self._later(run_id, self.policy.poll_interval)
                    _log.warning("adoption_scan_failed", run_id=run_id, error=describe(exc))
                    return
                if manifest is not None and manifest.queue is not None:
                    self.queues.offer(manifest)  # started in its turn, with a slot of its own
                read = False
                self.queues.reading(-1)
                if manifest is not None and manifest.queue is None:
                    await self._adopt(manifest)
        finally:
            if read:  # its read failed or was cancelled
                self.queues.reading(-1)
            self._adopting.discard(run_id)

    async def _adopt(self, manifest: RunManifest) -> None:
        run_id = manifest.run_id
        try:
            _log.info("run_adopting", run_id=run_id, status=str(manifest.status))
            await self._recovery.adopt(manifest)
        except RunLockedError:
            self._later(run_id, self.policy.poll_interval)  # a live owner: not an orphan
        except Exception as exc:
            failures = self._failures.get(run_id, 0) + 1
            self._failures[run_id] = failures
            delay = min(self.policy.max_backoff, self.policy.backoff * 2 ** (failures - 1))
            self._later(run_id, delay)
            _log.warning(
                "run_adoption_failed",
                run_id=run_id,
                failures=failures,
                retry_in=round(delay, 3),
                error=describe(exc),
            )
        else:
            self.adopted += 1
            self._failures.pop(run_id, None)
