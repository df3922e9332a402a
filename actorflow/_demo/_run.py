"""What ``actorflow demo`` calls: run the review over a folder with live progress, show its summary.

The command only parses options; this owns the demo's runtime and its display.
"""

from __future__ import annotations

import datetime as dt
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
from rich.markup import escape
from rich.table import Table

from actorflow._demo._analysis import default_root
from actorflow._demo._workflow import ReviewInput, ReviewSummary, ReviewTeam
from actorflow.cli._progress import live_progress, watch_progress
from actorflow.errors import ConfigurationError
from actorflow.runtime import Runtime

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["new_run_id", "run_demo", "summary_table"]


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
