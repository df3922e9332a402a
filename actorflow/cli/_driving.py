"""Driving runs on a loaded runtime for ``start``, ``recover``, ``fork`` and ``resume``.

The commands are thin: they parse options and call these coroutines, which own
the runtime and the live progress display; what becomes of each run is a
:class:`RunOutcome` for the command to print.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio
import msgspec

from actorflow.cli._loading import require_keys
from actorflow.cli._progress import live_progress, watch_progress
from actorflow.errors import CorruptedDataError, RecoveryFailedError, RunFailedError, RunPaused
from actorflow.runtime.reading import query_run, resolve_checkpoint
from actorflow.storage import RunStatus

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping

    from rich.console import Console

    from actorflow.runtime import RunHandle, Runtime
    from actorflow.storage import Store

__all__ = [
    "RunOutcome",
    "awaited_signal",
    "fork_run",
    "outcomes_exit",
    "recover_runs",
    "resume_run",
    "start_run",
]


_ORPHANS = [RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.INTERRUPTED]
# what recover(run_id) takes: a paused run goes on if its wait can resolve (a signal came)
_TRIED = [*_ORPHANS, RunStatus.BLOCKED, RunStatus.PAUSED]


class RunOutcome(msgspec.Struct, kw_only=True):
    """What became of one run the CLI drove.

    ``checkpoint`` (and its log ``checkpoint_position``) is the checkpoint a
    re-run restored; ``replayed_steps`` counts the log records replayed after it.
    ``corrupt``: the run could not go on because what it recorded is damaged.
    ``signal``: the type of the signal a paused run waits for (None: it waits
    for input, or is not paused).
    """

    run_id: str
    status: str
    replayed_steps: int = 0
    checkpoint: str | None = None
    checkpoint_position: int | None = None
    result: Any = None
    error: str | None = None
    prompt: str | None = None
    signal: str | None = None
    corrupt: bool = False


def outcomes_exit(outcomes: list[RunOutcome]) -> str:
    """The :data:`EXIT_CODES` name for what became of ``outcomes``.

    ``ok`` when every run completed, ``corrupt`` when one could not go on
    because its recorded data is damaged, ``paused`` when the others wait for
    input, else ``run_failed`` (a run failed, or could not be recovered).
    """
    left = [o for o in outcomes if o.status != "completed"]
    if not left:
        return "ok"
    if any(o.corrupt for o in left):
        return "corrupt"
    return "paused" if all(o.status == "paused" for o in left) else "run_failed"


class _Watch:
    """What a run's events say about where a re-run started: checkpoint and replayed records."""

    def __init__(self) -> None:
        self.checkpoint: dict[str, tuple[str, int]] = {}

    async def follow(self, handle: RunHandle) -> None:
        async for event in handle.events(emits=False):
            if event.name == "checkpoint_restored":
                where = (str(event["snapshot_id"]), int(event["position"]))
                self.checkpoint[handle.run_id] = where

    def outcome(self, handle: RunHandle, **fields: Any) -> RunOutcome:
        checkpoint, position = self.checkpoint.get(handle.run_id, (None, None))
        return RunOutcome(
            run_id=handle.run_id,
            replayed_steps=handle.replayed_steps,
            checkpoint=checkpoint,
            checkpoint_position=position,
            **fields,
        )


async def awaited_signal(store: Store, run_id: str) -> str | None:
    """The type of the signal a paused run waits for; None if it waits for input.

    ``resume`` answers input; a signal is sent with ``actorflow signal``.
    """
    waits = [w for w in (await query_run(store, run_id)).waits if w.pause]
    if not waits or any(w.kind == "input" for w in waits):
        return None
    return waits[0].type


async def _drive(
    runtime: Runtime,
    console: Console | None,
    go: Callable[[Callable[[RunHandle], None]], Awaitable[Any]],
) -> RunOutcome:
    """Run one run with the progress display on ``console``; return what became of it.

    ``go(on_start)`` starts the run, calls ``on_start`` with its handle at once,
    and returns its result.
    """
    watch = _Watch()
    handles: list[RunHandle] = []
    with live_progress(console) as sink:
        async with anyio.create_task_group() as tg:

            def follow(handle: RunHandle) -> None:
                handles.append(handle)
                tg.start_soon(watch.follow, handle)
                tg.start_soon(watch_progress, handle, sink)

            try:
                result = await go(follow)
            except (RunPaused, RunFailedError) as exc:
                if not handles:  # it never started: nothing ran to report on
                    raise
                outcome = _stopped(watch, handles[0], exc)
                if isinstance(exc, RunPaused):
                    outcome.signal = await awaited_signal(runtime.store, handles[0].run_id)
            else:
                outcome = watch.outcome(handles[0], status="completed", result=result)
    return outcome


def _stopped(watch: _Watch, handle: RunHandle, exc: RunPaused | RunFailedError) -> RunOutcome:
    if isinstance(exc, RunPaused):
        return watch.outcome(handle, status="paused", prompt=exc.prompt)
    finished = handle.status.finished or handle.status is RunStatus.BLOCKED
    status = str(handle.status) if finished else "failed"
    return watch.outcome(handle, status=status, error=f"{exc.error_type}: {exc.error_message}")


