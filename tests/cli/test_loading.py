"""Loading the user's app with ``--app module:attr``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from typer.testing import CliRunner

from actorflow.cli import EXIT_CODES, app

if TYPE_CHECKING:
    from pathlib import Path

runner = CliRunner()


class TestAppErrors:
    @pytest.mark.parametrize(
        ("spec", "says"),
        [
            ("json", "expected module:attr"),
            ("no_such_module_here:runtime", "No module named"),
            ("json:no_such_name", "has no attribute"),
            ("json:dumps", "a function returning a Runtime (TypeError"),
            ("json:__name__", "a Runtime or a function returning one"),
        ],
    )
    def test_app_errors_say_what_is_wrong(self, tmp_path: Path, spec: str, says: str) -> None:
        result = runner.invoke(app, ["recover", "--app", spec, "--store", str(tmp_path)])
        assert result.exit_code == EXIT_CODES["error"]
        assert says in result.output


class TestWorkerErrors:
    def test_a_worker_whose_app_cannot_load_says_why(self, tmp_path: Path) -> None:
        spec = "no_such_module_here:runtime"
        result = runner.invoke(app, ["worker", "--app", spec, "--store", str(tmp_path)])
        assert result.exit_code == EXIT_CODES["error"]
        assert "No module named" in result.output

    @pytest.mark.parametrize(
        ("option", "value", "says"),
        [("--concurrency", "0", "an int of 1 or more"), ("--poll", "-1", "a positive, finite")],
    )
    def test_a_worker_refuses_a_bad_option_by_its_flag(
        self, tmp_path: Path, option: str, value: str, says: str
    ) -> None:
        result = runner.invoke(app, ["worker", option, value, "--store", str(tmp_path)])
        assert result.exit_code == EXIT_CODES["usage"]
        assert option in result.output
        assert says in result.output


class TestAppsThatStopTheProgram:
    @pytest.mark.parametrize(
        ("module", "says"),
        [("exiting_app", "sys.exit(3)"), ("interrupting_app", "KeyboardInterrupt")],
    )
    def test_an_app_that_stops_at_import_is_one_clear_line(
        self, tmp_path: Path, module: str, says: str
    ) -> None:
        spec = f"tests.cli.{module}:runtime"
        result = runner.invoke(app, ["recover", "--app", spec, "--store", str(tmp_path)])
        assert result.exit_code == EXIT_CODES["error"], result.output
        assert result.output.startswith("error: invalid value")
        assert says in result.output
        assert "__main__" in result.output
        assert "interrupted" not in result.output  # no hint of a run that never started


def test_an_unknown_log_level_is_refused_before_any_command(tmp_path: Path) -> None:
    result = runner.invoke(
        app, ["runs", "--store", str(tmp_path)], env={"ACTORFLOW_LOG_LEVEL": "verbose"}
    )
    assert result.exit_code == EXIT_CODES["error"], result.output
    assert "ACTORFLOW_LOG_LEVEL" in result.output
