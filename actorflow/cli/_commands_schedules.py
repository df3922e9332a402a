"""``actorflow schedules``: the store's schedules, with their last and next ticks."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from actorflow.cli._app import (
    DebugOpt,
    JsonOpt,
    KeyFileOpt,
    StoreOpt,
    command,
    reader_store,
    run_command,
)
from actorflow.cli._loading import with_store
from actorflow.cli._render import esc, out, print_json, when
from actorflow.runtime import ScheduleInfo, list_schedules

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
        out().print(f"no schedules in {esc(spec)}")
        return
    table = Table(title=f"schedules in {esc(spec)}")
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
