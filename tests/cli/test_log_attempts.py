"""``actorflow log`` shows a retried step's attempts and the errors of the failed ones."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import anyio
from typer.testing import CliRunner

from actorflow.cli import app
from actorflow.storage import ErrorInfo, FileStore, RunManifest, StepRecord

if TYPE_CHECKING:
    from pathlib import Path


def _stored(path: Path) -> None:
    async def main() -> None:
        async with FileStore(path) as store:
            await store.create_run(
                RunManifest(run_id="retried", workflow="Flow", input=b"\xc0", input_hash="")
            )
            await store.append(
                "retried",
                [
                    StepRecord(
                        step_id="0",
                        kind="ask",
                        target="llm",
                        result=b"\x07",
                        attempts=3,
                        attempt_errors=(
                            ErrorInfo(type="RateLimited", message="429, retry after 2s"),
                            ErrorInfo(type="TimeoutError", message=""),
                        ),
                    ),
                    StepRecord(step_id="1", kind="ask", target="llm", result=b"\x08"),
                ],
            )

    anyio.run(main)


def test_log_lists_the_failed_attempts_of_a_retried_step(tmp_path: Path) -> None:
    _stored(tmp_path)
    result = CliRunner().invoke(app, ["log", "retried", "--store", str(tmp_path)])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    at = next(i for i, line in enumerate(lines) if "ask 0" in line)
    assert "after 3 attempts" in lines[at]
    assert "attempt 1 failed: RateLimited: 429, retry after 2s" in lines[at + 1]
    assert "attempt 2 failed: TimeoutError" in lines[at + 2]
    plain = next(line for line in lines if "ask 1" in line)
    assert "attempts" not in plain


def test_log_json_holds_the_attempt_errors(tmp_path: Path) -> None:
    _stored(tmp_path)
    result = CliRunner().invoke(app, ["log", "retried", "--json", "--store", str(tmp_path)])
    assert result.exit_code == 0, result.output
    first = json.loads(result.output.splitlines()[0])
    assert first["attempts"] == 3
    assert [e["type"] for e in first["attempt_errors"]] == ["RateLimited", "TimeoutError"]
