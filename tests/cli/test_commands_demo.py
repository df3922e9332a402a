"""``actorflow demo``'s errors, in-process (tests/demo runs the demo end to end)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from typer.testing import CliRunner

from actorflow.cli import EXIT_CODES, app
from tests.demo.test_workflow import make_tree

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


def test_the_commands_it_suggests_name_its_store(tmp_path: Path) -> None:
    make_tree(tmp_path / "tree")
    store = str(tmp_path / "my store")
    result = runner.invoke(
        app,
        ["demo", "--path", str(tmp_path / "tree"), "--store", store, "--run-id", "r1"],
        env={"COLUMNS": "400"},
    )
    assert result.exit_code == 0, result.output
    suggested = [line.split(":", 1)[-1].strip() for line in result.stdout.splitlines()[-3:]]
    where = f"--store '{store}'"
    assert suggested == [
        f"actorflow runs {where}",
        f"actorflow checkpoints r1 {where}",
        f"actorflow log r1 {where}",
    ]
    # and they work: the suggested `runs` lists the run
    listed = runner.invoke(app, ["runs", "--store", store, "--json"])
    assert [row["run_id"] for row in json.loads(listed.stdout)] == ["r1"]
