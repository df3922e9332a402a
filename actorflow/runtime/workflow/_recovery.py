"""Recovering stored runs: which to take, waking paused ones, driving each to its end.

``Runtime.recover()``, ``Runtime.resume()`` (a paused run, answered) and a
worker's adoptions all come here. What is shared with starting a run (the
claim, marking the run running, counting an attempt, driving it) stays with
the runtime's ``Runs`` (``_runs.py``), reached through :class:`RecoveringRuns`;
this module decides which runs are worth taking and what a taken run's end
means for its caller.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Protocol

import anyio
import msgspec

from actorflow._log import get_logger
from actorflow._text import describe
from actorflow.errors import (
    ConfigurationError,
    RecoveryFailedError,
    RunLockedError,
    RunNotPausedError,
)
from actorflow.runtime.workflow._handle import fail_run
from actorflow.runtime.workflow._inbox import classify, feeds_wait, wait_source
from actorflow.runtime.workflow._outcomes import workflow_class
from actorflow.runtime.workflow._replay import load_view
from actorflow.runtime.workflow._signals import send_signal
from actorflow.runtime.workflow._wait_records import pending_waits, signal_type
from actorflow.storage import (
    RunManifest,
    RunStatus,
    SupportsInbox,
    read_messages,
    validate_run_id,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from actorflow.runtime.workflow._config import RuntimeConfig
    from actorflow.runtime.workflow._handle import RunHandle
    from actorflow.storage import Store

__all__ = ["ORPHANS", "RECOVERABLE", "RecoveringRuns", "Recovery", "can_go_on", "woken"]

_log = get_logger("actorflow.runtime")


def woken(manifest: RunManifest) -> RunManifest:
    """A paused run marked interrupted, to be taken (``resume``, a resolvable wait); else as is.

    Applied inside the store's manifest update, so a run another process
    took or finished meanwhile is left as it is.
    """
    if manifest.status is not RunStatus.PAUSED:
        return manifest
    return msgspec.structs.replace(
        manifest, status=RunStatus.INTERRUPTED, prompt=None, deadline=None, updated=time.time()
    )


ORPHANS = (RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.INTERRUPTED)
"""Statuses of runs nobody may be driving: taking the claim tells."""
RECOVERABLE = (*ORPHANS, RunStatus.BLOCKED)
"""What ``recover(run_id)`` takes (a blocked run too, when tried again)."""

_SKIPPED: Any = object()
"""What recovering a run that was no orphan after all gives: nothing to report."""


class RecoveringRuns(Protocol):
    """What recovery asks of the runtime's runs (``Runs``, in ``_runs.py``)."""

    @property
    def store(self) -> Store:
        """The runtime's store."""
        ...

    @property
    def config(self) -> RuntimeConfig:
        """Its options (``code_version``, ``recovery_timeout``)."""
        ...

    @property
    def owner(self) -> str:
        """The runtime's owner name (the sender of what it posts)."""
        ...

    @property
    def stopping(self) -> bool:
        """Whether the runtime began to stop (an attempt it stopped is no failure)."""
        ...

    def drives(self, run_id: str) -> bool:
        """Whether the runtime drives the run already."""
        ...

    async def take_and_drive(
        self,
        workflow: type[Any],
        manifest: RunManifest,
        *,
        fresh: bool,
        recovering: bool,
        adopting: bool = False,
    ) -> tuple[RunHandle, bool]:
        """Claim the run, mark it running, drive it: its handle, and whether it is driven now.

        ``False``: it had ended (or paused) by the time it was taken.
        """
        ...