async def _run_handle(
    launch: Callable[[], Awaitable[RunHandle]], on_start: Callable[[RunHandle], None]
) -> Any:
    handle = await launch()
    on_start(handle)
    return await handle.result()


async def start_run(
    runtime: Runtime,
    workflow: type[Any],
    value: Any,
    run_id: str | None,
    console: Console | None,
    *,
    on_started: Callable[[str], None] | None = None,
) -> RunOutcome:
    """Start ``workflow`` on ``value`` and run it to its end (or pause).

    ``on_started`` gets the run id once the run is recorded in the store.
    """

    async def launch() -> RunHandle:
        handle = await runtime.start(workflow, value, run_id=run_id)
        if on_started is not None:
            on_started(handle.run_id)
        return handle

    async with runtime:
        return await _drive(runtime, console, lambda on_start: _run_handle(launch, on_start))


async def recover_runs(
    runtime: Runtime, run_id: str | None, console: Console | None
) -> list[RunOutcome]:
    """Recover orphaned runs (or ``run_id``); one outcome per run it tried, by run id.

    The progress display goes to ``console``.
    """
    async with runtime:
        if run_id is not None:
            # Read it first: an unknown run fails before the progress display
            # shows, and a completed one is no orphan, so there is nothing to do.
            manifest = await runtime.store.read_run(run_id)
            if manifest.status is RunStatus.COMPLETED:
                return []
            if manifest.status not in _TRIED:  # failed...: say so, drive nothing
                return [await _left(runtime, run_id)]
            before = {run_id}
            paused = False
        else:
            await require_keys(runtime.store)  # a sealed orphan must not pass unnoticed
            # as recover() chooses: a blocked run only under other code than blocked it
            version = runtime.config.code_version
            # paused runs are tried too, and shown only if their wait resolved (they start)
            before = {
                m.run_id
                for m in await runtime.runs(status=[*_ORPHANS, RunStatus.BLOCKED])
                if m.status is not RunStatus.BLOCKED or m.blocked_code_version != version
            }
            paused = bool(await runtime.runs(status=[RunStatus.PAUSED]))
        results: dict[str, Any] = {}
        watch = _Watch()
        handles: dict[str, RunHandle] = {}
        if before or paused:
            with live_progress(console) as sink:
                async with anyio.create_task_group() as tg:

                    def follow(handle: RunHandle) -> None:
                        handles[handle.run_id] = handle
                        tg.start_soon(watch.follow, handle)
                        tg.start_soon(watch_progress, handle, sink)

                    results = await runtime.recover(run_id, on_start=follow)
        outcomes = []
        for rid in sorted(before | handles.keys()):
            if rid in results:
                done = watch.outcome(handles[rid], status="completed", result=results[rid])
                outcomes.append(done)
            else:
                outcomes.append(await _left(runtime, rid, handles.get(rid)))
    return outcomes


async def _left(runtime: Runtime, run_id: str, handle: RunHandle | None = None) -> RunOutcome:
    """A run recover did not finish, as the store has it now (paused, failed, interrupted...).

    Left running or interrupted, its error is why the attempt ended (the
    error of ``handle``, the attempt this process made, if any).
    """
    manifest = await runtime.store.read_run(run_id)
    error = f"{manifest.error.type}: {manifest.error.message}" if manifest.error else None
    corrupt = False
    if handle is not None and handle.done and manifest.status in _ORPHANS:
        try:
            await handle.result()
        except Exception as exc:  # the attempt's error; actorflow's messages are capped
            error = f"{type(exc).__name__}: {exc}"
            cause = exc.__cause__ if isinstance(exc, RecoveryFailedError) else exc
            corrupt = isinstance(cause, CorruptedDataError)
    paused = manifest.status is RunStatus.PAUSED
    return RunOutcome(
        run_id=run_id,
        status=str(manifest.status),
        error=error,
        prompt=manifest.prompt,
        signal=await awaited_signal(runtime.store, run_id) if paused else None,
        corrupt=corrupt,
    )


async def fork_run(
    runtime: Runtime,
    run_id: str,
    checkpoint: str,
    console: Console | None,
    *,
    on_forked: Callable[[str], None] | None = None,
    edit: Mapping[str, object] | None = None,
) -> RunOutcome:
    """Fork ``run_id`` at ``checkpoint`` (id, prefix, ``latest~N``...); run it to the end.

    ``on_forked`` gets the new run's id as soon as it is recorded; ``edit``
    is ``runtime.fork``'s.
    """

    async def launch() -> RunHandle:
        handle = await runtime.fork(run_id, checkpoint_id, edit=edit)
        if on_forked is not None:
            on_forked(handle.run_id)
        return handle

    async with runtime:
        checkpoint_id = await resolve_checkpoint(runtime.store, run_id, checkpoint)
        return await _drive(runtime, console, lambda on_start: _run_handle(launch, on_start))


async def resume_run(
    runtime: Runtime, run_id: str, response: str, console: Console | None
) -> RunOutcome:
    """Answer a paused run and run it to its end (or its next pause)."""
    async with runtime:
        return await _drive(
            runtime, console, lambda on_start: runtime.resume(run_id, response, on_start=on_start)
        )
