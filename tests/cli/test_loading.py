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
