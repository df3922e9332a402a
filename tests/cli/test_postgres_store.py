"""The readers on a PostgreSQL store: ``--store postgresql://…`` (real server, real data)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import anyio
import pytest
from typer.testing import CliRunner, Result

from actorflow.cli import EXIT_CODES, app
from tests.cli.stored import populate
from tests.storage.pg_server import open_pg_store, pg_url

if TYPE_CHECKING:
    from tests.storage.pg_server import PgServer

pytestmark = pytest.mark.postgres
runner = CliRunner()


def cli(*args: str) -> Result:
    return runner.invoke(app, list(args), env={"COLUMNS": "200"})


@pytest.fixture
def pg_store_url(pg_server: PgServer) -> str:
    """The URL of a schema holding the two runs the file-store tests read."""
    schema = pg_server.schema()
    anyio.run(populate, open_pg_store(pg_server, schema))
    return pg_url(pg_server, schema)


def test_runs_show_and_validate_read_a_postgres_store(
    pg_server: PgServer, pg_store_url: str
) -> None:
    rows = json.loads(cli("runs", "--store", pg_store_url, "--json").stdout)
    assert sorted(r["run_id"] for r in rows) == ["run-a", "run-b"]
    shown = cli("show", "run-a", "0002", "--store", pg_store_url)
    assert shown.exit_code == 0, shown.output
    assert "reviewer" in shown.output
    checked = cli("validate", "--store", pg_store_url)
    assert checked.exit_code == 0, checked.output
    assert "2 run(s), 3 log record(s), 3 checkpoint(s), 1 blob(s) checked" in checked.output
    # a damaged checkpoint row is named, and validate says so with its exit code
    schema = pg_store_url.rpartition("schema=")[2]
    pg_server.sql(
        f"UPDATE {schema}.af_snapshots SET data = set_byte(data, length(data) - 5, "
        "get_byte(data, length(data) - 5) # 255) WHERE snapshot_id = '0002-review'"
    )
    damaged = cli("validate", "run-a", "--store", pg_store_url)
    assert damaged.exit_code == EXIT_CODES["corrupt"], damaged.output
    assert "0002-review" in damaged.output
