"""The ``actorflow`` commands that run workflows: demo, recover, fork, resume."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from actorflow._cli_common import (
    DEFAULT_STORE,
    EXIT_CODES,
    AppOpt,
    AppStoreOpt,
    CheckpointArg,
    DebugOpt,
    JsonOpt,
    RunArg,
    StoreOpt,
    _store_override,
    app,
    run_command,
)
from actorflow._cli_render import (
    err,
    out,
    print_json,
    print_outcomes,
    print_result,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

T = TypeVar("T")

__all__: list[str] = []


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
    from actorflow._demo._run import recover_runs

    finished, left = _with_app(
        app_spec, store, debug, lambda rt: recover_runs(rt, run_id, err() if as_json else out())
    )
    print_outcomes(finished, left, as_json=as_json)
    if left and all(o.status == "paused" for o in left):
        raise typer.Exit(EXIT_CODES["paused"])
    raise typer.Exit(EXIT_CODES["run_failed"] if left else EXIT_CODES["ok"])


@app.command("fork")
def fork_command(
    run_id: RunArg,
    checkpoint: CheckpointArg,
    app_spec: AppOpt = None,
    store: AppStoreOpt = None,
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Start a new run from a checkpoint of RUN and run it to the end."""
    from actorflow._demo._run import fork_run

    outcome = _with_app(app_spec, store, debug, lambda rt: fork_run(rt, run_id, checkpoint))
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
    store: AppStoreOpt = None,
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Answer a paused run's prompt and run it on to the end."""
    from actorflow._demo._run import resume_run

    outcome = _with_app(app_spec, store, debug, lambda rt: resume_run(rt, run_id, response))
    if as_json:
        print_json(outcome)
        return
    out().print(f"[green]resumed[/] {run_id}: {outcome.status}")
    print_result(outcome.result)


def _with_app(
    app_spec: str | None, store: str | None, debug: bool, call: Callable[[Any], Awaitable[T]]
) -> T:
    """Run ``call(runtime)`` on the app's runtime (``--store`` replacing its store)."""
    from actorflow._demo._run import load_app

    spec = _store_override(store)

    async def body() -> T:
        return await call(load_app(app_spec, spec if app_spec else (spec or DEFAULT_STORE)))

    result: T = run_command(body, debug=debug)
    return result
