"""Helpers for testing your own workflows' recovery.

Crash a run at a chosen point of its log, recover it in a fresh runtime and
compare with a run that never crashed::

    from actorflow.testing import crash_and_recover

    async def test_my_workflow_survives_a_crash_anywhere():
        for after in range(1, 30):
            outcome = await crash_and_recover(MyWorkflow, my_input, crash_after=after)
            assert outcome.recovered == outcome.expected

The crash is simulated in-process: once ``crash_after`` log records are
durable, the store accepts no more writes (as if the process had died at that
instant), the run's claims are dropped as the operating system would drop a
dead process's locks, and the runtime is torn down. Recovery then runs on the
same data. For crashes of real processes, kill a child process with SIGKILL
and call ``runtime.recover()`` in a new one (see docs/recovery.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio
import msgspec

from actorflow.errors import StorageError
from actorflow.runtime import Runtime, RuntimeConfig

if TYPE_CHECKING:
    from collections.abc import Sequence

    from actorflow.storage import Lease, LogRecord, Store

__all__ = [
    "CrashOutcome",
    "CrashingStore",
    "SimulatedCrashError",
    "crash_and_recover",
    "run_in_memory",
]


class SimulatedCrashError(StorageError):
    """A write after the simulated crash: the process is 'dead'."""

    def __init__(self) -> None:
        super().__init__("write", "the process crashed (simulated by actorflow.testing)")


class CrashingStore:
    """A store that 'dies' once ``crash_after`` log records are durable.

    Reads pass through; after the crash every write raises
    ``SimulatedCrashError`` and the claims taken through it are released
    underneath, as a dead process's locks are.
    """

    def __init__(self, inner: Store, *, crash_after: int) -> None:
        self.inner = inner
        self.crash_after = crash_after
        self.appended = 0
        self.crashed = anyio.Event()
        self._leases: list[Lease] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _check(self) -> None:
        if self.crashed.is_set():
            raise SimulatedCrashError

    async def _die(self) -> None:
        self.crashed.set()
        for lease in self._leases:
            await self.inner.release(lease)
        self._leases.clear()

    async def append(self, run_id: str, records: Sequence[LogRecord]) -> int:
        """Append up to the crash point; the record that crosses it is the last."""
        self._check()
        room = self.crash_after - self.appended
        if room <= 0:
            await self._die()
            self._check()
        batch = list(records)[:room]
        length = await self.inner.append(run_id, batch)
        self.appended += len(batch)
        if len(batch) < len(records) or self.appended >= self.crash_after:
            await self._die()
            self._check()
        return length

    async def claim(self, run_id: str, owner: str) -> Lease:
        """Claim through the inner store, remembering the lease to drop at the crash."""
        self._check()
        lease = await self.inner.claim(run_id, owner)
        self._leases.append(lease)
        return lease

    async def release(self, lease: Lease) -> None:
        """Release, unless the 'process' is dead (then the crash released it)."""
        self._check()
        await self.inner.release(lease)

    async def update_run(self, run_id: str, change: Any) -> Any:
        """Update the manifest unless crashed."""
        self._check()
        return await self.inner.update_run(run_id, change)

    async def write_snapshot(self, snapshot: Any, *, update: Any = None) -> Any:
        """Write a snapshot (and apply ``update`` to the manifest) unless crashed."""
        self._check()
        if update is None:
            return await self.inner.write_snapshot(snapshot)
        return await self.inner.write_snapshot(snapshot, update=update)

    async def put_blob(self, run_id: str, data: bytes) -> str:
        """Store a blob unless crashed."""
        self._check()
        return await self.inner.put_blob(run_id, data)

    async def aclose(self) -> None:
        """Closing the wrapper leaves the inner store open for recovery."""


class CrashOutcome(msgspec.Struct, kw_only=True):
    """What ``crash_and_recover`` saw.

    Attributes:
        expected: the result of a run that never crashed.
        recovered: the result after the crash and ``recover()``, or None if
            the run had already finished before the crash point.
        crashed: whether the crash point was reached before the run finished.
        replayed: log records read back by the recovery.
    """

    expected: Any
    recovered: Any
    crashed: bool
    replayed: int = 0


async def run_in_memory(
    workflow: type[Any],
    input: Any,
    *,
    config: RuntimeConfig | None = None,
    store: Store | None = None,
    run_id: str | None = None,
) -> Any:
    """Run ``workflow`` to the end on a ``MemoryStore`` (or ``store``) and return its result."""
    from actorflow.storage import MemoryStore

    async with Runtime(store=store or MemoryStore(), config=config) as runtime:
        return await runtime.run(workflow, input, run_id=run_id)


async def crash_and_recover(
    workflow: type[Any],
    input: Any,
    *,
    crash_after: int,
    config: RuntimeConfig | None = None,
    store: Store | None = None,
    run_id: str = "crash-test",
) -> CrashOutcome:
    """Run once uninterrupted, then again crashing after ``crash_after`` records, recover, compare.

    The caller compares ``outcome.recovered`` with ``outcome.expected`` (they
    differ only if the workflow is not deterministic or its agents' results
    depend on more than their inputs and states).
    """
    from actorflow.storage import MemoryStore

    expected = await run_in_memory(workflow, input, config=config, run_id=run_id)
    inner = store if store is not None else MemoryStore()
    crashing = CrashingStore(inner, crash_after=crash_after)
    finished = False
    async with Runtime(store=crashing, config=config) as runtime:
        handle = await runtime.start(workflow, input, run_id=run_id)
        async with anyio.create_task_group() as tg:

            async def watch() -> None:
                await crashing.crashed.wait()
                tg.cancel_scope.cancel()

            tg.start_soon(watch)
            await handle.wait()
            finished = not crashing.crashed.is_set()
            tg.cancel_scope.cancel()
    if finished:
        return CrashOutcome(expected=expected, recovered=None, crashed=False)
    async with Runtime(store=inner, config=config) as runtime:
        results = await runtime.recover(run_id)
        replayed = runtime.handle(run_id).replayed_steps
    return CrashOutcome(
        expected=expected, recovered=results.get(run_id), crashed=True, replayed=replayed
    )
