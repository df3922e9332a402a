"""What every ``actorflow`` command shares: the app, its options, exit codes, running a command.

An actorflow error ends a command with one line on stderr and its documented
exit code (``--debug`` shows the traceback instead): 0 success; 1 any other
actorflow error; 2 bad usage; 3 corrupt data found; 4 run or checkpoint not
found; 5 the run failed; 6 the run is paused for input; 7 the run is owned by
another live process; 8 the run has not finished yet; 9 the store is encrypted
and the key was not given (or is wrong); 130 interrupted (Ctrl-C or SIGTERM).
"""

from __future__ import annotations

import os
import re
import signal
import sys
from contextvars import ContextVar
from typing import TYPE_CHECKING, Annotated, Any, Final, TypeVar

import anyio
import structlog
import typer
from rich.markup import escape
from typer.core import TyperCommand, TyperGroup

from actorflow._log import env_level
from actorflow.cli._program import given, suggest
from actorflow.cli._render import err, esc
from actorflow.errors import (
    ActorflowError,
    CheckpointNotFoundError,
    ConfigurationError,
    CorruptedDataError,
    EncryptionKeyError,
    ForkEditError,
    RecoveryFailedError,
    RunFailedError,
    RunLockedError,
    RunNotFoundError,
    RunPaused,
    ScheduleNotFoundError,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, MutableMapping

__all__ = [
    "DEFAULT_STORE",
    "EXIT_CODES",
    "AppOpt",
    "AppStoreOpt",
    "BadValueError",
    "CheckpointArg",
    "DebugOpt",
    "JsonOpt",
    "KeyFileOpt",
    "RunArg",
    "StoreOpt",
    "app",
    "chosen_store",
    "command",
    "exit_code_for",
    "main",
    "reader_store",
    "run_command",
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
    "not_finished": 8,
    "encrypted": 9,
    "interrupted": 130,
}


class _CliGroup(TyperGroup):
    """The command group, its ``--help`` shown without a type as in every command."""

    def get_help_option(self, ctx: Any) -> Any:
        """The ``--help`` flag, shown without a type."""
        option = super().get_help_option(ctx)
        if option is not None:
            option.metavar = ""
        return option


app = typer.Typer(
    name="actorflow",
    cls=_CliGroup,
    help="Multi-agent workflows as actors that survive crashes: run, inspect, recover.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


class CliCommand(TyperCommand):
    """A command whose help reads like docs/cli.md: ``RUN CHECKPOINT [B]``, flags with no type.

    Typer writes a required argument as ``{run_id}`` and a flag as ``<bool>``;
    here arguments show their metavar (``RUN``) and flags nothing.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for param in self.params:
            if getattr(param, "is_flag", False):
                param.metavar = ""

    def get_help_option(self, ctx: Any) -> Any:
        """The ``--help`` flag, shown without a type like the others."""
        option = super().get_help_option(ctx)
        if option is not None:
            option.metavar = ""
        return option

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        """``[OPTIONS] RUN CHECKPOINT [B]``: required arguments bare, optional ones bracketed."""
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if param.param_type_name == "argument":
                name = param.metavar or (param.name or "ARG").upper()
                pieces.append(name if param.required else f"[{name}]")
        return pieces


def command(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register a command on :data:`app` under ``name``, with docs/cli.md's help format."""
    return app.command(name, cls=CliCommand)


StoreOpt = Annotated[
    str | None,
    typer.Option(
        "--store",
        # Not typer's envvar: a --store before the command must win over the variable.
        help="Store: a folder path or a URL (s3://, sqlite://, postgresql://) "
        + escape(f"[default: $ACTORFLOW_STORE, else {DEFAULT_STORE}]"),
    ),
]
KeyFileOpt = Annotated[
    str | None,
    typer.Option(
        "--key-file",
        metavar="FILE",
        # Not typer's envvar: the library reads ACTORFLOW_KEY_FILE (and ACTORFLOW_KEYS)
        # itself wherever it opens a store, so the CLI and a program agree.
        help="Keys of an encrypted store: a file of key-id:base64-key entries "
        + escape("[default: $ACTORFLOW_KEY_FILE, else the keys in $ACTORFLOW_KEYS]"),
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print data as JSON.")]
DebugOpt = Annotated[bool, typer.Option("--debug", help="Show tracebacks of errors.")]
RunArg = Annotated[str, typer.Argument(metavar="RUN", help="Run id (see `actorflow runs`).")]
CheckpointArg = Annotated[
    str,
    typer.Argument(
        metavar="CHECKPOINT",
        help="Checkpoint: an id, a unique prefix of one, `latest`, or `latest~N` (N before it).",
    ),
]
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
        # Help is rich markup: escaped, the bracket shows instead of vanishing as a tag.
        help="Store: a folder path or a URL (s3://, sqlite://, postgresql://); replaces "
        "the app's own store "
        + escape("[default: $ACTORFLOW_STORE, else the app's store, else ./.actorflow]"),
    ),
]


_store_before: ContextVar[str | None] = ContextVar("actorflow_cli_store_before", default=None)


@app.callback()
def _before_the_command(
    store: Annotated[
        str | None,
        typer.Option(
            "--store",
            metavar="STORE",
            help="Store for the command (as its own --store, which wins if given too).",
        ),
    ] = None,
) -> None:
    # `actorflow --store S runs` as well as `actorflow runs --store S`.
    _store_before.set(store)
    try:
        env_level()  # a misspelt level would leave the log quieter than asked, silently
    except ConfigurationError as exc:
        err().print(f"[bold red]error:[/] {esc(exc)}")
        raise typer.Exit(EXIT_CODES["error"]) from None


def chosen_store(option: str | None) -> str | None:
    """The ``--store`` given after the command, else before it; None if neither.

    Records it (and no ``--app``) for the hints the command prints; a command
    that takes ``--app`` records both again (see ``with_app``).
    """
    store = option if option is not None else _store_before.get()
    given(store=store)
    return store


def reader_store(option: str | None) -> str:
    """A command's store when it takes no ``--app``: ``--store``, ``$ACTORFLOW_STORE``, default."""
    return chosen_store(option) or os.environ.get("ACTORFLOW_STORE") or DEFAULT_STORE


class BadValueError(ConfigurationError):
    """A command's option has a bad value: bad usage, exit code 2 (as for an unknown option)."""


def exit_code_for(error: BaseException) -> int:
    """The documented exit code for ``error``."""
    match error:
        case BadValueError() | ForkEditError():
            return EXIT_CODES["usage"]
        case CorruptedDataError():
            return EXIT_CODES["corrupt"]
        case RecoveryFailedError() if isinstance(error.__cause__, CorruptedDataError):
            return EXIT_CODES["corrupt"]
        case RunNotFoundError() | CheckpointNotFoundError() | ScheduleNotFoundError():
            return EXIT_CODES["not_found"]
        case RunFailedError():
            return EXIT_CODES["run_failed"]
        case RunPaused():
            return EXIT_CODES["paused"]
        case RunLockedError():
            return EXIT_CODES["locked"]
        case EncryptionKeyError():
            return EXIT_CODES["encrypted"]
        case KeyboardInterrupt():
            return EXIT_CODES["interrupted"]
        case _:
            return EXIT_CODES["error"]


APP_COMMANDS: Final = frozenset(
    {"start", "recover", "fork", "resume", "worker", "signal", "update", "cancel"}
)
"""The commands that take ``--app``."""

_SUGGESTED = re.compile(r"`actorflow ([a-z]+)((?: [^`\s]+)*)`")


def as_typed(message: str) -> str:
    """``message`` with each command it suggests (`actorflow runs`) as the user runs them.

    Library errors name commands plainly; on the command line they repeat the
    program as typed and the ``--app``/``--store`` given, so they work as printed.
    """

    def typed(match: re.Match[str]) -> str:
        name, args = match.group(1), match.group(2).split()
        return f"`{suggest(name, *args, app=name in APP_COMMANDS)}`"

    return _SUGGESTED.sub(typed, message)


def run_command(
    fn: Callable[[], Awaitable[T]],
    *,
    debug: bool,
    run_hint: str | None = None,
    backend: str = "asyncio",
    runs_until_stopped: bool = False,
) -> T:
    """Run ``fn`` on anyio's ``backend`` loop; an error becomes one line and its exit code.

    SIGTERM stops ``fn`` as Ctrl-C does: a runtime it runs marks its live runs
    interrupted, and the command exits with the "interrupted" code. ``run_hint``
    names the run an interruption leaves for ``recover`` (``""``: every run it
    drove); None, for a command that drives no run, says only "interrupted".
    A command that ``runs_until_stopped`` (a worker) ends that way by design:
    it says "stopped" and exits 0, so a service manager's stop is no failure.
    """
    try:
        try:
            return anyio.run(_terminable, fn, backend=backend)
        except BaseExceptionGroup as group:
            # A task group around the work wraps its errors; actorflow errors tell the story
            # (the first: several runs read at once often fail alike), an interruption first.
            errors = _leaves(group)
            if not errors or not all(
                isinstance(e, ActorflowError | KeyboardInterrupt) for e in errors
            ):
                raise
            interrupted = [e for e in errors if isinstance(e, KeyboardInterrupt)]
            raise (interrupted or errors)[0] from group
    except ActorflowError as exc:
        if debug:
            raise
        # The message carries user data (a run id, an exception's text): escaped.
        err().print(f"[bold red]error:[/] {esc(as_typed(str(exc)))}")
        raise typer.Exit(exit_code_for(exc)) from None
    except KeyboardInterrupt:
        again = suggest("recover", *([run_hint] if run_hint else []))
        if runs_until_stopped:
            err().print(
                "stopped: the runs it drove are left interrupted for other workers "
                f"(or `{esc(again)}`) to continue"
            )
            raise typer.Exit(0) from None
        if run_hint is None:
            err().print("interrupted")
        else:
            err().print(f"interrupted: `{esc(again)}` continues where it stopped")
        raise typer.Exit(EXIT_CODES["interrupted"]) from None


async def _terminable(fn: Callable[[], Awaitable[T]]) -> T:
    """``await fn()``; SIGINT or SIGTERM cancels it and leaves as ``KeyboardInterrupt``.

    Cancelled, ``async with Runtime()`` in ``fn`` interrupts its runs (stored
    ``interrupted``, for ``recover``). Ctrl-C is received too, not left to
    Python: on trio a ``KeyboardInterrupt`` can be raised inside any task
    (a run's, halfway through a store call), a cancellation only where it can wait.
    """
    if sys.platform == "win32":  # no signal receivers on Windows' event loops
        return await fn()
    work = anyio.CancelScope()
    terminated = False

    async def watch() -> None:
        nonlocal terminated
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async for _ in signals:
                terminated = True
                work.cancel()
                return

    error: Exception | None = None
    async with anyio.create_task_group() as tg:
        tg.start_soon(watch)
        with work:
            try:
                value = await fn()
            except Exception as exc:  # raised as itself below, not in the group's wrapper
                error = exc
        tg.cancel_scope.cancel()
    if error is not None:
        raise error
    if terminated:
        raise KeyboardInterrupt
    return value


def _leaves(group: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    found: list[BaseException] = []
    for exc in group.exceptions:
        found.extend(_leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc])
    return found


def main() -> None:
    """Entry point of the ``actorflow`` script and of ``python -m actorflow``."""
    _log_to_stderr()
    app(prog_name="actorflow")


def _log_to_stderr() -> None:
    # The command line is an application, so it says where events go: stdout
    # carries the commands' data (`--json` output is piped to other programs),
    # so actorflow's warnings go to stderr. A user's `--app` module imported
    # later may configure structlog its own way.
    if not structlog.is_configured():
        structlog.configure(
            processors=[SealedRunWarnings(), *structlog.get_config()["processors"]],
            logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        )


class SealedRunWarnings:
    """A structlog processor: one ``run_unreadable`` warning per missing key, not per run.

    Without a store's key every run it sealed is unreadable alike, and the
    commands say so in their own words (``runs`` counts them, ``validate``
    names them); a warning for each would bury the rest of stderr.
    """

    def __init__(self) -> None:
        self._warned: set[str] = set()

    def __call__(
        self, logger: object, method: str, event: MutableMapping[str, Any]
    ) -> MutableMapping[str, Any]:
        key_id = event.get("key_id")
        if event.get("event") != "run_unreadable" or not key_id:
            return event
        if key_id in self._warned:
            raise structlog.DropEvent
        self._warned.add(key_id)
        event["others"] = "further runs sealed with this key are not warned of one by one"
        return event
