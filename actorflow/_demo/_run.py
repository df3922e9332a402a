"""Driving workflows from the command line: the demo, ``--app`` loading, recover/fork/resume.

The CLI's commands are thin: they parse options and call these coroutines,
which own the runtime, the live progress display and what gets printed.
"""

from __future__ import annotations

import datetime as dt
import importlib
import inspect
import os
import sys
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import msgspec
from rich.table import Table

from actorflow._demo._analysis import default_root
from actorflow._demo._progress import ProgressSink, RichProgress, use_progress
from actorflow._demo._workflow import ReviewInput, ReviewSummary, ReviewTeam
from actorflow._inspect import resolve_checkpoint
from actorflow.errors import ActorflowError, ConfigurationError
from actorflow.runtime import Runtime

if TYPE_CHECKING:
    from collections.abc import Mapping

    from rich.console import Console

    from actorflow.runtime import RunHandle

__all__ = [
    "RunOutcome",
    "fork_run",
    "load_app",
    "recover_runs",
    "resume_run",
    "run_demo",
    "summary_table",
]


class RunOutcome(msgspec.Struct, kw_only=True):
    """What became of one run the CLI drove."""

    run_id: str
    status: str
    replayed_steps: int = 0
    result: Any = None
    error: str | None = None


def new_run_id() -> str:
    """A readable, unique demo run id: ``review-20250101-120000-1a2b``."""
    return f"review-{dt.datetime.now():%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:4]}"


async def _watch(handle: RunHandle, sink: ProgressSink) -> None:
    async for event in handle.events():
        if event.name == "checkpoint_saved":
            sink.checkpoint_written(str(event.get("snapshot_id", "")))


async def run_demo(
    *,
    store: str,
    console: Console,
    path: str | None = None,
    report: str | None = None,
    run_id: str | None = None,
    reviewers: int = 4,
) -> tuple[str, ReviewSummary]:
    """Run the code-review demo over ``path`` (default: the standard library) with live progress.

    Raises:
        ConfigurationError: ``path`` is not a folder.
    """
    root = Path(path) if path else default_root()
    if not root.is_dir():
        raise ConfigurationError("--path", str(root), "an existing folder")
    report_path = Path(report) if report else Path(store) / "actorflow-report.json"
    job = ReviewInput(
        root=str(root.resolve()), report_path=str(report_path.absolute()), reviewers=reviewers
    )
    run_id = run_id or new_run_id()
    runtime = Runtime(store=store)  # bad options fail here, before the progress bar shows
    console.print(f"run [bold]{run_id}[/]: reviewing [bold]{job.root}[/]; data in {store}")
    with RichProgress(console) as sink, use_progress(sink):
        async with runtime:
            handle = await runtime.start(ReviewTeam, job, run_id=run_id)
            async with anyio.create_task_group() as tg:
                tg.start_soon(_watch, handle, sink)
                await handle.wait()
            summary: ReviewSummary = await handle.result()
    return run_id, summary


def summary_table(summary: ReviewSummary, *, limit: int = 15) -> Table:
    """The review's least confident areas, with totals in the caption."""
    table = Table(
        title=f"code review of {summary.root}",
        caption=(
            f"{summary.files} files ({summary.unparsable} unparsable), {summary.lines:,} lines, "
            f"{summary.functions:,} functions, {summary.classes:,} classes, "
            f"{summary.risky_calls} risky calls, {summary.missing_docstrings:,} missing "
            f"docstrings; * {len(summary.reanalysed)} area(s) re-reviewed strictly"
        ),
    )
    table.add_column("area", overflow="fold", min_width=14)
    for col in ("files", "conf.", "risky", "no doc", "max cx"):
        table.add_column(col, justify="right", no_wrap=True, min_width=len(col))
    table.add_column("main reason", min_width=12)
    for s in summary.areas[:limit]:
        style = "red" if s.confidence < 0.5 else "yellow" if s.confidence < 0.75 else "green"
        table.add_row(
            s.area,
            str(s.files),
            f"[{style}]{s.confidence:.2f}[/]{'*' if s.strict else ' '}",
            str(s.risky_calls),
            str(s.missing_docstrings),
            str(s.max_complexity),
            s.rationale.split("; ")[0],  # the full rationale is in the log and the report
        )
    return table


def load_app(spec: str | None, store: str | None) -> Runtime:
    """The runtime ``spec`` (``module:attr``) names, or a plain one for the demo.

    ``attr`` is a ``Runtime`` or a function returning one; a function that
    takes a ``store`` parameter gets ``store``.
    Importing the module registers its workflow and agent classes.

    Raises:
        ConfigurationError: ``spec`` is malformed, or does not name a Runtime.
    """
    if spec is None:
        return Runtime(store=store)
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ConfigurationError("--app", spec, "module:attr, e.g. myproject.flows:runtime")
    # The user's program usually sits in the current folder, as for `python -m`.
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        target: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            target = getattr(target, part)
    except Exception as exc:  # the user's module may fail in any way while importing
        raise ConfigurationError(
            "--app", spec, f"an importable module:attr ({type(exc).__name__}: {exc})"
        ) from exc
    if callable(target) and not isinstance(target, Runtime):
        params = _parameters(target)
        try:
            target = target(store=store) if store is not None and "store" in params else target()
        except Exception as exc:
            raise ConfigurationError(
                "--app", spec, f"a function returning a Runtime ({type(exc).__name__}: {exc})"
            ) from exc
        store = None if "store" in params else store
    if not isinstance(target, Runtime):
        raise ConfigurationError("--app", spec, "a Runtime or a function returning one")
    runtime: Runtime = target
    if store is not None:
        # --store wins: the same options on another store.
        runtime = Runtime(
            store=store,
            config=runtime.config,
            mailbox_size=runtime.mailbox_size,
            supervisor=runtime.supervisor,
            shutdown_timeout=runtime.shutdown_timeout,
        )
    return runtime


def _parameters(fn: Any) -> Mapping[str, Any]:
    try:
        return inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return {}


def _outcome(runtime: Runtime, run_id: str, result: Any) -> RunOutcome:
    try:
        replayed = runtime.handle(run_id).replayed_steps
    except ActorflowError:
        replayed = 0
    return RunOutcome(run_id=run_id, status="completed", replayed_steps=replayed, result=result)


async def recover_runs(
    runtime: Runtime, run_id: str | None, console: Console
) -> tuple[list[RunOutcome], list[RunOutcome]]:
    """Recover orphaned runs; return (finished, not finished) outcomes."""
    async with runtime:
        if run_id is not None:
            before = {run_id}
        else:
            before = {m.run_id for m in await runtime.runs(status=_orphan_statuses())}
        if before:
            with RichProgress(console) as sink, use_progress(sink):
                async with anyio.create_task_group() as tg:

                    def follow(handle: RunHandle) -> None:
                        tg.start_soon(_watch, handle, sink)

                    results = await runtime.recover(run_id, on_start=follow)
        else:
            results = {}
        finished = [_outcome(runtime, rid, res) for rid, res in sorted(results.items())]
        left = []
        for rid in sorted(before - set(results)):
            manifest = await runtime.store.read_run(rid)
            error = manifest.error
            left.append(
                RunOutcome(
                    run_id=rid,
                    status=str(manifest.status),
                    error=f"{error.type}: {error.message}" if error else manifest.prompt,
                )
            )
    return finished, left


def _orphan_statuses() -> list[Any]:
    from actorflow.storage import RunStatus

    return [RunStatus.RUNNING, RunStatus.INTERRUPTED]


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
