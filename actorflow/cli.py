"""The ``actorflow`` command line (also ``python -m actorflow``).

Readers (``runs``, ``checkpoints``, ``show``, ``log``, ``validate``, ``diff``)
only open the store; ``demo``, ``recover``, ``fork`` and ``resume`` run
workflows. Every command takes ``--store`` (a folder, or ``s3://bucket/prefix``;
default ``$ACTORFLOW_STORE``, else ``./.actorflow``). An actorflow error ends
the command with one line on stderr and a documented exit code; ``--debug``
shows the traceback instead.

Exit codes: 0 success; 1 any other actorflow error; 2 bad usage; 3 corrupt
data found; 4 run or checkpoint not found; 5 the run failed; 6 the run is
paused for input; 7 the run is owned by another live process; 130 interrupted.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Final, TypeVar

import anyio
import msgspec
import typer
from rich.table import Table

from actorflow import _inspect
from actorflow._cli_render import (
    err,
    manifest_row,
    out,
    print_diff,
    print_json,
    print_outcomes,
    print_record,
    print_result,
    size,
    status_text,
    when,
)
from actorflow.errors import (
    ActorflowError,
    CheckpointNotFoundError,
    CorruptedDataError,
    RunFailedError,
    RunLockedError,
    RunNotFoundError,
    RunPaused,
    StoreUnavailableError,
)
from actorflow.storage import (
    PruneReport,
    RetentionPolicy,
    RunManifest,
    RunStatus,
    Store,
    open_store,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

__all__ = ["EXIT_CODES", "app", "main", "open_store"]

T = TypeVar("T")

DEFAULT_STORE: Final = "./.actorflow"

EXIT_CODES: Final[dict[str, int]] = {
    "ok": 0,
    "error": 1,
    "usage": 2,
    "corrupt": 3,
    "not_found": 4,
    "run_failed": 5,
    "paused": 6,
    "locked": 7,
    "interrupted": 130,
}

app = typer.Typer(
    name="actorflow",
    help="Multi-agent workflows as actors that survive crashes: run, inspect, recover.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


StoreOpt = Annotated[
    str,
    typer.Option(
        "--store",
        envvar="ACTORFLOW_STORE",
        help="Store: a folder path or s3://bucket/prefix.",
        show_envvar=True,
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print data as JSON.")]
DebugOpt = Annotated[bool, typer.Option("--debug", help="Show tracebacks of errors.")]
RunArg = Annotated[str, typer.Argument(help="Run id (see `actorflow runs`).")]
CheckpointArg = Annotated[
    str,
    typer.Argument(
        help="Checkpoint: an id, a unique prefix of one, `latest`, or `latest~N` (N before it)."
    ),
]


def exit_code_for(error: BaseException) -> int:
    """The documented exit code for ``error``."""
    match error:
        case CorruptedDataError():
            return EXIT_CODES["corrupt"]
        case RunNotFoundError() | CheckpointNotFoundError():
            return EXIT_CODES["not_found"]
        case RunFailedError():
            return EXIT_CODES["run_failed"]
        case RunPaused():
            return EXIT_CODES["paused"]
        case RunLockedError():
            return EXIT_CODES["locked"]
        case KeyboardInterrupt():
            return EXIT_CODES["interrupted"]
        case _:
            return EXIT_CODES["error"]


def _existing_store(spec: str) -> Store:
    # A reader must not create an empty store where the user mistyped a path.
    if not spec.startswith("s3://") and not Path(spec).is_dir():
        raise StoreUnavailableError(
            "open store",
            f"no actorflow store at {spec}; run `actorflow demo` first, "
            "or pass --store / set ACTORFLOW_STORE",
        )
    return open_store(spec)


def run_command(fn: Callable[[], Awaitable[T]], *, debug: bool, run_hint: str | None = None) -> T:
    """Run ``fn`` on an event loop; an error becomes one line and its exit code."""
    try:
        try:
            return anyio.run(fn)
        except BaseExceptionGroup as group:
            # A task group around the work wraps its error; one actorflow error is the story.
            errors = _leaves(group)
            if len(errors) == 1 and isinstance(errors[0], ActorflowError | KeyboardInterrupt):
                raise errors[0] from group
            raise
    except ActorflowError as exc:
        if debug:
            raise
        err().print(f"[bold red]error:[/] {exc}", markup=True, highlight=False)
        raise typer.Exit(exit_code_for(exc)) from None
    except KeyboardInterrupt:
        which = f" {run_hint}" if run_hint else ""
        err().print(f"interrupted: `actorflow recover{which}` continues where it stopped")
        raise typer.Exit(EXIT_CODES["interrupted"]) from None


def _leaves(group: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    found: list[BaseException] = []
    for exc in group.exceptions:
        found.extend(_leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc])
    return found


async def with_store(
    spec: str, body: Callable[[Store], Awaitable[T]], *, create: bool = False
) -> T:
    """Open the store, run ``body`` with it, close it."""
    store = open_store(spec) if create else _existing_store(spec)
    try:
        return await body(store)
    finally:
        await store.aclose()


def _statuses(values: list[str] | None) -> list[RunStatus] | None:
    if not values:
        return None
    try:
        return [RunStatus(v.lower()) for v in values]
    except ValueError:
        choices = ", ".join(s.value for s in RunStatus)
        raise typer.BadParameter(f"status must be one of {choices}") from None


@app.command("runs")
def runs_command(
    status: Annotated[
        list[str] | None, typer.Option("--status", help="Only runs with this status (repeatable).")
    ] = None,
    workflow: Annotated[str | None, typer.Option(help="Only runs of this workflow.")] = None,
    store: StoreOpt = DEFAULT_STORE,
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """List runs: id, workflow, status, phase, started, updated, checkpoints, size."""
    wanted = _statuses(status)

    async def body(s: Store) -> list[RunManifest]:
        return await s.list_runs(status=wanted, workflow=workflow)

    rows = [manifest_row(m) for m in run_command(lambda: with_store(store, body), debug=debug)]
    if as_json:
        print_json(rows)
        return
    table = Table(title=f"runs in {store}")
    table.add_column("run", overflow="fold", min_width=12)
    for col in ("workflow", "status", "phase", "started", "updated", "ckpts", "size"):
        right = col in ("ckpts", "size")
        table.add_column(col, justify="right" if right else "left", overflow="fold")
    for r in rows:
        table.add_row(
            r["run_id"],
            r["workflow"],
            status_text(r["status"]),
            r["phase"] or "-",
            when(r["started"]),
            when(r["updated"]),
            str(r["snapshots"]),
            size(r["size"]),
        )
    out().print(table if rows else f"no runs in {store}")


@app.command("checkpoints")
def checkpoints_command(
    run_id: RunArg,
    store: StoreOpt = DEFAULT_STORE,
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """List a run's checkpoints: id, phase, trigger, time, sizes, checksum status."""

    async def body(s: Store) -> list[dict[str, Any]]:
        await s.read_run(run_id)
        rows = []
        for info in _inspect.live_snapshots(await s.list_snapshots(run_id)):
            try:
                await s.read_snapshot(run_id, info.snapshot_id)
                check = "ok"
            except CorruptedDataError as exc:
                check = f"corrupt: {exc.cause_text}"
            rows.append({**msgspec.to_builtins(info), "checksum": check})
        return rows

    rows = run_command(lambda: with_store(store, body), debug=debug)
    if as_json:
        print_json(rows)
        return
    table = Table(title=f"checkpoints of {run_id}")
    for col in ("checkpoint", "position", "phase", "trigger", "time", "stored", "raw", "checksum"):
        right = col in ("position", "stored", "raw")
        table.add_column(col, justify="right" if right else "left")
    for r in rows:
        ok = r["checksum"] == "ok"
        table.add_row(
            r["snapshot_id"],
            str(r["position"]),
            r["phase"] or "-",
            r["trigger"],
            when(r["created"]),
            size(r["stored_size"]),
            size(r["raw_size"]),
            f"[green]{r['checksum']}[/]" if ok else f"[bold red]{r['checksum']}[/]",
        )
    out().print(table if rows else f"run {run_id} has no checkpoints")


