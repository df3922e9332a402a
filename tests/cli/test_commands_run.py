"""``recover`` on a real file store: what it does with runs that are not orphans."""

from __future__ import annotations

import json
from functools import partial
from typing import TYPE_CHECKING

import anyio
from structlog.testing import capture_logs
from typer.testing import CliRunner, Result

from actorflow.cli import EXIT_CODES, app
from tests.cli.stored import write_orphan_of_an_unknown_workflow
from tests.runtime.workflow.ledger_flow import RUN, damaged_log

if TYPE_CHECKING:
    from pathlib import Path

runner = CliRunner()


def cli(*args: str) -> Result:
    return runner.invoke(app, list(args), env={"COLUMNS": "200"})


class TestRecover:
    def test_a_completed_run_has_nothing_to_recover(self, store_dir: str) -> None:
        result = cli("recover", "run-a", "--store", store_dir)
        assert result.exit_code == EXIT_CODES["ok"], result.output
        assert "no orphaned runs to recover" in result.output
        assert "not finished" not in result.output
        data = json.loads(cli("recover", "run-a", "--store", store_dir, "--json").stdout)
        assert data == {"recovered": [], "not_finished": []}

    def test_an_unknown_run_is_one_line_with_no_progress_display(self, store_dir: str) -> None:
        result = cli("recover", "nope", "--store", store_dir)
        assert result.exit_code == EXIT_CODES["not_found"]
        assert result.output == (
            f"error: no run 'nope' in the store; `actorflow runs --store {store_dir}` lists them\n"
        )

    def test_an_orphan_whose_class_is_unknown_is_left_as_it_is(self, tmp_path: Path) -> None:
        store = str(tmp_path / "store")
        anyio.run(write_orphan_of_an_unknown_workflow, store)
        result = cli("recover", "orphan", "--store", store)
        assert result.exit_code == EXIT_CODES["run_failed"]
        assert "not finished orphan: interrupted" in result.output


LEDGER_APP = "tests.runtime.workflow.ledger_flow:make_runtime"


class TestRecoverDamagedLog:
    """A flipped byte in a run's log, before or after its newest checkpoint."""

    def test_damage_before_the_newest_checkpoint_recovers_and_validate_names_it(
        self, tmp_path: Path
    ) -> None:
        damaged = anyio.run(partial(damaged_log, tmp_path, after_checkpoint=-2))
        result = cli("recover", "--app", LEDGER_APP, "--store", str(tmp_path))
        assert result.exit_code == EXIT_CODES["ok"], result.output
        assert f"recovered {RUN}: completed" in result.output
        result = cli("validate", "--store", str(tmp_path))
        assert result.exit_code == EXIT_CODES["corrupt"], result.output
        assert damaged.segment.name in result.output

    def test_damage_after_the_newest_checkpoint_exits_3_naming_the_cause(
        self, tmp_path: Path
    ) -> None:
        damaged = anyio.run(partial(damaged_log, tmp_path, after_checkpoint=1))
        args = ["recover", RUN, "--app", LEDGER_APP, "--store", str(tmp_path)]
        result = cli(*args)
        assert result.exit_code == EXIT_CODES["corrupt"], result.output
        assert "RecoveryFailedError" in result.output
        assert "LogCorruptedError" in result.output
        assert damaged.segment.name in result.output
        with capture_logs():  # the run_not_recovered warning: here, not on stdout
            data = json.loads(cli(*args, "--json").stdout)
        [left] = data["not_finished"]
        assert left["corrupt"] is True
        assert "payload checksum mismatch" in left["error"]
