"""``actorflow demo``: the code-review demo, run with live progress on a new store.

The command line reaches the demo (``actorflow._demo``) only from here. Besides
the command, this module plugs the demo into the commands that run any
workflow: its classes are registered for each of them, with or without
``--app`` (so ``recover`` finishes a killed demo), and its result prints as
the review's summary table.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from actorflow.cli._app import DebugOpt, JsonOpt, StoreOpt, command, reader_store, run_command
from actorflow.cli._loading import add_default_app
from actorflow.cli._program import suggest
from actorflow.cli._render import add_result_view, display, err, esc, out, print_json

if TYPE_CHECKING:
    from rich.console import Console

__all__: list[str] = []


def _load_demo() -> None:
    """Register the demo's workflow and agent classes."""
    # Imported here: the demo's classes load only when a command runs workflows.
    import actorflow._demo  # noqa: F401


def _show_review(result: object) -> bool:
    """Print ``result`` as the review's summary table if it is one."""
    # Imported here, as the demo is loaded by then: the commands printing results loaded it.
    from actorflow._demo import ReviewSummary, summary_table

    if not isinstance(result, ReviewSummary):
        return False
    out().print(summary_table(result))
    out().print(f"  report: {esc(result.report_path)}")
    return True


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
    # Imported here: the demo's classes load (and register) only when a command runs them.
    from actorflow._demo import new_run_id, run_demo, summary_table

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
        print_json({"run_id": rid, "store": spec, "summary": summary})
        return
    out().print(summary_table(summary))
    # The commands shown find this run: they name the store this one was given,
    # and run as the user ran this one (`.venv/bin/actorflow`, `python -m actorflow`).
    data = Path(spec).absolute() if "://" not in spec else spec
    out().print(
        f"run [bold]{esc(rid)}[/] completed in {time.perf_counter() - started:.1f}s\n"
        f"  report:      {esc(str(summary.report_path))}\n"
        f"  data:        {esc(str(data))}\n"
        f"  look inside: {esc(suggest('runs'))}\n"
        f"               {esc(suggest('checkpoints', rid))}\n"
        f"               {esc(suggest('log', rid))}"
    )
