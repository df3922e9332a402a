"""Every command on ``--store postgresql://…?schema=…``, with the exit codes of docs/cli.md.

Real runs on a real server, each test in a schema of its own. The readers
``runs``, ``show`` and ``validate`` are in ``test_postgres_store.py`` and
``actorflow worker`` in tests/runtime/workflow/test_workers.py; this module has
the rest: ``checkpoints``, ``log``, ``diff``, ``compare``, ``result``,
``export`` (and ``replay`` of its file), ``signal``, ``cancel``, ``recover``,
``fork`` and ``prune``.
"""

from __future__ import annotations

import contextlib
import json
from typing import TYPE_CHECKING

import anyio
import pytest
from typer.testing import CliRunner, Result

from actorflow import Runtime
from actorflow.cli import EXIT_CODES, app
from actorflow.errors import RunPaused
from actorflow.storage import open_store
from tests.cli.signal_app import Approval
from tests.runtime.workflow.fork_flow import Ledger
from tests.runtime.workflow.ledger_flow import RUN as ORPHAN
from tests.runtime.workflow.ledger_flow import interrupted_run
from tests.storage.pg_server import pg_url

if TYPE_CHECKING:
    from pathlib import Path

    from tests.storage.pg_server import PgServer

pytestmark = pytest.mark.postgres
runner = CliRunner()
SIGNAL_APP = "tests.cli.signal_app:make_runtime"
FORK_APP = "tests.runtime.workflow.fork_flow:make_runtime"
LEDGER_APP = "tests.runtime.workflow.ledger_flow:make_runtime"
APPROVE = '{"by": "ann", "level": 2}'


def cli(*args: str) -> Result:
    return runner.invoke(app, list(args), env={"COLUMNS": "200"})


async def _runs(url: str) -> None:
    """``books`` (completed, four checkpoints), ``ap`` and ``ap2`` (paused for an Approve),
    ``ledger`` (interrupted: no owner, for ``recover``)."""
    store = open_store(url)
    try:
        async with Runtime(store=store) as runtime:
            await runtime.run(Ledger, "a", run_id="books")
            for run_id in ("ap", "ap2"):
                with contextlib.suppress(RunPaused):
                    await runtime.run(Approval, None, run_id=run_id)
        await interrupted_run(store, ORPHAN)
    finally:
        await store.aclose()


@pytest.fixture(scope="module")
def stored(pg_server: PgServer) -> str:
    """A schema of the module's, with the runs of :func:`_runs`; the readers' tests share it."""
    url = pg_url(pg_server, pg_server.schema())
    anyio.run(_runs, url)
    return url


@pytest.fixture
def fresh(pg_server: PgServer) -> str:
    """A schema of the test's own with the runs of :func:`_runs`, for the commands that write."""
    url = pg_url(pg_server, pg_server.schema())
    anyio.run(_runs, url)
    return url


READERS = [
    (["checkpoints", "books"], "ok", "0001-p3"),
    (["log", "books"], "ok", "rationale: done"),
    (["diff", "books", "0001-p3"], "ok", "clerk"),
    (["compare", "books", "ap"], "ok", "tests.fork_flow.Ledger"),
    (["result", "books"], "ok", '"A"'),
    (["result", "ap"], "paused", "paused ap: waiting for a tests.cli.Approve signal"),
    (["result", ORPHAN], "not_finished", ORPHAN),
    (["checkpoints", "nope"], "not_found", "no run 'nope'"),
    (["log", "nope"], "not_found", "no run 'nope'"),
    (["diff", "books", "0009-none"], "not_found", "0009-none"),
    (["compare", "books", "nope"], "not_found", "nope"),
    (["result", "nope"], "not_found", "no run 'nope'"),
    (["export", "nope", "--output", "unused.afh"], "not_found", "no run 'nope'"),
    (["prune", "--max-age", "soon"], "usage", "--max-age"),
]


