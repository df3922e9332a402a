"""``actorflow schedules``: each schedule with its last and next ticks."""

from __future__ import annotations

import datetime
import json
from typing import TYPE_CHECKING

import anyio
from structlog.testing import capture_logs
from typer.testing import CliRunner

from actorflow import Runtime
from actorflow.cli import app
from actorflow.testing import FakeClock
from tests.runtime.flow.queue_flows import Audited

if TYPE_CHECKING:
    from pathlib import Path


async def _declare(path: str) -> None:
    async with Runtime(store=path, clock=FakeClock(1_800_000_000)) as rt:
        await rt.schedule(Audited, 1, schedule_id="nightly", cron="0 2 * * *", timezone="UTC")
        await rt.schedule(
            Audited, 2, schedule_id="often", every=datetime.timedelta(minutes=5), catch_up="all"
        )
        await rt.schedules.pause("often")


def test_schedules_lists_timing_state_and_next_tick(tmp_path: Path) -> None:
    path = str(tmp_path / "store")
    anyio.run(_declare, path)
    runner = CliRunner()
    rows = json.loads(runner.invoke(app, ["schedules", "--store", path, "--json"]).stdout)
    by_id = {r["schedule_id"]: r for r in rows}
    assert by_id["nightly"]["cron"] == "0 2 * * *"
    assert by_id["nightly"]["next_tick"] is not None
    assert by_id["often"]["paused"] is True
    assert by_id["often"]["every"] == 300.0
    table = runner.invoke(app, ["schedules", "--store", path], env={"COLUMNS": "200"})
    assert table.exit_code == 0, table.output
    assert "nightly" in table.output
    assert "paused" in table.output


def test_a_damaged_schedule_is_named_by_validate_and_the_others_still_listed(
    tmp_path: Path,
) -> None:
    path = str(tmp_path / "store")
    anyio.run(_declare, path)
    damaged = tmp_path / "store" / ".schedules" / "nightly.schedule"
    damaged.write_bytes(b"not a schedule \xff")
    runner = CliRunner()
    with capture_logs() as logs:  # the real command line logs to stderr; CliRunner would not
        listed = runner.invoke(app, ["schedules", "--store", path, "--json"])
        checked = runner.invoke(app, ["validate", "--store", path])
    assert listed.exit_code == 0, listed.output
    assert [r["schedule_id"] for r in json.loads(listed.stdout)] == ["often"]
    assert next(e["schedule_id"] for e in logs if e["event"] == "schedule_unreadable") == "nightly"
    assert checked.exit_code == 3, checked.output
    assert f"corrupt: {damaged}: the schedule's definition is corrupt" in checked.stderr
    assert "declare it again" in checked.stderr


def test_schedule_pauses_resumes_and_deletes_from_the_shell(tmp_path: Path) -> None:
    path = str(tmp_path / "store")
    anyio.run(_declare, path)
    runner = CliRunner()

    def states() -> dict[str, bool]:
        listed = runner.invoke(app, ["schedules", "--store", path, "--json"])
        return {r["schedule_id"]: r["paused"] for r in json.loads(listed.stdout)}

    paused = runner.invoke(app, ["schedule", "pause", "nightly", "--store", path])
    assert (paused.exit_code, paused.stdout) == (0, "paused schedule nightly\n")
    assert states() == {"nightly": True, "often": True}
    resumed = runner.invoke(app, ["schedule", "resume", "often", "--store", path])
    assert resumed.exit_code == 0, resumed.output
    assert resumed.stdout.startswith("resumed schedule often: next tick ")
    assert states() == {"nightly": True, "often": False}
    deleted = runner.invoke(app, ["schedule", "delete", "nightly", "--store", path])
    assert deleted.stdout == "deleted schedule nightly (the runs it started stay)\n"
    assert states() == {"often": False}
    missing = runner.invoke(app, ["schedule", "pause", "nightly", "--store", path])
    assert missing.exit_code == 4
    assert "no schedule 'nightly'" in missing.stderr
    wrong = runner.invoke(app, ["schedule", "explode", "often", "--store", path])
    assert wrong.exit_code == 2


def test_a_damaged_schedule_can_be_deleted(tmp_path: Path) -> None:
    path = str(tmp_path / "store")
    anyio.run(_declare, path)
    (tmp_path / "store" / ".schedules" / "often.schedule").write_bytes(b"\x00" * 40)
    runner = CliRunner()
    with capture_logs():
        deleted = runner.invoke(app, ["schedule", "delete", "often", "--store", path])
        assert deleted.exit_code == 0, deleted.output
        assert runner.invoke(app, ["validate", "--store", path]).exit_code == 0
