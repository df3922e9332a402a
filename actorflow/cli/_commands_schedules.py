"""``actorflow schedules`` lists the store's schedules; ``actorflow schedule`` pauses,
resumes or deletes one."""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from actorflow.cli._app import (
    AppOpt,
    AppStoreOpt,
    DebugOpt,
    JsonOpt,
    KeyFileOpt,
    StoreOpt,
    command,
    reader_store,
    run_command,
)
from actorflow.cli._loading import with_app, with_store
from actorflow.cli._render import esc, out, print_json, when
from actorflow.runtime import ScheduleInfo, list_schedules
from actorflow.storage import printable_location

if TYPE_CHECKING:
    from actorflow import Runtime

__all__: list[str] = []


def _row(info: ScheduleInfo) -> dict[str, Any]:
    s = info.schedule
    return {
        "schedule_id": s.schedule_id,
        "workflow": s.workflow,
        "cron": s.cron,
        "every": s.every,
        "timezone": s.timezone,
        "catch_up": s.catch_up,
        "paused": s.paused,
        "last_tick": info.last_tick,
        "last_run": info.last_run or None,
        "next_tick": info.next_tick,
    }


@command("schedules")
def schedules_command(
    store: StoreOpt = None,
    key_file: KeyFileOpt = None,
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """List schedules: id, workflow, timing, paused, last tick and its run, next tick."""
    spec = reader_store(store)
    infos = run_command(lambda: with_store(spec, list_schedules, key_file=key_file), debug=debug)
    rows = [_row(i) for i in infos]
    if as_json:
        print_json(rows)
        return
    if not rows:
        out().print(f"no schedules in {esc(printable_location(spec))}")
        return
    table = Table(title=f"schedules in {esc(printable_location(spec))}")
    for col in (
        "schedule",
        "workflow",
        "when",
        "catch up",
        "state",
        "last tick",
        "last run",
        "next tick",
    ):
        table.add_column(col, overflow="fold")
    for r in rows:
        timing = r["cron"] if r["cron"] else f"every {r['every']:g}s"
        table.add_row(
            esc(r["schedule_id"]),
            esc(r["workflow"]),
            esc(f"{timing} ({r['timezone']})" if r["cron"] else timing),
            r["catch_up"],
            "paused" if r["paused"] else "active",
            when(r["last_tick"]),
            esc(r["last_run"] or "-"),
            when(r["next_tick"]),
        )
    out().print(table)


class ScheduleAction(enum.StrEnum):
    """What ``actorflow schedule`` does to a schedule."""

    PAUSE = "pause"
    RESUME = "resume"
    DELETE = "delete"


@command("schedule")
def schedule_command(
    action: Annotated[
        ScheduleAction, typer.Argument(metavar="ACTION", help="pause, resume or delete.")
    ],
    schedule_id: Annotated[str, typer.Argument(metavar="SCHEDULE", help="The schedule's id.")],
    app_spec: AppOpt = None,
    store: AppStoreOpt = None,
    debug: DebugOpt = False,
) -> None:
    """Pause, resume or delete SCHEDULE (``runtime.schedules``): workers read it at their next look.

    Pausing stops its ticks (a run already started goes on); resuming starts
    again from its next tick, passing over those missed while paused;
    deleting removes it (the runs it started stay).
    """

    async def call(runtime: Runtime) -> ScheduleInfo | None:
        if action is ScheduleAction.DELETE:
            await runtime.schedules.delete(schedule_id)
            return None
        if action is ScheduleAction.PAUSE:
            return await runtime.schedules.pause(schedule_id)
        return await runtime.schedules.resume(schedule_id)

    info = with_app(app_spec, store, debug, call)
    sid = esc(schedule_id)
    if info is None:
        out().print(f"deleted schedule {sid} (the runs it started stay)")
    elif info.schedule.paused:
        out().print(f"paused schedule {sid}")
    else:
        out().print(f"resumed schedule {sid}: next tick {when(info.next_tick)}")
