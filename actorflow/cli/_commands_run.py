"""The commands that run workflows on the user's runtime: start, recover, fork, resume.

Each loads the app (``--app module:attr``, or a plain runtime that knows the
demo's workflow), drives the run through :mod:`actorflow.cli._driving` and
prints what became of it: completed (with its result), paused (with its prompt
and how to answer it; exit code 6) or failed (exit code 5).
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import typing
import uuid
from typing import TYPE_CHECKING, Annotated, Any

import anyio
import msgspec
import typer

from actorflow.cli._app import (
    EXIT_CODES,
    AppOpt,
    AppStoreOpt,
    BadValueError,
    CheckpointArg,
    DebugOpt,
    JsonOpt,
    RunArg,
    chosen_store,
    command,
)
from actorflow.cli._loading import with_app
from actorflow.cli._messages import read_input
from actorflow.cli._program import suggest
from actorflow.cli._render import display, err, esc, out, print_json, print_outcome, print_outcomes
from actorflow.runtime.registry import lookup

if TYPE_CHECKING:
    from actorflow.cli._driving import RunOutcome
    from actorflow.runtime import Runtime

__all__: list[str] = []


def _finish(outcome: RunOutcome, *, verb: str, as_json: bool) -> None:
    """Print one run's outcome and exit with its code (0, 5 failed, 6 paused)."""
    from actorflow.cli._driving import outcomes_exit

    if as_json:
        print_json(outcome)
    else:
        print_outcome(outcome, verb=verb)
    raise typer.Exit(EXIT_CODES[outcomes_exit([outcome])])


