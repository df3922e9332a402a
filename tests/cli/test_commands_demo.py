"""``actorflow demo``'s errors, in-process (tests/demo runs the demo end to end)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from typer.testing import CliRunner

from actorflow.cli import EXIT_CODES, app

if TYPE_CHECKING:
    from pathlib import Path

runner = CliRunner()


class TestDemoErrors:
    def test_a_bad_environment_value_is_one_line(self, tmp_path: Path) -> None:
        result = runner.invoke(
            app,
            ["demo", "--path", str(tmp_path), "--store", str(tmp_path / "s")],
            env={"ACTORFLOW_DURABILITY": "fast"},
        )
        assert result.exit_code == EXIT_CODES["error"]
        assert "invalid value 'fast' for ACTORFLOW_DURABILITY" in result.output
        assert "Traceback" not in result.output

    def test_demo_needs_an_existing_folder(self, tmp_path: Path) -> None:
        result = runner.invoke(app, ["demo", "--path", str(tmp_path / "none")])
        assert result.exit_code == EXIT_CODES["error"]
        assert "for --path: expected an existing folder" in result.output
