"""Driving runs on a loaded runtime for ``recover``, ``fork`` and ``resume``.

The commands are thin: they parse options and call these coroutines, which own
the runtime and the live progress display; what becomes of each run is a
:class:`RunOutcome` for the command to print.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio
import msgspec

from actorflow._demo import RichProgress, use_progress, watch_checkpoints
from actorflow.cli._inspect import resolve_checkpoint
from actorflow.errors import ActorflowError
from actorflow.storage import RunStatus

if TYPE_CHECKING:
    from rich.console import Console

    from actorflow.runtime import RunHandle, Runtime

__all__ = ["RunOutcome", "fork_run", "recover_runs", "resume_run"]


class RunOutcome(msgspec.Struct, kw_only=True):
    """What became of one run the CLI drove."""

    run_id: str
    status: str
    replayed_steps: int = 0
    result: Any = None
    error: str | None = None


def _outcome(runtime: Runtime, run_id: str, result: Any) -> RunOutcome:
    try:
        replayed = runtime.handle(run_id).replayed_steps
    except ActorflowError:
        replayed = 0
    return RunOutcome(run_id=run_id, status="completed", replayed_steps=replayed, result=result)


async def recover_runs(
    runtime: Runtime, run_id: str | None, console: Console
) -> tuple[list[RunOutcome], list[RunOutcome]]:
    """Recover orphaned runs (or ``run_id``); return (finished, not finished) outcomes.

    The progress display (the demo's, which any workflow's checkpoints also
    advance) goes to ``console``.
    """
    async with runtime:
        if run_id is not None:
            # Read it first: an unknown run fails before the progress display
            # shows, and a completed one is no orphan, so there is nothing to do.
            manifest = await runtime.store.read_run(run_id)
            before = set() if manifest.status is RunStatus.COMPLETED else {run_id}
        else:
            orphans = [RunStatus.RUNNING, RunStatus.INTERRUPTED]
            before = {m.run_id for m in await runtime.runs(status=orphans)}
        results: dict[str, Any] = {}
        if before:
            with RichProgress(console) as sink, use_progress(sink):
                async with anyio.create_task_group() as tg:

                    def follow(handle: RunHandle) -> None:
                        tg.start_soon(watch_checkpoints, handle, sink)

                    results = await runtime.recover(run_id, on_start=follow)
        finished = [_outcome(runtime, rid, res) for rid, res in sorted(results.items())]
        left = [await _left(runtime, rid) for rid in sorted(before - set(results))]
    return finished, left


async def _left(runtime: Runtime, run_id: str) -> RunOutcome:
    manifest = await runtime.store.read_run(run_id)
    error = manifest.error
    return RunOutcome(
        run_id=run_id,
        status=str(manifest.status),
        error=f"{error.type}: {error.message}" if error else manifest.prompt,
    )


async def fork_run(runtime: Runtime, run_id: str, checkpoint: str) -> RunOutcome:
    """Fork ``run_id`` at ``checkpoint`` (id, prefix, ``latest~N``...); run it to the end."""
    async with runtime:
        checkpoint_id = await resolve_checkpoint(runtime.store, run_id, checkpoint)
        handle = await runtime.fork(run_id, checkpoint_id)
        result = await handle.result()
    return RunOutcome(
        run_id=handle.run_id,
        status=str(handle.status),
        replayed_steps=handle.replayed_steps,
        result=result,
    )


async def resume_run(runtime: Runtime, run_id: str, response: str) -> RunOutcome:
    """Answer a paused run and run it to its end."""
    async with runtime:
        result = await runtime.resume(run_id, response)
    return _outcome(runtime, run_id, result)
