"""The commands that run a user's workflows on their runtime: recover, fork, resume.

Each loads the app (``--app module:attr``, or a plain runtime that knows the
demo's workflow), drives the run through :mod:`actorflow.cli._driving` and
prints what became of it.
"""

from __future__ import annotations

from typing import Annotated

import typer

from actorflow.cli._app import (
    EXIT_CODES,
    AppOpt,
    AppStoreOpt,
    CheckpointArg,
    DebugOpt,
    JsonOpt,
    RunArg,
    app,
)
from actorflow.cli._loading import with_app
from actorflow.cli._render import err, out, print_json, print_outcomes, print_result

__all__: list[str] = []


@app.command("recover")
def recover_command(
    run_id: Annotated[str | None, typer.Argument(help="One run (default: every orphan).")] = None,
    app_spec: AppOpt = None,
    store: AppStoreOpt = None,
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Resume orphaned runs (running or interrupted, no live owner) and finish them."""
    # Imported here: it loads the demo's progress display, needed only when a run is driven.
    from actorflow.cli._driving import recover_runs

    finished, left = with_app(
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
    from actorflow.cli._driving import fork_run

    outcome = with_app(app_spec, store, debug, lambda rt: fork_run(rt, run_id, checkpoint))
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
    from actorflow.cli._driving import resume_run

    outcome = with_app(app_spec, store, debug, lambda rt: resume_run(rt, run_id, response))
    if as_json:
        print_json(outcome)
        return
    out().print(f"[green]resumed[/] {run_id}: {outcome.status}")
    print_result(outcome.result)