@pytest.mark.parametrize(("args", "code", "says"), READERS, ids=lambda v: str(v))
def test_a_reader_answers_with_its_documented_exit_code(
    stored: str, args: list[str], code: str, says: str
) -> None:
    result = cli(*args, "--store", stored)
    assert result.exit_code == EXIT_CODES[code], result.output
    assert says in result.output.replace("\n", " ")


def test_export_then_replay_the_history_file(stored: str, tmp_path: Path) -> None:
    history = tmp_path / "books.afh"
    exported = cli("export", "books", "--output", str(history), "--store", stored)
    assert exported.exit_code == EXIT_CODES["ok"], exported.output
    # the workflow's class is found by the module its run recorded
    for args in (["--history", str(history)], ["books", "--store", stored]):
        replayed = cli("replay", *args)
        assert replayed.exit_code == EXIT_CODES["ok"], replayed.output
        assert "books: ok" in replayed.output


def test_signal_recover_and_cancel(fresh: str) -> None:
    def send(run_id: str, data: str = APPROVE) -> Result:
        args = ["signal", run_id, "tests.cli.Approve", "--json", data]
        return cli(*args, "--app", SIGNAL_APP, "--store", fresh)

    misfit = send("ap", '{"by": "ann", "level": "high"}')
    assert misfit.exit_code == EXIT_CODES["usage"], misfit.output
    assert send("nope").exit_code == EXIT_CODES["not_found"]
    sent = send("ap")
    assert sent.exit_code == EXIT_CODES["ok"], sent.output
    assert "sent tests.cli.Approve to ap" in sent.output

    # ap goes on with its signal, the orphan from its checkpoint; ap2 waits still
    recovered = cli("recover", "--app", LEDGER_APP, "--store", fresh, "--json")
    assert recovered.exit_code == EXIT_CODES["ok"], recovered.output
    results = {r["run_id"]: r["result"] for r in json.loads(recovered.stdout)["recovered"]}
    assert results == {"ap": "ann:2", ORPHAN: [4, 8]}
    assert cli("result", "ap", "--store", fresh).exit_code == EXIT_CODES["ok"]
    waiting = cli("recover", "ap2", "--app", SIGNAL_APP, "--store", fresh)
    assert waiting.exit_code == EXIT_CODES["paused"], waiting.output

    cancel = ["--app", SIGNAL_APP, "--store", fresh]
    assert cli("cancel", "nope", *cancel).exit_code == EXIT_CODES["not_found"]
    cancelled = cli("cancel", "ap2", "--reason", "not needed", *cancel)
    assert cancelled.exit_code == EXIT_CODES["ok"], cancelled.output
    result = cli("result", "ap2", "--store", fresh)
    assert result.exit_code == EXIT_CODES["run_failed"], result.output
    assert "not needed" in result.output
    again = cli("cancel", "ap", *cancel)  # it has completed: left as it is
    assert again.exit_code == EXIT_CODES["ok"], again.output
    assert cli("result", "ap", "--store", fresh).exit_code == EXIT_CODES["ok"]


def test_fork_then_prune(fresh: str) -> None:
    forked = cli("fork", "books", "0001-p3", "--app", FORK_APP, "--store", fresh, "--json")
    assert forked.exit_code == EXIT_CODES["ok"], forked.output
    fork_id = json.loads(forked.stdout)["run_id"]
    compared = cli("compare", "books", fork_id, "--store", fresh, "--json")
    assert compared.exit_code == EXIT_CODES["ok"], compared.output
    assert json.loads(compared.stdout)["b"]["parent"] == "books"

    kept = cli("prune", "--keep", "1", "--drop-phase-ends", "--store", fresh, "--json")
    assert kept.exit_code == EXIT_CODES["ok"], kept.output
    assert json.loads(kept.stdout)["snapshots_deleted"] > 0
    rows = json.loads(cli("checkpoints", "books", "--store", fresh, "--json").stdout)
    assert [r["trigger"] for r in rows] == ["completed"]
    gone = cli("prune", "--delete-completed", "--store", fresh, "--json")
    assert gone.exit_code == EXIT_CODES["ok"], gone.output
    assert json.loads(gone.stdout)["runs_deleted"] == 2  # books and its fork
    assert cli("validate", "--store", fresh).exit_code == EXIT_CODES["ok"]


