"""The commands that need only the store, never the user's code.

Readers (``runs``, ``checkpoints``, ``show``, ``log``, ``validate``, ``diff``, ``compare``)
open an existing store and never create one where the user mistyped a path;
``prune`` applies retention to it. Every one takes ``--store`` (a folder, or a
store URL such as ``s3://bucket/prefix``; default ``$ACTORFLOW_STORE``, else ``./.actorflow``)
and ``--key-file`` (an encrypted store's keys; default from ``ACTORFLOW_KEYS``
or ``ACTORFLOW_KEY_FILE``, as the library reads them).
"""

from __future__ import annotations

from typing import Annotated, Any, Final

import msgspec
import typer
from rich.table import Table

from actorflow.cli._app import (
    EXIT_CODES,
    BadValueError,
    CheckpointArg,
    DebugOpt,
    JsonOpt,
    KeyFileOpt,
    RunArg,
    StoreOpt,
    command,
    reader_store,
    run_command,
)
from actorflow.cli._driving import awaited_signal
from actorflow.cli._live import live_to_dict, print_live
from actorflow.cli._loading import check_writable, require_keys, with_store
from actorflow.cli._program import suggest
from actorflow.cli._render import (
    err,
    esc,
    out,
    owner_text,
    paused_text,
    print_diff,
    print_json,
    print_record,
    run_row,
    sealed_row,
    size,
    status_text,
    when,
)
from actorflow.cli._streamed import print_streamed
from actorflow.errors import ConfigurationError, EncryptionKeyError, LogPrunedError
from actorflow.runtime import (
    DecisionMade,
    EmitRecorded,
    EmitsLost,
    EmitStreamed,
    PhaseEnded,
    Recorded,
    StepCompleted,
    parse_duration,
    reading,
    watch_run,
)
from actorflow.runtime.reading import ListedRun, SealedRun, list_runs
from actorflow.storage import (
    PruneReport,
    RetentionPolicy,
    RunManifest,
    RunStatus,
    Store,
    UnreadableLister,
    printable_location,
    read_full_snapshot,
)

__all__: list[str] = []