class Recovery:
    """A runtime's recoveries: ``recover()`` (all or one run) and a worker's adoptions.

    Args:
        runs: the runtime's runs: its store and options, how it takes and
            drives one run, and whether it began to stop (an attempt it
            stopped is no failure).
    """

    def __init__(self, runs: RecoveringRuns) -> None:
        self._runs = runs
        self._store = runs.store
        self._config = runs.config

    async def recover(
        self, run_id: str | None, on_start: Callable[[RunHandle], object] | None
    ) -> dict[str, Any]:
        """``Runtime.recover``: see its docstring."""
        if run_id is not None:
            return await self._recover_named(run_id, on_start)
        manifests = await self._store.list_runs(status=[*RECOVERABLE, RunStatus.PAUSED])
        results: dict[str, Any] = {}

        async def one(m: RunManifest) -> None:
            try:
                if m.status is RunStatus.PAUSED:
                    m = await self.wake_paused(m)
                    if m.status is RunStatus.PAUSED:
                        return
                outcome = await self._recover_one(m, on_start)
            except RunLockedError:
                return  # a live process owns it: not an orphan after all
            except Exception as exc:
                # one run that cannot be recovered (paused again, failed, its
                # class not imported, its store or code broken) never stops the others
                _log.warning("run_not_recovered", run_id=m.run_id, error=describe(exc))
                return
            if outcome is not _SKIPPED:
                results[m.run_id] = outcome

        async with anyio.create_task_group() as tg:
            for m in manifests:
                if m.status is RunStatus.BLOCKED and not self.retries_blocked(m):
                    continue
                # taking the run (its lock or lease) is what tells an orphan
                # from a run a live process owns
                tg.start_soon(one, m)
        return results

    async def _recover_named(
        self, run_id: str, on_start: Callable[[RunHandle], object] | None
    ) -> dict[str, Any]:
        """``recover(run_id)``: a blocked run is tried whatever its code version."""
        manifest = await self._store.read_run(validate_run_id(run_id))
        if manifest.status is RunStatus.PAUSED:
            manifest = await self.wake_paused(manifest)
        if manifest.status not in RECOVERABLE:
            return {}
        try:
            outcome = await self._recover_one(manifest, on_start)
        except RunLockedError:
            raise
        except Exception as exc:
            _log.warning("run_not_recovered", run_id=run_id, error=describe(exc))
            return {}
        return {} if outcome is _SKIPPED else {run_id: outcome}

    async def resume(
        self,
        run_id: str,
        response: object,
        on_start: Callable[[RunHandle], object] | None = None,
    ) -> RunHandle:
        """``Runtime.resume``'s work: send the answer to the paused run's wait, take the run.

        ``on_start`` is called with the run's handle once it is taken.

        Raises:
            RunNotFoundError: no such run.
            RunNotPausedError: the run is not paused (its status says why).
            ConfigurationError: the run's wait takes another type of response.
            RunLockedError: another process resumed it meanwhile and drives it.
        """
        manifest = await self._store.read_run(validate_run_id(run_id))
        if manifest.status is not RunStatus.PAUSED:
            raise RunNotPausedError(run_id, str(manifest.status))
        workflow = workflow_class(manifest)
        view, _ = await load_view(self._store, run_id, lambda *a, **k: None)
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
                self._store,
                run_id,
                response,
                entry_id=None,
                sender=self._runs.owner,
                max_size=None,
                resumes=reported[0].step_id,
            )
        # only while still paused: a resume that lost a race with another
        # (which has taken the run since) must leave the live run as it is
        manifest = await self._store.update_run(run_id, woken)
        handle, _ = await self._runs.take_and_drive(
            workflow, manifest, fresh=False, recovering=False
        )
        if on_start is not None:
            on_start(handle)
        return handle

    def drives(self, run_id: str) -> bool:
        """Whether the runtime drives run ``run_id`` already (a worker leaves it alone)."""
        return self._runs.drives(run_id)

    async def wake_paused(self, manifest: RunManifest) -> RunManifest:
        """A paused run whose wait can resolve now, marked interrupted (to recover); else as is."""
        if not await can_go_on(self._store, manifest):
            return manifest
        taken = await self._store.update_run(manifest.run_id, woken)
        _log.info("paused_run_woken", run_id=manifest.run_id, status=str(taken.status))
        return taken

    def retries_blocked(self, manifest: RunManifest) -> bool:
        """Whether a blocked run is tried again unasked: under other code than blocked it."""
        if manifest.blocked_code_version != self._config.code_version:
            return True
        _log.warning(
            "run_blocked_skipped",
            run_id=manifest.run_id,
            code_version=manifest.blocked_code_version,
            error=manifest.error.message if manifest.error else None,
        )
        return False

    async def _recover_one(
        self, manifest: RunManifest, on_start: Callable[[RunHandle], object] | None
    ) -> Any:
        """The run's result once recovered, or ``_SKIPPED`` if it was no orphan after all."""
        workflow = workflow_class(manifest)
        handle, driven = await self._runs.take_and_drive(
            workflow, manifest, fresh=False, recovering=True
        )
        if not driven:
            # another process finished (or paused) it meanwhile
            return await handle.result() if handle.status is RunStatus.COMPLETED else _SKIPPED
        if on_start is not None:
            on_start(handle)
        timeout = self._config.recovery_timeout
        if timeout is None:
            return await handle.result()
        with anyio.move_on_after(timeout) as scope:
            return await handle.result()
        if scope.cancelled_caught:
            # the run ends failed, its end recorded (docs/recovery.md), not left for a retry
            error = RecoveryFailedError(
                manifest.run_id, f"did not finish within recovery_timeout={timeout}s"
            )
            fail_run(handle, error)
            await handle.wait()
            raise error
        return None

    async def adopt(self, manifest: RunManifest) -> bool:
        """A worker's adoption: drive an orphan to its end (or pause); whether this process did.

        Raises:
            RunLockedError: a live owner holds it.
            RecoveryFailedError: the attempt failed and left the run for a later one.
        """
        workflow = workflow_class(manifest)
        handle, driven = await self._runs.take_and_drive(
            workflow, manifest, fresh=False, recovering=True, adopting=True
        )
        if not driven:
            return False
        await handle.wait()
        # ended, paused or blocked is an adoption done; an attempt that stopped
        # short (its error kept for the next one) is a failure, to back off from
        if handle.status in ORPHANS and not self._runs.stopping:
            try:
                await handle.result()
            except Exception as exc:
                raise RecoveryFailedError(manifest.run_id, describe(exc)) from exc
            raise RecoveryFailedError(manifest.run_id, "its attempt stopped short")
        return True


async def can_go_on(store: Store, manifest: RunManifest) -> bool:
    """Whether a paused run's wait can resolve now: a signal it takes, or a passed deadline.

    Reads the inbox first; only a run with a message of a type it might wait
    for has its waits and taken entries loaded (newest snapshot plus log tail).
    """
    now = time.time()
    if manifest.deadline is not None and manifest.deadline <= now:
        return True
    run_id = manifest.run_id
    entries = await read_messages(store, run_id) if isinstance(store, SupportsInbox) else []
    view, _ = await load_view(store, run_id, _quiet)
    waits = pending_waits(view.events, view.steps)
    if not waits:
        return True  # answered before the run went on: it goes on with that answer
    if any(w.deadline is not None and w.deadline <= now for w in waits):
        return True
    return any(
        e.seq not in view.inbox_taken
        and any(feeds_wait(e, classify(e), wait_source(w.type), w.type) for w in waits)
        for e in entries
    )


def _quiet(*args: object, **kwargs: object) -> None:
    """Events of a look at a run that this process does not drive: not reported."""