def test_a_urls_parameters_reach_the_server_as_written(pg_server: PgServer) -> None:
    # libpq reads %20 in a URL's query as a space and + as a plus; the URL's options
    # (a read-only session here) join the store's own
    schema = pg_server.schema()
    role = f"af {schema}"
    pg_server.sql(f'CREATE ROLE "{role}" LOGIN SUPERUSER')
    anyio.run(_runs, pg_url(pg_server, schema))
    url = (
        f"postgresql://127.0.0.1:{pg_server.port}/postgres?user={role.replace(' ', '%20')}"
        f"&options=-c%20default_transaction_read_only%3Don&schema={schema}"
    )
    listed = cli("runs", "--store", url, "--json")
    assert listed.exit_code == EXIT_CODES["ok"], listed.output
    assert "books" in {r["run_id"] for r in json.loads(listed.stdout)}
    refused = cli("cancel", "ap2", "--app", SIGNAL_APP, "--store", url)
    assert refused.exit_code == EXIT_CODES["error"], refused.output
    assert "read-only transaction" in refused.output


def test_a_schema_holding_no_store_is_named_and_left_uncreated(pg_server: PgServer) -> None:
    schema = pg_server.schema()
    url = pg_url(pg_server, schema)
    commands = [
        ["runs"],
        ["validate"],
        ["log", "x"],
        ["cancel", "x", "--app", SIGNAL_APP],
        ["recover", "--app", LEDGER_APP],
    ]
    for args in commands:
        result = cli(*args, "--store", url)
        assert result.exit_code == EXIT_CODES["error"], result.output
        assert f"no actorflow store at {url}" in result.output.replace("\n", "")
    assert pg_server.sql(f"SELECT 1 FROM pg_namespace WHERE nspname = '{schema}'") == []
    # the first run makes it
    started = cli("start", "tests.cli.Essay", "--input", "2", "--app", SIGNAL_APP, "--store", url)
    assert started.exit_code == EXIT_CODES["ok"], started.output
    assert cli("runs", "--store", url).exit_code == EXIT_CODES["ok"]


def test_a_urls_password_is_never_printed_as_the_stores_name(stored: str) -> None:
    # the test server trusts local logins: any password is accepted, so it only must not show
    with_password = stored.replace("postgres@", "postgres:hunter2@")
    for args, says in (
        (["runs", "--store", with_password], "runs in postgresql://postgres@"),
        (["runs", "--status", "failed", "--store", with_password], "no runs in postgresql://"),
        (["schedules", "--store", with_password], "no schedules in postgresql://postgres@"),
    ):
        result = cli(*args)
        assert result.exit_code == EXIT_CODES["ok"], result.output
        assert says in result.output
        assert "hunter2" not in result.output


def test_a_urls_password_is_left_out_of_the_commands_suggested(fresh: str) -> None:
    # in the userinfo and as a parameter: both are libpq's; the hints name the store without
    with_password = fresh.replace("postgres@", "postgres:hunter2@") + "&password=swordfish"
    for args, code, says in (
        (["result", "ap"], "paused", f"recover ap --store '{fresh}'"),
        (["recover", "ap2", "--app", SIGNAL_APP], "paused", f"--store '{fresh}'"),
        (["runs"], "ok", "runs in postgresql://postgres@"),
    ):
        result = cli(*args, "--store", with_password)
        assert result.exit_code == EXIT_CODES[code], result.output
        assert says in result.output
        assert "hunter2" not in result.output
        assert "swordfish" not in result.output