@command("runs")
def runs_command(
    status: Annotated[
        list[str] | None, typer.Option("--status", help="Only runs with this status (repeatable).")
    ] = None,
    workflow: Annotated[str | None, typer.Option(help="Only runs of this workflow.")] = None,
    queue: Annotated[str | None, typer.Option(help="Only runs submitted to this queue.")] = None,
    store: StoreOpt = None,
    key_file: KeyFileOpt = None,
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """List runs: id, workflow, status, phase, started, last activity, owner, checkpoints, size.

    The owner is the process that holds the run (host:pid), alive or gone. Each
    queue's depth (its runs queued, and running) follows the table.
    """
    spec = reader_store(store)
    wanted = _statuses(status)

    async def body(s: Store) -> tuple[list[ListedRun], list[SealedRun]]:
        return await list_runs(s, status=wanted, workflow=workflow, queue=queue)

    runs, sealed = run_command(lambda: with_store(spec, body, key_file=key_file), debug=debug)
    # a sealed run's status and workflow are sealed too: no filter can pick it
    filtered = wanted is not None or workflow is not None or queue is not None
    rows = [run_row(r) for r in runs] + ([] if filtered else [sealed_row(r) for r in sealed])
    if as_json:
        print_json(rows)
    else:
        _print_runs(spec, rows)
        _print_depths(rows)
    if sealed:
        keys = ", ".join(sorted({repr(r.key_id) for r in sealed}))
        shown = "not shown" if filtered else "shown as encrypted"
        err().print(
            f"[yellow]{len(sealed)} run(s) {shown}[/]: encrypted with key {esc(keys)}, "
            "which was not given (or is wrong); give it with --key-file FILE, "
            "ACTORFLOW_KEYS or ACTORFLOW_KEY_FILE"
        )


def _print_runs(store: str, rows: list[dict[str, Any]]) -> None:
    table = Table(title=f"runs in {esc(printable_location(store))}")
    table.add_column("run", overflow="fold", min_width=12)
    for col in ("workflow", "status", "phase", "started", "activity", "owner", "ckpts", "size"):
        right = col in ("ckpts", "size")
        table.add_column(col, justify="right" if right else "left", overflow="fold")
    # A paused run waits for an answer: its prompt is what the reader needs.
    prompts = any(r["prompt"] is not None for r in rows)
    if prompts:
        table.add_column("prompt", overflow="fold")
    # ... and until when it waits, if its wait has a timeout
    deadlines = any(r["deadline"] is not None for r in rows)
    if deadlines:
        table.add_column("waits until", overflow="fold")
    # A child run (ctx.start_child): the run that started it.
    children = any(r["parent_run"] is not None for r in rows)
    if children:
        table.add_column("parent run", overflow="fold")
    # A blocked run waits for code that replays its log: what diverged, and under which code.
    blocked = any(r["status"] == RunStatus.BLOCKED for r in rows)
    if blocked:
        table.add_column("blocked by", overflow="fold")
    for r in rows:
        cells = [
            esc(r["run_id"]),
            esc(r["workflow"] or "-"),
            status_text(r["status"]),
            esc(r["phase"] or "-"),
            when(r["started"]),
            when(r["activity"]),
            owner_text(r),
            "-" if r["snapshots"] is None else str(r["snapshots"]),
            "-" if r["size"] is None else size(r["size"]),
        ]
        table.add_row(
            *cells,
            *([esc(r["prompt"] or "")] if prompts else []),
            *([when(r["deadline"])] if deadlines else []),
            *([esc(r["parent_run"] or "-")] if children else []),
            *([_blocked_by(r)] if blocked else []),
        )
    out().print(table if rows else f"no runs in {esc(printable_location(store))}")


def _print_depths(rows: list[dict[str, Any]]) -> None:
    """Each queue's depth among the runs listed: how many wait (and since when), how many run."""
    depths: dict[str, list[int]] = {}
    oldest: dict[str, float] = {}
    for r in rows:
        if r.get("queue") is not None and r["status"] in (RunStatus.QUEUED, RunStatus.RUNNING):
            counts = depths.setdefault(r["queue"], [0, 0])
            counts[r["status"] == RunStatus.RUNNING] += 1
            if r["status"] == RunStatus.QUEUED and r["started"]:
                oldest[r["queue"]] = min(oldest.get(r["queue"], r["started"]), r["started"])
    for name, (waiting, running) in sorted(depths.items()):
        since = f" (the oldest queued since {when(oldest[name])})" if name in oldest else ""
        out().print(f"queue {esc(name)}: {waiting} queued, {running} running{since}")


def _blocked_by(row: dict[str, Any]) -> str:
    """A blocked run's divergence and the code_version it was blocked under, else nothing."""
    if row["status"] != RunStatus.BLOCKED:
        return ""
    version = row["blocked_code_version"]
    return esc(f"code_version {version}: {row['error']}" if version else row["error"])


@command("checkpoints")
def checkpoints_command(
    run_id: RunArg,
    store: StoreOpt = None,
    key_file: KeyFileOpt = None,
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """List a run's checkpoints: id, phase, trigger, time, sizes, checksum, usable by fork."""
    spec = reader_store(store)
    rows = run_command(
        lambda: with_store(spec, lambda s: reading.checkpoint_rows(s, run_id), key_file=key_file),
        debug=debug,
    )
    if as_json:
        print_json(rows)
        return
    table = Table(title=f"checkpoints of {esc(run_id)}")
    columns = ("checkpoint", "position", "phase", "trigger", "time", "stored", "raw", "checksum")
    for col in (*columns, "fork"):
        right = col in ("position", "stored", "raw")
        table.add_column(col, justify="right" if right else "left")
    for r in rows:
        ok = r["checksum"] == "ok"
        table.add_row(
            esc(r["snapshot_id"]),
            str(r["position"]),
            esc(r["phase"] or "-"),
            esc(r["trigger"]),
            when(r["created"]),
            size(r["stored_size"]),
            size(r["raw_size"]),
            f"[green]{esc(r['checksum'])}[/]" if ok else f"[bold red]{esc(r['checksum'])}[/]",
            "yes" if r["forkable"] else "[bold red]no[/]",
        )
    out().print(table if rows else f"run {esc(run_id)} has no checkpoints")


@command("show")
def show_command(
    run_id: RunArg,
    checkpoint: CheckpointArg,
    store: StoreOpt = None,
    key_file: KeyFileOpt = None,
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Print one checkpoint as JSON, with agent states, results and decisions decoded.

    `live` instead of a checkpoint: the run as it stands now (newest checkpoint plus the
    log after it), with its waits and untaken inbox; read without taking the run.
    """
    spec = reader_store(store)
    if checkpoint == "live":
        d = run_command(
            lambda: with_store(spec, lambda s: live_to_dict(s, run_id), key_file=key_file),
            debug=debug,
        )
        if as_json:
            print_json(d)
        else:
            print_live(d)
        return

    async def body(s: Store) -> dict[str, Any]:
        snapshot_id = await reading.resolve_checkpoint(s, run_id, checkpoint)
        return await reading.snapshot_to_dict(s, await read_full_snapshot(s, run_id, snapshot_id))

    print_json(run_command(lambda: with_store(spec, body, key_file=key_file), debug=debug))


@command("diff")
def diff_command(
    run_id: RunArg,
    a: Annotated[str, typer.Argument(metavar="A", help="The older checkpoint.")],
    b: Annotated[str, typer.Argument(metavar="B", help="The newer checkpoint.")] = "latest",
    store: StoreOpt = None,
    key_file: KeyFileOpt = None,
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """What changed between two checkpoints: agents, state fields, phases, decisions, metrics."""
    spec = reader_store(store)

    async def body(s: Store) -> dict[str, Any]:
        first_id = await reading.resolve_checkpoint(s, run_id, a)
        second_id = await reading.resolve_checkpoint(s, run_id, b)
        first = await read_full_snapshot(s, run_id, first_id)
        second = await read_full_snapshot(s, run_id, second_id)
        return await reading.diff_snapshots(s, first, second)

    d = run_command(lambda: with_store(spec, body, key_file=key_file), debug=debug)
    if as_json:
        print_json(d)
        return
    print_diff(d)


@command("compare")
def compare_command(
    run_a: Annotated[str, typer.Argument(metavar="RUN_A", help="A run (the original, say).")],
    run_b: Annotated[str, typer.Argument(metavar="RUN_B", help="Another (a fork of it, say).")],
    everything: Annotated[
        bool, typer.Option("--all", help="Show the phases, decisions and steps that are equal too.")
    ] = False,
    store: StoreOpt = None,
    key_file: KeyFileOpt = None,
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Two runs side by side (a run and its fork): status, result, phases, decisions, steps."""
    from actorflow.cli._comparison import print_comparison
    from actorflow.runtime import compare_runs

    spec = reader_store(store)
    comparison = run_command(
        lambda: with_store(spec, lambda s: compare_runs(s, run_a, run_b), key_file=key_file),
        debug=debug,
    )
    if as_json:
        print_json(msgspec.to_builtins(comparison))
        return
    print_comparison(comparison, everything=everything)


@command("result")
def result_command(
    run_id: RunArg,
    store: StoreOpt = None,
    key_file: KeyFileOpt = None,
    debug: DebugOpt = False,
) -> None:
    """Print a finished run's result as JSON, or what stops it having one (and exit 5, 6 or 8).

    Completed: the result (exit 0). Failed, cancelled or blocked: its error (exit 5).
    Paused: its prompt (exit 6). Running or interrupted: its status (exit 8).
    """
    spec = reader_store(store)

    async def body(s: Store) -> tuple[RunManifest, str | None]:
        m = await s.read_run(run_id)
        paused = m.status is RunStatus.PAUSED
        return m, await awaited_signal(s, run_id) if paused else None

    m, signal = run_command(lambda: with_store(spec, body, key_file=key_file), debug=debug)
    if m.status is RunStatus.COMPLETED:
        print_json(reading.decode_plain(m.result))
        return
    error = {"type": m.error.type, "message": m.error.message} if m.error else None
    print_json({"run_id": m.run_id, "status": str(m.status), "error": error, "prompt": m.prompt})
    rid = esc(m.run_id)
    if m.status is RunStatus.PAUSED:
        err().print(paused_text(m.run_id, m.prompt, signal))
        raise typer.Exit(EXIT_CODES["paused"])
    if m.status.finished or m.status is RunStatus.BLOCKED:
        why = f"{m.error.type}: {m.error.message}" if m.error else "no error recorded"
        err().print(f"[red]{esc(m.status)}[/] {rid}: {esc(why)}")
        if m.status is RunStatus.BLOCKED:
            again = suggest("recover", m.run_id)
            err().print(f"  with code that replays its log: {esc(again)}")
        raise typer.Exit(EXIT_CODES["run_failed"])
    err().print(f"[yellow]not finished[/] {rid}: {esc(m.status)}")
    if m.status is RunStatus.INTERRUPTED:  # no process drives it: recover does
        err().print(f"  continue it: {esc(suggest('recover', m.run_id))}")
    raise typer.Exit(EXIT_CODES["not_finished"])


@command("validate")
def validate_command(
    run_id: Annotated[
        str | None, typer.Argument(metavar="RUN", help="One run (default: every run).")
    ] = None,
    store: StoreOpt = None,
    key_file: KeyFileOpt = None,
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Verify every checksum (log, checkpoints, state blobs, inboxes); exit 3 naming any corruption.

    Without the key of an encrypted store, checksums are verified without
    opening anything.
    """
    spec = reader_store(store)

    async def body(s: Store) -> reading.ValidationReport:
        if run_id:
            try:
                await s.read_run(run_id)
            except EncryptionKeyError:
                return await reading.validate_store(s, [], sealed_runs=[run_id])
            return await reading.validate_store(s, [run_id])
        # what the listing skips (damaged manifests, strays, data without a manifest)
        # is named here too, so one bad entry never hides the others
        unreadable = await s.list_unreadable() if isinstance(s, UnreadableLister) else []
        sealed = [e.run_id for e in unreadable if e.key_id and e.run_id]
        damaged = [e for e in unreadable if not (e.key_id and e.run_id)]
        ids = [m.run_id for m in await s.list_runs()]
        return await reading.validate_store(s, ids, damaged, sealed)

    report = run_command(lambda: with_store(spec, body, key_file=key_file), debug=debug)
    if as_json:
        print_json({**msgspec.to_builtins(report), "ok": report.ok})
    else:
        _print_validation(report)
    if not report.ok:
        raise typer.Exit(EXIT_CODES["corrupt"])
    if report.needs_key:
        raise typer.Exit(EXIT_CODES["encrypted"])


def _print_validation(report: reading.ValidationReport) -> None:
    for p in report.problems:
        where = f"run {p.run_id} {p.what}" if p.run_id else p.what
        # names from the disk may hold brackets: never read them as markup
        err().print(f"[bold red]corrupt:[/] {esc(where)}: {esc(p.detail)}")
    if report.needs_key:
        err().print(
            f"[yellow]not checked[/]: {esc(', '.join(report.needs_key))}: encrypted, and this "
            "store cannot verify sealed data without the key; give it with --key-file FILE"
        )
    verdict = "[green]ok[/]" if report.ok else f"[red]{len(report.problems)} problem(s)[/]"
    out().print(
        f"{verdict}: {report.runs} run(s), {report.records} log record(s), "
        f"{report.snapshots} checkpoint(s), {report.blobs} blob(s) checked; "
        f"{report.inbox} inbox message(s) read"
    )
    if report.sealed:
        out().print(
            f"{report.sealed} encrypted item(s) checked by checksum only, not opened: "
            "give the key (--key-file FILE) to decode them too"
        )


@command("log")
def log_command(
    run_id: RunArg,
    follow: Annotated[
        bool,
        typer.Option(
            "--follow",
            "-f",
            help="Keep printing until the run finishes or stops (paused for input, blocked, "
            "interrupted), durable emits included, and its streamed events (~position).",
        ),
    ] = False,
    start: Annotated[int, typer.Option(help="First log position to print.")] = 0,
    events: Annotated[
        bool,
        typer.Option(
            "--events/--no-events",
            help="With --follow, show the run's streamed (ephemeral) events too.",
        ),
    ] = True,
    event_start: Annotated[
        int,
        typer.Option(
            "--event-start",
            min=0,
            help="With --follow, the first streamed event position to print (resume after ~N).",
        ),
    ] = 0,
    store: StoreOpt = None,
    key_file: KeyFileOpt = None,
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Print the decision log: steps, phase ends and decisions with rationale and confidence.

    With --json, one JSON object per line (with its position; a streamed
    event's is event_position).
    """
    spec = reader_store(store)

    async def body(s: Store) -> None:
        first = start
        while True:
            try:
                await _print_log(
                    s,
                    run_id,
                    first,
                    follow=follow,
                    as_json=as_json,
                    events=events,
                    event_start=event_start,
                )
                return
            except LogPrunedError as exc:
                if exc.first <= first:
                    raise
                # retention cut the log below a checkpoint: what is left is the whole story
                err().print(
                    f"[yellow]records before position {exc.first} were pruned[/] (retention "
                    "keeps the log from the oldest checkpoint it keeps); printing from there"
                )
                first = exc.first

    run_command(lambda: with_store(spec, body, key_file=key_file), debug=debug)


async def _print_log(
    s: Store,
    run_id: str,
    start: int,
    *,
    follow: bool,
    as_json: bool,
    events: bool,
    event_start: int,
) -> None:
    if not follow:
        for position, record in enumerate(await s.read_log(run_id, start), start):
            print_record(position, record, as_json=as_json)
        return
    # the runtime's watch: polls the store gently, ends once the run stops
    watch = watch_run(
        s,
        run_id,
        position=start,
        poll_interval=_FOLLOW_INTERVAL,
        events=events,
        event_position=event_start,
    )
    async for event in watch:
        if isinstance(event, _LOGGED):
            print_record(event.position, event.record, as_json=as_json)
        elif isinstance(event, EmitStreamed | EmitsLost):
            print_streamed(event, as_json=as_json)


_FOLLOW_INTERVAL: Final = 0.5
_LOGGED: Final = (StepCompleted, DecisionMade, PhaseEnded, EmitRecorded, Recorded)
"""The watch's events that are log records (the others: status, checkpoints)."""


@command("prune")
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
        typer.Option(
            "--delete-completed",
            help="Delete finished runs' data, keeping a small tombstone manifest.",
        ),
    ] = False,
    drop_phase_ends: Annotated[
        bool,
        typer.Option(
            "--drop-phase-ends",
            help="Count phase-end checkpoints like any other (fork can then no longer "
            "start from every phase).",
        ),
    ] = False,
    store: StoreOpt = None,
    key_file: KeyFileOpt = None,
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Apply retention: keep the newest N checkpoints, drop old ones, collect unused data.

    With no option, keeps the newest 5 checkpoints per run, and besides them
    each phase's end (for fork) unless --max-age has passed or
    --drop-phase-ends is given. A run's newest checkpoint is always kept, and
    its log is pruned only below the oldest kept.
    """
    spec = reader_store(store)

    async def body(s: Store) -> PruneReport:
        try:
            age = parse_duration(max_age, option="--max-age") if max_age is not None else None
        except ConfigurationError as exc:
            raise BadValueError(exc.option, exc.value, exc.expected) from exc
        if keep is None and age is None and not delete_completed:
            # the default: newest 5 per run (and the phase ends)
            policy = RetentionPolicy(keep_phase_ends=not drop_phase_ends)
        else:
            policy = RetentionPolicy(
                keep_last=keep,
                max_age=age,
                delete_completed=delete_completed,
                keep_phase_ends=not drop_phase_ends,
            )
        check_writable(s)  # a read-only store: one named error, before anything is tried
        await require_keys(s)  # else retention skips sealed runs and reports success
        return await s.prune(policy)

    report = run_command(lambda: with_store(spec, body, key_file=key_file), debug=debug)
    if as_json:
        print_json(report)
        return
    out().print(
        f"pruned {report.snapshots_deleted} checkpoint(s), {report.log_records_deleted} log "
        f"record(s), {report.blobs_deleted} blob(s), {report.runs_deleted} run(s); "
        f"freed {size(report.bytes_freed)}"
    )


def _statuses(values: list[str] | None) -> list[RunStatus] | None:
    if not values:
        return None
    try:
        return [RunStatus(v.lower()) for v in values]
    except ValueError:
        choices = ", ".join(s.value for s in RunStatus)
        raise typer.BadParameter(f"status must be one of {choices}") from None
