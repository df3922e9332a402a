"""The commands that talk to a run from the shell: signal, update, cancel.

Each goes through the public ``Runtime.signal``, ``update`` and ``cancel`` of
the app's runtime, which is not started: these reach any run, live in another
process, paused or orphaned, through its durable inbox. ``TYPE`` is the
message type's registered name, found among the classes ``--app`` imports
(see :mod:`actorflow.cli._messages`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from actorflow.cli._app import AppOpt, AppStoreOpt, DebugOpt, RunArg, command
from actorflow.cli._loading import with_app
from actorflow.cli._messages import decode_message, find_message_type, read_payload
from actorflow.cli._program import suggest
from actorflow.cli._render import esc, out, print_json
from actorflow.errors import RegistryError
from actorflow.storage import RunStatus

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from actorflow.runtime import Runtime

__all__: list[str] = []

T = TypeVar("T")

TypeArg = Annotated[
    str,
    typer.Argument(
        metavar="TYPE",
        help="The message's type as the run names it: its __actorflow_name__, "
        "else its qualified name (str, int... for plain values).",
    ),
]
DataOpt = Annotated[str | None, typer.Option("--json", metavar="DATA", help="The message as JSON.")]


def _on_app(
    app_spec: str | None,
    store: str | None,
    debug: bool,
    call: Callable[[Runtime], Awaitable[T]],
) -> T:
    """``call(runtime)`` on the app's runtime, not started; its store closed after."""

    async def body(runtime: Runtime) -> T:
        try:
            return await call(runtime)
        finally:
            await runtime.store.aclose()

    return with_app(app_spec, store, debug, body)


@command("signal")
def signal_command(
    run_id: RunArg,
    type_name: TypeArg,
    data: DataOpt = None,
    file: Annotated[
        str | None, typer.Option("--file", metavar="F", help="The message as JSON, in a file.")
    ] = None,
    entry_id: Annotated[
        str | None,
        typer.Option("--id", help="Id of the signal: sending it again with this id adds nothing."),
    ] = None,
    app_spec: AppOpt = None,
    store: AppStoreOpt = None,
    debug: DebugOpt = False,
) -> None:
    """Send a signal to RUN, for a ctx.wait_for of its type to take (live, paused or orphaned)."""

    async def call(runtime: Runtime) -> tuple[int, str]:
        option, payload = read_payload(data, file)
        try:
            cls = find_message_type(type_name)
        except RegistryError as exc:
            # what the run waits for is the likeliest name the user meant
            waits = {w.type for w in (await runtime.query(run_id)).waits if w.kind == "wait"}
            if not waits:
                raise
            listed = ", ".join(sorted(waits))
            detail = f"{exc.detail}; run {run_id!r} waits for {listed}"
            raise RegistryError(type_name, detail) from None
        message = decode_message(cls, payload, option=option)
        entry = await runtime.signal(run_id, message, id=entry_id)
        return entry.seq, entry.entry_id

    seq, sent_id = _on_app(app_spec, store, debug, call)
    out().print(f"sent {esc(type_name)} to {esc(run_id)}: inbox entry {seq}, id {esc(sent_id)}")


@command("update")
def update_command(
    run_id: RunArg,
    type_name: TypeArg,
    data: Annotated[str, typer.Option("--json", metavar="DATA", help="The message as JSON.")],
    update_id: Annotated[
        str | None,
        typer.Option(
            "--update-id",
            help="Id of the update: sending it again with this id gets the first reply.",
        ),
    ] = None,
    app_spec: AppOpt = None,
    store: AppStoreOpt = None,
    debug: DebugOpt = False,
) -> None:
    """Send an update to RUN's @update handler for its type; print the reply as JSON.

    Waits for the reply: a paused or orphaned run answers once it goes on.
    """

    async def call(runtime: Runtime) -> Any:
        message = decode_message(find_message_type(type_name), data.encode(), option="--json")
        return await runtime.update(run_id, message, update_id=update_id)

    print_json(_on_app(app_spec, store, debug, call))


@command("cancel")
def cancel_command(
    run_id: RunArg,
    reason: Annotated[
        str | None, typer.Option("--reason", metavar="TEXT", help="Why, recorded with the run.")
    ] = None,
    app_spec: AppOpt = None,
    store: AppStoreOpt = None,
    debug: DebugOpt = False,
) -> None:
    """Cancel RUN: it ends cancelled, with the reason recorded (a finished run is left as is).

    A run another live process owns ends as soon as its owner takes the request.
    """

    async def call(runtime: Runtime) -> tuple[RunStatus, RunStatus]:
        before = (await runtime.store.read_run(run_id)).status
        if not before.finished:
            await runtime.cancel(run_id, reason=reason)
        return before, (await runtime.store.read_run(run_id)).status

    before, status = _on_app(app_spec, store, debug, call)
    rid = esc(run_id)
    if before.finished:
        out().print(f"{rid} had ended already ({esc(before)}): left as it is")
    elif status is RunStatus.CANCELLED:
        out().print(f"cancelled {rid}")
    elif status.finished:
        out().print(f"{rid} ended {esc(status)} before the cancel reached it")
    else:
        # a live owner takes the request and ends the run
        out().print(
            f"cancel of {rid} requested from its owner; "
            f"`{esc(suggest('result', run_id, app=False))}` says when it has ended"
        )
