"""``export`` and ``replay``: stored runs as portable histories, checked against new code.

``export`` writes one run's history to a self-checking ``.afh`` file (the
store's data decrypted, payloads optionally redacted). ``replay`` runs stored
runs, or history files, against the workflows the app imports, as a recovery
would, without running agents and without writing anything; it exits 1 when
any run diverges, so CI can run it before a deploy.
"""

from __future__ import annotations

import os
import re
import time
from typing import TYPE_CHECKING, Annotated

import msgspec
import typer

from actorflow.cli._app import (
    EXIT_CODES,
    AppOpt,
    AppStoreOpt,
    BadValueError,
    DebugOpt,
    JsonOpt,
    KeyFileOpt,
    RunArg,
    StoreOpt,
    chosen_store,
    command,
    reader_store,
    run_command,
)
from actorflow.cli._loading import load_app, with_store
from actorflow.cli._render import err, esc, out, print_json
from actorflow.errors import ActorflowError, EncryptionKeyError
from actorflow.runtime.registry import lookup
from actorflow.runtime.replaying import (
    ReplayReport,
    RunHistory,
    read_history_file,
    read_run_history,
    redact,
    replay_history,
    write_history_file,
)
from actorflow.storage import UnreadableLister

if TYPE_CHECKING:
    from actorflow.storage import Store

__all__: list[str] = []


