"""``actorflow worker``: a process that adopts the runs no live process drives."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import anyio
import typer

from actorflow.cli._app import AppOpt, AppStoreOpt, BadValueError, DebugOpt, command
from actorflow.cli._loading import with_app
from actorflow.cli._render import err, esc
from actorflow.errors import ConfigurationError
from actorflow.runtime import AdoptionPolicy, Runtime

if TYPE_CHECKING:
    from actorflow.storage import Store

__all__ = ["serve"]


async def serve(loaded: Runtime, policy: AdoptionPolicy) -> None:
    """Run ``loaded``'s workflows as a worker with ``policy`` until cancelled (Ctrl-C, SIGTERM)."""
    store: Store = loaded.store
    worker = Runtime(
        store=store,
        config=loaded.config,
        adopt_orphans=policy,
        mailbox_size=loaded.mailbox_size,
        supervisor=loaded.supervisor,
        shutdown_timeout=loaded.shutdown_timeout,
    )
    try:
        async with worker:
            only = ", ".join(policy.workflows) if policy.workflows else "every imported workflow"
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
    )
