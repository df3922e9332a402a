"""``actorflow demo``: the code-review demo, run with live progress on a new store.

The command line reaches the demo (``actorflow._demo``, the workflow) only
from here, and owns how it runs and shows: the runtime, the progress bar, the
summary table. Besides the command, this module plugs the demo into the
commands that run any workflow: its classes are registered for each of them,
with or without ``--app`` (so ``recover`` finishes a killed demo), and its
result prints as the review's summary table.
"""

from __future__ import annotations

import datetime as dt
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import anyio
import typer
from rich.markup import escape
from rich.table import Table

from actorflow.cli._app import DebugOpt, JsonOpt, StoreOpt, command, reader_store, run_command
from actorflow.cli._loading import add_default_app
from actorflow.cli._program import suggest
from actorflow.cli._progress import live_progress, watch_progress
from actorflow.cli._render import add_result_view, display, err, esc, out, print_json
from actorflow.errors import ConfigurationError
from actorflow.runtime import Runtime
from actorflow.storage import printable_location

if TYPE_CHECKING:
    from rich.console import Console

    from actorflow._demo import ReviewSummary

__all__: list[str] = []


def _load_demo() -> None:
    """Register the demo's workflow and agent classes."""
    # Imported here: the demo's classes load only when a command runs workflows.
    import actorflow._demo  # noqa: F401


def _show_review(result: object) -> bool:
    """Print ``result`` as the review's summary table if it is one."""
    # Imported here, as the demo is loaded by then: the commands printing results loaded it.
    from actorflow._demo import ReviewSummary

    if not isinstance(result, ReviewSummary):
        return False
    out().print(summary_table(result))
    out().print(f"  report: {esc(result.report_path)}")
    return True


def new_run_id() -> str:
    """A readable, unique demo run id: ``review-20250101-120000-1a2b``."""
    return f"review-{dt.datetime.now():%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:4]}"


async def run_demo(
    *,
    store: str,
    console: Console,
    display: Console | None = None,
    path: str | None = None,
    report: str | None = None,
    run_id: str | None = None,
    reviewers: int = 4,
) -> tuple[str, ReviewSummary]:
    """Run the code-review demo over ``path`` (default: the standard library) with live progress.

    ``console`` gets what the run is; ``display``, if given, the live progress bar.

    Raises:
        ConfigurationError: ``path`` is not a folder.
    """
    # Imported here: the demo's classes load (and register) only when a command runs them.
    from actorflow._demo import ReviewInput, ReviewTeam, default_root

    root = Path(path) if path else default_root()
    if not root.is_dir():
        raise ConfigurationError("--path", str(root), "an existing folder")
    report_path = Path(report) if report else Path(store) / "actorflow-report.json"
    job = ReviewInput(
        root=str(root.resolve()), report_path=str(report_path.absolute()), reviewers=reviewers
    )
    run_id = run_id or new_run_id()
    runtime = Runtime(store=store)  # bad options fail here, before the progress bar shows
    console.print(
        f"run [bold]{esc(run_id)}[/]: reviewing [bold]{esc(job.root)}[/]; "
        f"data in {esc(printable_location(store))}"
    )
    with live_progress(display) as sink:
        async with runtime:
            handle = await runtime.start(ReviewTeam, job, run_id=run_id)
            async with anyio.create_task_group() as tg:
                tg.start_soon(watch_progress, handle, sink)
                await handle.wait()
            summary: ReviewSummary = await handle.result()
    return run_id, summary


def summary_table(summary: ReviewSummary, *, limit: int = 15) -> Table:
    """The review's least confident areas, with totals in the caption."""
    table = Table(
        # Paths and reasons come from the reviewed tree: never read as markup.
        title=f"code review of {escape(summary.root)}",
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
            escape(s.area),
            str(s.files),
            f"[{style}]{s.confidence:.2f}[/]{'*' if s.strict else ' '}",
            str(s.risky_calls),
            str(s.missing_docstrings),
            str(s.max_complexity),
            escape(s.rationale.split("; ")[0]),  # the full rationale is in the log and the report
        )
    return table


add_default_app(_load_demo)
add_result_view(_show_review)


@command("demo")
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
    store: StoreOpt = None,
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Run the demo: a code-review team over a source tree, with live progress.

    Kill it (Ctrl-C or SIGKILL) and `actorflow recover` finishes it without
    reviewing again the files whose results were logged.
    """
    spec = reader_store(store)
    new_id = run_id or new_run_id()
    console: Console = err() if as_json else out()

    async def body() -> tuple[str, Any]:
        return await run_demo(
            store=spec,
            console=console,
            display=display(),
            path=path,
            report=report,
            run_id=new_id,
            reviewers=reviewers,
        )

    started = time.perf_counter()
    rid, summary = run_command(body, debug=debug, run_hint=new_id)
    if as_json:
        print_json({"run_id": rid, "store": printable_location(spec), "summary": summary})
        return
    out().print(summary_table(summary))
    # The commands shown find this run: they name the store this one was given,
    # and run as the user ran this one (`.venv/bin/actorflow`, `python -m actorflow`).
    data = Path(spec).absolute() if "://" not in spec else printable_location(spec)
    out().print(
        f"run [bold]{esc(rid)}[/] completed in {time.perf_counter() - started:.1f}s\n"
        f"  report:      {esc(str(summary.report_path))}\n"
        f"  data:        {esc(str(data))}\n"
        f"  look inside: {esc(suggest('runs'))}\n"
        f"               {esc(suggest('checkpoints', rid))}\n"
        f"               {esc(suggest('log', rid))}"
    )
