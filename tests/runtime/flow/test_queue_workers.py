"""Queued runs over three ``actorflow worker`` processes, on a file store and on S3.

Runs with priorities and dedup keys are submitted, then three worker
processes take them. Every run must run exactly once, the queue's cap must
hold across the processes (the side file's enter and exit lines, appended in
the order they happened, never show more runs inside at once), and runs
must enter in priority order, up to the runs started side by side.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import pytest

from actorflow import Runtime
from actorflow.storage import FileStore, RunStatus, SqliteStore
from tests.runtime.flow import queue_app
from tests.storage.factories_s3 import open_s3_store
from tests.storage.pg_server import open_pg_store, pg_url

if TYPE_CHECKING:
    from anyio.abc import Process

    from actorflow.storage import Store
    from tests.storage.s3_servers import S3Server

ROOT = Path(__file__).resolve().parents[3]
DEADLINE = 240.0
"""A bound on the whole test: it turns a hang into a failure, it times nothing."""
RUNS = {"file": 200, "s3": 60, "sqlite": 200, "postgres": 200}
"""Runs per store (fewer than a thousand: a shared two-core machine; S3 is slower still)."""


@pytest.fixture(
    params=["file", "s3", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def where(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str, Store, dict[str, str]]:
    """The kind of store, the workers' ``--store``, a store object of the test's, their env."""
    if request.param == "file":
        return "file", str(tmp_path / "store"), FileStore(tmp_path / "store"), {}
    if request.param == "sqlite":
        db = tmp_path / "store.db"
        return "sqlite", f"sqlite:///{db}", SqliteStore(db), {}
    if request.param == "postgres":
        pg = request.getfixturevalue("pg_server")
        schema = pg.schema()
        return "postgres", pg_url(pg, schema), open_pg_store(pg, schema), {}
    server: S3Server = request.getfixturevalue("seaweed_server")
    prefix = f"t-{uuid.uuid4().hex[:12]}"
    env = {
        "ACTORFLOW_S3_ENDPOINT": server.url,
        "AWS_ACCESS_KEY_ID": server.access_key,
        "AWS_SECRET_ACCESS_KEY": server.secret_key,
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    spec = f"s3://{server.bucket}/{prefix}"
    return "s3", spec, open_s3_store(server, prefix=prefix), env


async def _start_worker(store: str, env: dict[str, str]) -> Process:
    command = [sys.executable, "-m", "actorflow", "worker", "--app"]
    command += [f"{queue_app.__name__}:runtime", "--store", store, "--poll", "0.05"]
    return await anyio.open_process(
        command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


async def _stop(*workers: Process) -> None:
    with anyio.CancelScope(shield=True):
        for w in workers:
            if w.returncode is None:
                w.send_signal(signal.SIGTERM)
        with anyio.move_on_after(30):
            for w in workers:
                await w.wait()
        for w in workers:
            if w.returncode is None:
                w.kill()
                await w.wait()


@pytest.mark.slow
async def test_queued_runs_over_three_worker_processes_run_once_in_order_within_the_cap(
    tmp_path: Path, where: tuple[str, str, Store, dict[str, str]]
) -> None:
    kind, spec, store, store_env = where
    side = tmp_path / "side"
    env = {
        **os.environ,
        **store_env,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        "ACTORFLOW_TEST_SIDE": str(side),
        "ACTORFLOW_LOG_LEVEL": "warning",
    }
    priorities: dict[str, int] = {}
    async with Runtime(store=store, queues=queue_app.QUEUES) as client:
        for n in range(RUNS[kind]):
            priority = n % 5
            key = f"k{n - n % 4 if n % 4 == 3 else n}"  # every fourth repeats a queued key
            run_id = await client.submit(
                queue_app.Logged, priority, queue="reports", priority=priority, dedup_key=key
            )
            if n % 4 == 3:
                assert run_id in priorities
            else:
                priorities[run_id] = priority
    workers: list[Process] = []
    try:
        with anyio.fail_after(DEADLINE):
            workers += [await _start_worker(spec, env) for _ in range(3)]
            for run_id in priorities:
                while (await store.read_run(run_id)).status is not RunStatus.COMPLETED:  # noqa: ASYNC110
                    await anyio.sleep(0.05)  # other processes drive it
    finally:
        await _stop(*workers)
    lines = [line.split() for line in side.read_text().splitlines()]
    entered = [(run_id, int(p)) for what, run_id, p, _ in lines if what == "enter"]
    assert sorted(r for r, _ in entered) == sorted(priorities)  # each exactly once
    inside, most = 0, 0
    for what, *_ in lines:
        inside += 1 if what == "enter" else -1
        most = max(most, inside)
    assert most <= queue_app.CAP
    order = [p for _, p in entered]
    for i, p in enumerate(order):
        assert all(later <= p for later in order[i + queue_app.CAP :]), (i, order)
    await store.aclose()
