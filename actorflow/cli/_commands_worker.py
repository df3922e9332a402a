"""``actorflow worker``: a process that adopts the runs no live process drives.

It says on stderr, one line each, when it adopts a run, when a run it drives
ends (finished, failed, paused, interrupted as it stops) and when it gives one
up for now (an adoption that failed, to be tried again) or leaves one alone
(a workflow it does not know). The lines come from the runtime's own log
events, which :class:`WorkerReport` picks out of structlog's stream.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated, Any, Final

import anyio
import structlog
import typer

from actorflow._log import configure_logging, level
from actorflow.cli._app import AppOpt, AppStoreOpt, BadValueError, DebugOpt, command
from actorflow.cli._loading import with_app
from actorflow.cli._render import err, esc
from actorflow.errors import ConfigurationError
from actorflow.runtime import AdoptionPolicy, Runtime

if TYPE_CHECKING:
    from collections.abc import Iterator, MutableMapping

    from actorflow.storage import Store

__all__ = ["WorkerReport", "serve"]

_LEVELS: Final = {"debug": 10, "info": 20, "warning": 30, "error": 40, "critical": 50}


class WorkerReport:
    """A structlog processor: a line on stderr for each run the worker takes, ends or gives up.

    ``shown_from`` is the level the user asked for (``ACTORFLOW_LOG_LEVEL``):
    below it, events go no further once read (the worker lowers actorflow's
    level to read the ones it reports).
    """

    def __init__(self, shown_from: int) -> None:
        self.shown_from = shown_from

    def __call__(
        self, logger: object, method: str, event: MutableMapping[str, Any]
    ) -> MutableMapping[str, Any]:
        line = _line(event)
        if line is not None:
            err().print(line)
        if _LEVELS.get(method, 20) < self.shown_from:
            raise structlog.DropEvent
        return event


def _line(event: MutableMapping[str, Any]) -> str | None:
    run = esc(event.get("run_id", "?"))
    match event.get("event"):
        case "run_adopting":
            return f"adopted {run} ({esc(event.get('status', '?'))})"
        case "run_finished":
            return f"finished {run}: {esc(event.get('status', '?'))}"
        case "run_interrupted":
            return f"left {run} interrupted, for another worker or `recover`"
        case "run_adoption_failed":
            retry = event.get("retry_in")
            return f"gave up {run} for now ({esc(event.get('error', '?'))}); retrying in {retry}s"
        case "run_left_alone":
            return f"left {run} alone: {esc(event.get('reason', '?'))}"
        case _:
            return None


@contextmanager
def _reporting_runs() -> Iterator[None]:
    """:class:`WorkerReport` first in structlog's processors while the block runs."""
    shown_from = level()
    processors = structlog.get_config()["processors"]
    configure_logging(min(shown_from, _LEVELS["info"]))
    structlog.configure(processors=[WorkerReport(shown_from), *processors])
    try:
        yield
    finally:
        structlog.configure(processors=processors)
        configure_logging(shown_from)


async def serve(loaded: Runtime, policy: AdoptionPolicy) -> None:
    """Run ``loaded``'s workflows as a worker with ``policy`` until cancelled (Ctrl-C, SIGTERM)."""
    store: Store = loaded.store
    worker = Runtime(
        store=store,
        config=loaded.config,
        adopt_orphans=policy,
        queues=loaded.queues,
        clock=loaded.clock,
        mailbox_size=loaded.mailbox_size,
        supervisor=loaded.supervisor,
        shutdown_timeout=loaded.shutdown_timeout,
    )
    try:
        # after the app's import: it may have configured structlog its own way
        with _reporting_runs():
            async with worker:
                workflows = policy.workflows
                only = ", ".join(workflows) if workflows else "every imported workflow"
                err().print(
                    f"worker {esc(worker.owner)} adopting runs of {esc(only)} from {esc(store)}"
                    " (Ctrl-C stops it; its runs are left for other workers)"
                )
                await anyio.sleep_forever()
    finally:
        with anyio.CancelScope(shield=True):
            await store.aclose()


@command("worker")
def worker_command(
    app_spec: AppOpt = None,
    store: AppStoreOpt = None,
    workflow: Annotated[
        list[str] | None,
        typer.Option(
            "--workflow", help="Adopt only runs of this workflow (repeatable; default: any)."
        ),
    ] = None,
    code_version: Annotated[
        list[str] | None,
        typer.Option(
            "--code-version",
            help="Adopt only runs started under this code_version (repeatable; default: any).",
        ),
    ] = None,
    concurrency: Annotated[
        int, typer.Option("--concurrency", help="Adopted runs driven at once.")
    ] = AdoptionPolicy().max_concurrent,
    poll: Annotated[
        float, typer.Option("--poll", help="Seconds between looks at the store.")
    ] = AdoptionPolicy().poll_interval,
    create: Annotated[
        bool,
        typer.Option("--create", help="Make the store if it does not exist (default: refuse)."),
    ] = False,
    debug: DebugOpt = False,
) -> None:
    """Keep adopting runs no live process drives (orphaned, queued, paused ones whose wait
    can resolve) and drive them, until stopped. Start several on one store: they share the
    work, and a crashed one's runs are taken over by the others."""

    def policy() -> AdoptionPolicy:
        try:
            return AdoptionPolicy(
                workflows=tuple(workflow) if workflow else None,
                code_versions=tuple(code_version) if code_version else None,
                max_concurrent=concurrency,
                poll_interval=poll,
            )
        except ConfigurationError as exc:
            flag = {"max_concurrent": "--concurrency", "poll_interval": "--poll"}.get(exc.option)
            raise BadValueError(flag or exc.option, exc.value, exc.expected) from exc

    with_app(
        app_spec,
        store,
        debug,
        lambda runtime: serve(runtime, policy()),
        run_hint="",
        create=create,
        runs_until_stopped=True,
    )
