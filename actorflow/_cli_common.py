"""What every ``actorflow`` command shares: the app, options, exit codes, running a command."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Final, TypeVar

import anyio
import typer

from actorflow._cli_render import (
    err,
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
    RunStatus,
    Store,
    open_store,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

__all__ = [
    "DEFAULT_STORE",
    "EXIT_CODES",
    "app",
    "exit_code_for",
    "run_command",
    "with_store",
]

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