@command("start")
def start_command(
    workflow: Annotated[
        str,
        typer.Argument(
            metavar="WORKFLOW",
            help="The workflow's registered name: its class's __qualname__, "
            "or its __actorflow_name__.",
        ),
    ],
    input_json: Annotated[str, typer.Option("--input", help="The run's input as JSON.")] = "null",
    run_id: Annotated[
        str | None, typer.Option("--run-id", help="Id of the new run (default: a new uuid).")
    ] = None,
    wait: Annotated[
        bool,
        typer.Option(
            "--wait/--detach",
            help="Wait for the run to end (default), or let it run on in a background "
            "process once it is recorded.",
        ),
    ] = True,
    background: Annotated[bool, typer.Option("--background", hidden=True)] = False,
    app_spec: AppOpt = None,
    store: AppStoreOpt = None,
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Start a run of your workflow on the app's runtime and run it to the end."""
    from actorflow.cli._driving import start_run

    new_id = run_id or uuid.uuid4().hex
    if not wait:
        args = ["start", workflow, "--input", input_json, "--run-id", new_id]
        args += ["--app", app_spec] if app_spec is not None else []
        chosen = chosen_store(store)
        args += ["--store", chosen] if chosen is not None else []
        _detach(new_id, [*args, *(["--debug"] if debug else [])])
        return
    on_started = _background_started if background else None
    # a background process's output goes nowhere (see _background_started)
    console = None if background else display()

    async def call(runtime: Runtime) -> RunOutcome:
        cls = lookup(workflow)
        value = _decode_input(cls, input_json)
        return await start_run(runtime, cls, value, new_id, console, on_started=on_started)

    outcome = with_app(app_spec, store, debug, call, run_hint=new_id, create=True)
    _finish(outcome, verb="completed", as_json=as_json)


def _decode_input(cls: type[Any], text: str) -> Any:
    """``--input`` as the workflow's input type (``run(self, ctx, input)``'s annotation).

    Raises:
        BadValueError: the text is not JSON, or not a value of that type.
    """
    run = getattr(cls, "run", None)
    try:
        hints = typing.get_type_hints(run)
        names = run.__code__.co_varnames[: run.__code__.co_argcount]  # type: ignore[union-attr]
        input_type = hints.get(names[2], Any) if len(names) > 2 else Any
    except Exception:  # unresolvable annotations: the run decodes the input itself
        input_type = Any
    try:
        return msgspec.json.decode(text.encode(), type=input_type)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        name = getattr(input_type, "__qualname__", str(input_type))
        raise BadValueError("--input", text, f"JSON for a {name} ({exc})") from exc


def _detach(run_id: str, args: list[str]) -> None:
    """Run ``actorflow *args`` in a background process; return once the run is recorded."""
    cmd = [sys.executable, "-m", "actorflow", *args, "--wait", "--background"]
    proc = subprocess.Popen(
        cmd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # Ctrl-C in this terminal does not reach it
    )
    assert proc.stdout is not None
    said: list[str] = []
    for line in proc.stdout:
        if line == f"{_STARTED} {run_id}\n":
            proc.stdout.close()
            out().print(
                f"started {esc(run_id)} in the background (process {proc.pid}); "
                f"`{esc(suggest('result', run_id, app=False))}` gives its result"
            )
            return
        said.append(line)
    # it ended before the run was recorded: its error is ours
    code = proc.wait()
    sys.stderr.write("".join(said))
    raise typer.Exit(code or EXIT_CODES["error"])


_STARTED = "actorflow-background-started"


def _background_started(run_id: str) -> None:
    """In the background process: tell the parent the run is recorded, then go quiet."""
    sys.stdout.write(f"{_STARTED} {run_id}\n")
    sys.stdout.flush()
    # The parent stops reading now; later output (progress, log events) goes nowhere.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    os.close(devnull)


@command("recover")
def recover_command(
    run_id: Annotated[
        str | None, typer.Argument(metavar="RUN", help="One run (default: every orphan).")
    ] = None,
    app_spec: AppOpt = None,
    store: AppStoreOpt = None,
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Resume orphaned runs (running or interrupted, no live owner) and finish them, and
    paused runs whose wait can now resolve (a signal they wait for came, or their deadline)."""
    # Imported here: the driving code is needed only when a run is driven.
    from actorflow.cli._driving import outcomes_exit, recover_runs

    outcomes = with_app(
        app_spec,
        store,
        debug,
        lambda rt: recover_runs(rt, run_id, display()),
        run_hint=run_id or "",
    )
    print_outcomes(outcomes, as_json=as_json)
    raise typer.Exit(EXIT_CODES[outcomes_exit(outcomes)])


@command("fork")
def fork_command(
    run_id: RunArg,
    checkpoint: CheckpointArg,
    edits: Annotated[
        list[str] | None,
        typer.Option(
            "--edit",
            metavar="AGENT=FILE",
            help="Start the fork with agent AGENT's state replaced by the JSON in FILE "
            "(checked against its state type); repeat for more agents.",
        ),
    ] = None,
    app_spec: AppOpt = None,
    store: AppStoreOpt = None,
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Start a new run from a checkpoint of RUN and run it to the end."""
    from actorflow.cli._driving import fork_run

    def forked(new_id: str) -> None:
        # at once, before the fork runs: a script (or a person) can follow it meanwhile
        (err() if as_json else out()).print(
            f"forking {esc(run_id)} at {esc(checkpoint)} as {esc(new_id)}", soft_wrap=True
        )

    async def call(runtime: Runtime) -> RunOutcome:
        edit = await _read_edits(edits or [])
        return await fork_run(runtime, run_id, checkpoint, display(), on_forked=forked, edit=edit)

    outcome = with_app(app_spec, store, debug, call, run_hint="")
    _finish(outcome, verb=f"forked {esc(run_id)} at {esc(checkpoint)} as", as_json=as_json)


async def _read_edits(specs: list[str]) -> dict[str, object]:
    """Each ``--edit AGENT=FILE``: the agent's new state, as the JSON in FILE decodes.

    Raises:
        BadValueError: no ``=``, no agent name, an agent named twice, or FILE
            missing, unreadable or not JSON.
    """
    expected = "AGENT=FILE, FILE a JSON file of the agent's new state"
    edit: dict[str, object] = {}
    for spec in specs:
        agent, sign, file = spec.partition("=")
        if not sign or not agent or not file:
            raise BadValueError("--edit", spec, expected)
        if agent in edit:
            raise BadValueError("--edit", spec, f"{expected}, each agent once")
        data = await anyio.to_thread.run_sync(
            functools.partial(read_input, "--edit", file, value=spec, expected=expected)
        )
        try:
            edit[agent] = msgspec.json.decode(data)
        except msgspec.DecodeError as exc:
            raise BadValueError("--edit", spec, f"{expected} ({file} is not JSON: {exc})") from exc
    return edit


@command("resume")
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

    outcome = with_app(
        app_spec,
        store,
        debug,
        lambda rt: resume_run(rt, run_id, response, display()),
        run_hint=run_id,
    )
    _finish(outcome, verb="resumed", as_json=as_json)