@app.command("show")
def show_command(
    run_id: RunArg,
    checkpoint: CheckpointArg,
    store: StoreOpt = DEFAULT_STORE,
    debug: DebugOpt = False,
) -> None:
    """Print one checkpoint as JSON, with agent states, results and decisions decoded."""

    async def body(s: Store) -> dict[str, Any]:
        snapshot_id = await _inspect.resolve_checkpoint(s, run_id, checkpoint)
        return await _inspect.snapshot_to_dict(s, await s.read_snapshot(run_id, snapshot_id))

    print_json(run_command(lambda: with_store(store, body), debug=debug))


@app.command("diff")
def diff_command(
    run_id: RunArg,
    a: Annotated[str, typer.Argument(help="The older checkpoint.")],
    b: Annotated[str, typer.Argument(help="The newer checkpoint.")] = "latest",
    store: StoreOpt = DEFAULT_STORE,
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """What changed between two checkpoints: agents, state fields, phases, decisions, metrics."""

    async def body(s: Store) -> dict[str, Any]:
        first = await s.read_snapshot(run_id, await _inspect.resolve_checkpoint(s, run_id, a))
        second = await s.read_snapshot(run_id, await _inspect.resolve_checkpoint(s, run_id, b))
        return await _inspect.diff_snapshots(s, first, second)

    d = run_command(lambda: with_store(store, body), debug=debug)
    if as_json:
        print_json(d)
        return
    print_diff(d)


@app.command("validate")
def validate_command(
    run_id: Annotated[str | None, typer.Argument(help="One run (default: every run).")] = None,
    store: StoreOpt = DEFAULT_STORE,
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Verify every checksum (log, checkpoints, state blobs); exit 3 naming any corruption."""

    async def body(s: Store) -> _inspect.ValidationReport:
        ids = [run_id] if run_id else [m.run_id for m in await s.list_runs()]
        if run_id:
            await s.read_run(run_id)
        return await _inspect.validate_store(s, ids)

    report = run_command(lambda: with_store(store, body), debug=debug)
    if as_json:
        print_json({**msgspec.to_builtins(report), "ok": report.ok})
    else:
        for p in report.problems:
            err().print(f"[bold red]corrupt:[/] run {p.run_id} {p.what}: {p.detail}")
        verdict = "[green]ok[/]" if report.ok else f"[red]{len(report.problems)} problem(s)[/]"
        out().print(
            f"{verdict}: {report.runs} run(s), {report.records} log record(s), "
            f"{report.snapshots} checkpoint(s), {report.blobs} blob(s) checked"
        )
    if not report.ok:
        raise typer.Exit(EXIT_CODES["corrupt"])


@app.command("log")
def log_command(
    run_id: RunArg,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep printing until the run finishes.")
    ] = False,
    start: Annotated[int, typer.Option(help="First log position to print.")] = 0,
    store: StoreOpt = DEFAULT_STORE,
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Print the decision log: steps, phase ends and decisions with rationale and confidence.

    With ``--json``, one JSON object per line (with its ``position``).
    """

    async def body(s: Store) -> None:
        position = start
        while True:
            # Status first: once finished, every record is already in the log we read next.
            finished = (await s.read_run(run_id)).status.finished
            for record in await s.read_log(run_id, position):
                print_record(position, record, as_json=as_json)
                position += 1
            if not follow or finished:
                return
            # A reader in another process has no event to wait on; poll the store gently.
            await anyio.sleep(_FOLLOW_INTERVAL)

    run_command(lambda: with_store(store, body), debug=debug)


_FOLLOW_INTERVAL: Final = 0.5


@app.command("prune")
def prune_command(
    keep: Annotated[
        int | None, typer.Option("--keep", min=1, help="Newest checkpoints kept per run.")
    ] = None,
    max_age: Annotated[
        str | None,
        typer.Option("--max-age", help="Drop checkpoints older than this (30m, 12h, 7d)."),
    ] = None,
    delete_completed: Annotated[
        bool,
        typer.Option(help="Delete finished runs' data, keeping a small tombstone manifest."),
    ] = False,
    store: StoreOpt = DEFAULT_STORE,
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Apply retention: keep the newest N checkpoints, drop old ones, collect unused data.

    With no option, keeps the newest 5 checkpoints per run. A run's newest
    checkpoint is always kept, and its log is pruned only below the oldest kept.
    """
    from actorflow.runtime import parse_duration

    async def body(s: Store) -> PruneReport:
        age = parse_duration(max_age, option="--max-age") if max_age is not None else None
        if keep is None and age is None and not delete_completed:
            policy = RetentionPolicy()  # the default: newest 5 per run
        else:
            policy = RetentionPolicy(keep_last=keep, max_age=age, delete_completed=delete_completed)
        return await s.prune(policy)

    report = run_command(lambda: with_store(store, body), debug=debug)
    if as_json:
        print_json(report)
        return
    out().print(
        f"pruned {report.snapshots_deleted} checkpoint(s), {report.log_records_deleted} log "
        f"record(s), {report.blobs_deleted} blob(s), {report.runs_deleted} run(s); "
        f"freed {size(report.bytes_freed)}"
    )


AppOpt = Annotated[
    str | None,
    typer.Option(
        "--app",
        help="Your program as module:attr, attr a Runtime or a function returning one "
        "(default: the demo's workflow only).",
    ),
]

AppStoreOpt = Annotated[
    str | None,
    typer.Option(
        "--store",
        help="Store: a folder path or s3://bucket/prefix; replaces the app's own store "
        "[default: $ACTORFLOW_STORE, else the app's store, else ./.actorflow]",
    ),
]


def _store_override(store: str | None) -> str | None:
    # An explicit --store (or ACTORFLOW_STORE) replaces the app's own store.
    return store if store is not None else os.environ.get("ACTORFLOW_STORE")


@app.command("demo")
def demo_command(
    path: Annotated[
        str | None,
        typer.Option("--path", help="Folder to review (default: the Python standard library)."),
    ] = None,
    report: Annotated[
        str | None,
        typer.Option(help="Where to write the JSON report (default: in the store's folder)."),
    ] = None,
    run_id: Annotated[str | None, typer.Option("--run-id", help="Id of the new run.")] = None,
    reviewers: Annotated[int, typer.Option(min=1, max=64, help="Reviewer agents.")] = 4,
    store: StoreOpt = DEFAULT_STORE,
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Run the demo: a code-review team over a source tree, with live progress.

    Kill it (Ctrl-C or SIGKILL) and `actorflow recover` finishes it without
    reviewing again the files whose results were logged.
    """
    from actorflow._demo._run import new_run_id, run_demo, summary_table

    new_id = run_id or new_run_id()

    async def body() -> tuple[str, Any]:
        return await run_demo(
            store=store,
            console=err() if as_json else out(),
            path=path,
            report=report,
            run_id=new_id,
            reviewers=reviewers,
        )

    started = time.perf_counter()
    rid, summary = run_command(body, debug=debug, run_hint=new_id)
    if as_json:
        print_json({"run_id": rid, "store": store, "summary": summary})
        return
    out().print(summary_table(summary))
    out().print(
        f"run [bold]{rid}[/] completed in {time.perf_counter() - started:.1f}s\n"
        f"  report:      {summary.report_path}\n"
        f"  data:        {Path(store).absolute() if '://' not in store else store}\n"
        f"  look inside: actorflow runs\n"
        f"               actorflow checkpoints {rid}\n"
        f"               actorflow log {rid}"
    )


@app.command("recover")
def recover_command(
    run_id: Annotated[str | None, typer.Argument(help="One run (default: every orphan).")] = None,
    app_spec: AppOpt = None,
    store: AppStoreOpt = None,
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Resume orphaned runs (running or interrupted, no live owner) and finish them."""
    from actorflow._demo._run import load_app, recover_runs

    spec = _store_override(store)

    async def body() -> tuple[list[Any], list[Any]]:
        runtime = load_app(app_spec, spec if app_spec else (spec or DEFAULT_STORE))
        return await recover_runs(runtime, run_id, err() if as_json else out())

    finished, left = run_command(body, debug=debug)
    print_outcomes(finished, left, as_json=as_json)
    if left and all(o.status == "paused" for o in left):
        raise typer.Exit(EXIT_CODES["paused"])
    raise typer.Exit(EXIT_CODES["run_failed"] if left else EXIT_CODES["ok"])


@app.command("fork")
def fork_command(
    run_id: RunArg,
    checkpoint: CheckpointArg,
    app_spec: AppOpt = None,
    store: Annotated[
        str | None, typer.Option("--store", help="Store (overrides the app's).")
    ] = None,
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Start a new run from a checkpoint of RUN and run it to the end."""
    from actorflow._demo._run import fork_run, load_app

    spec = _store_override(store)

    async def body() -> Any:
        runtime = load_app(app_spec, spec if app_spec else (spec or DEFAULT_STORE))
        return await fork_run(runtime, run_id, checkpoint)

    outcome = run_command(body, debug=debug)
    if as_json:
        print_json(outcome)
        return
    out().print(
        f"[green]fork[/] {outcome.run_id} of {run_id} at {checkpoint}: {outcome.status}, "
        f"replayed {outcome.replayed_steps} step(s)"
    )
    print_result(outcome.result)


@app.command("resume")
def resume_command(
    run_id: RunArg,
    response: Annotated[str, typer.Option("--response", help="The answer to the run's prompt.")],
    app_spec: AppOpt = None,
    store: Annotated[
        str | None, typer.Option("--store", help="Store (overrides the app's).")
    ] = None,
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Answer a paused run's prompt and run it on to the end."""
    from actorflow._demo._run import load_app, resume_run

    spec = _store_override(store)

    async def body() -> Any:
        runtime = load_app(app_spec, spec if app_spec else (spec or DEFAULT_STORE))
        return await resume_run(runtime, run_id, response)

    outcome = run_command(body, debug=debug)
    if as_json:
        print_json(outcome)
        return
    out().print(f"[green]resumed[/] {run_id}: {outcome.status}")
    print_result(outcome.result)


def main() -> None:
    """Entry point of the ``actorflow`` script."""
    app(prog_name="actorflow")


if __name__ == "__main__":  # pragma: no cover
    main()