@command("export")
def export_command(
    run_id: RunArg,
    output: Annotated[
        str, typer.Option("--output", "-o", metavar="FILE", help="The history file to write.")
    ],
    redact_payloads: Annotated[
        bool,
        typer.Option(
            "--redact",
            help="Blank message payloads (replies, states, results) and keep what replay "
            "checks: kinds, targets, argument hashes.",
        ),
    ] = False,
    store: StoreOpt = None,
    key_file: KeyFileOpt = None,
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Write a run's history to a portable, self-checking file for `actorflow replay --history`.

    The file holds the run's manifest, its newest usable checkpoint, the log
    after it, its agents' states and the inbox entries it took, decrypted:
    keep it as you keep the store's data, or use --redact.
    """
    spec = reader_store(store)

    async def body(s: Store) -> None:
        history = await read_run_history(s, run_id)
        try:
            write_history_file(redact(history) if redact_payloads else history, output)
        except OSError as exc:
            raise BadValueError("--output", output, f"a file that can be written ({exc})") from exc

    run_command(lambda: with_store(spec, body, key_file=key_file), debug=debug)
    if as_json:
        print_json({"run_id": run_id, "output": output, "redacted": redact_payloads})
        return
    what = "redacted history" if redact_payloads else "history"
    err().print(f"wrote the {what} of run {esc(run_id)} to {esc(output)}")


_AGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def _since(value: str | None) -> float | None:
    """The cut-off time ``--since`` names (``7d``, ``12h``, ``30m``), or None."""
    if value is None:
        return None
    match = _AGE.match(value)
    if match is None:
        raise BadValueError("--since", value, "an age such as 30m, 12h, 7d or 2w")
    return time.time() - float(match.group(1)) * _SECONDS[match.group(2)]


class _Checked(msgspec.Struct, kw_only=True):
    """One run's line of ``replay``: its report, or the error that kept it from replaying."""

    run_id: str
    report: ReplayReport | None = None
    error: str | None = None
    error_type: str | None = None


async def _replay_one(history: RunHistory) -> ReplayReport:
    manifest = history.manifest
    workflow = lookup(manifest.workflow, manifest.workflow_module)
    return await replay_history(history, workflow)


def _failed(run_id: str, exc: ActorflowError) -> _Checked:
    return _Checked(run_id=run_id, error=str(exc), error_type=type(exc).__name__)


async def _replay_store(
    s: Store, run_ids: list[str], every: bool, since: float | None, workflow: str | None
) -> list[_Checked]:
    checked: list[_Checked] = []
    if every:
        manifests = await s.list_runs(workflow=workflow)
        run_ids = [
            m.run_id for m in manifests if since is None or max(m.created, m.updated) >= since
        ]
        if isinstance(s, UnreadableLister):
            # runs sealed with a key this store was not given: each reported, none hidden
            for entry in await s.list_unreadable():
                if entry.key_id and entry.run_id:
                    try:
                        await s.read_run(entry.run_id)
                    except EncryptionKeyError as exc:
                        checked.append(_failed(entry.run_id, exc))
    for run_id in run_ids:
        try:
            history = await read_run_history(s, run_id)
            if workflow is not None and history.manifest.workflow != workflow:
                continue
            checked.append(_Checked(run_id=run_id, report=await _replay_one(history)))
        except ActorflowError as exc:
            checked.append(_failed(run_id, exc))
    return checked


async def _replay_files(paths: list[str], workflow: str | None) -> list[_Checked]:
    checked: list[_Checked] = []
    for path in paths:
        try:
            history = read_history_file(path)
        except ActorflowError as exc:
            checked.append(_failed(path, exc))
            continue
        except OSError as exc:
            checked.append(_Checked(run_id=path, error=str(exc), error_type=type(exc).__name__))
            continue
        if workflow is not None and history.manifest.workflow != workflow:
            continue
        try:
            checked.append(_Checked(run_id=history.run_id, report=await _replay_one(history)))
        except ActorflowError as exc:
            checked.append(_failed(history.run_id, exc))
    return checked


@command("replay")
def replay_command(
    run_ids: Annotated[
        list[str] | None, typer.Argument(metavar="RUN...", help="Runs to replay.")
    ] = None,
    every: Annotated[bool, typer.Option("--all", help="Replay every run of the store.")] = False,
    since: Annotated[
        str | None,
        typer.Option(
            "--since", metavar="AGE", help="With --all: only runs active within AGE (7d, 12h)."
        ),
    ] = None,
    workflow: Annotated[
        str | None, typer.Option("--workflow", help="Only runs of this workflow.")
    ] = None,
    history: Annotated[
        list[str] | None,
        typer.Option(
            "--history",
            metavar="FILE",
            help="A history file (`actorflow export`) to replay instead of the store (repeatable).",
        ),
    ] = None,
    app_spec: AppOpt = None,
    store: AppStoreOpt = None,
    key_file: KeyFileOpt = None,
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Replay stored runs against the code the app imports; exit 1 if any run diverges.

    Each run goes as a recovery with this code would go, up to where its
    history ends: every recorded step is checked against the step the code
    issues now, recorded replies are fed back, no agent is started or run,
    and nothing is written to the store. A run that cannot be replayed (its
    workflow not defined, a damaged history, a sealed run without its key)
    is reported and the others are still checked.
    """
    ids = list(run_ids or [])
    files = list(history or [])
    spec = chosen_store(store) or os.environ.get("ACTORFLOW_STORE")

    async def body() -> list[_Checked]:
        if not ids and not every and not files:
            raise BadValueError("RUN", "", "run ids, --all, or --history FILE")
        if since is not None and not every:
            raise BadValueError("--since", since, "used with --all")
        cutoff = _since(since)
        # for its imports, the workflows it defines; a factory taking a store gets the one
        # replayed, as with the other commands that load an app
        runtime = load_app(app_spec, spec)
        checked = await _replay_files(files, workflow) if files else []
        if ids or every:
            if spec is not None:
                checked += await with_store(
                    spec,
                    lambda s: _replay_store(s, ids, every, cutoff, workflow),
                    key_file=key_file,
                )
            else:
                s = runtime.store
                try:
                    checked += await _replay_store(s, ids, every, cutoff, workflow)
                finally:
                    await s.aclose()
        return checked

    checked = run_command(body, debug=debug)
    diverged = [c for c in checked if c.report is not None and not c.report.ok]
    failed = [c for c in checked if c.error is not None]
    if as_json:
        print_json(
            [
                {
                    "run_id": c.run_id,
                    "ok": c.report.ok if c.report is not None else False,
                    "report": msgspec.to_builtins(c.report) if c.report is not None else None,
                    "error": c.error,
                    "error_type": c.error_type,
                }
                for c in checked
            ]
        )
    else:
        for c in checked:
            if c.report is not None:
                line = esc(c.report.describe())
                out().print(f"[red]{line}[/]" if not c.report.ok else line)
            else:
                out().print(f"[red]{esc(c.run_id)}: not replayed: {esc(c.error or '')}[/]")
        err().print(
            f"{len(checked)} run(s): {len(checked) - len(diverged) - len(failed)} ok, "
            f"{len(diverged)} diverged, {len(failed)} not replayed"
        )
    if diverged or failed:
        raise typer.Exit(EXIT_CODES["error"])
