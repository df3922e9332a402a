"""A schedule over a simulated hour, worker processes killed twice: each tick starts one run.

Two ``actorflow worker`` processes share a store (file, or S3) and a clock the test
moves a minute at a time; at two ticks one worker is killed with SIGKILL
right as the clock reaches the tick (while it may be creating the tick's
run, or driving it) and a new one started. Each tick of the hour must have
exactly one run, every one completed, and no other run may exist.
"""

from __future__ import annotations

import datetime
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
from actorflow.errors import RunNotFoundError
from actorflow.runtime.workflow._schedules import tick_run_id
from actorflow.storage import FileStore, RunStatus, SqliteStore
from actorflow.testing import FakeClock
from tests.runtime.flow import schedule_app
from tests.storage.factories_s3 import open_s3_store
from tests.storage.pg_server import open_pg_store, pg_url

if TYPE_CHECKING:
    from anyio.abc import Process

    from actorflow.storage import Store
    from tests.storage.s3_servers import S3Server

ROOT = Path(__file__).resolve().parents[3]
START = 1_800_000_000.0
DEADLINE = 120.0
"""A bound on the whole test: it turns a hang into a failure, it times nothing."""
KILL_AT = (20, 40)
"""The minutes (both ticks) at which a worker is killed."""


async def _start_worker(store: str, env: dict[str, str]) -> Process:
    command = [sys.executable, "-m", "actorflow", "worker", "--app"]
    command += [f"{schedule_app.__name__}:runtime", "--store", store, "--poll", "0.05"]
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


@pytest.fixture(
    params=["file", "s3", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def where(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, Store, dict[str, str]]:
    """The workers' ``--store``, a store object of the test's on it, and their environment."""
    if request.param == "file":
        return str(tmp_path / "store"), FileStore(tmp_path / "store"), {}
    if request.param == "sqlite":
        db = tmp_path / "store.db"
        return f"sqlite:///{db}", SqliteStore(db), {}
    if request.param == "postgres":
        pg = request.getfixturevalue("pg_server")
        schema = pg.schema()
        return pg_url(pg, schema), open_pg_store(pg, schema), {}
    server: S3Server = request.getfixturevalue("seaweed_server")
    prefix = f"t-{uuid.uuid4().hex[:12]}"
    env = {
        "ACTORFLOW_S3_ENDPOINT": server.url,
        "AWS_ACCESS_KEY_ID": server.access_key,
        "AWS_SECRET_ACCESS_KEY": server.secret_key,
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    return f"s3://{server.bucket}/{prefix}", open_s3_store(server, prefix=prefix), env


async def _completed(store: Store, run_id: str) -> None:
    while True:
        try:
            if (await store.read_run(run_id)).status is RunStatus.COMPLETED:
                return
        except RunNotFoundError:
            pass  # not created yet
        await anyio.sleep(0.02)  # other processes create and drive it


@pytest.mark.slow
async def test_a_schedule_over_an_hour_with_workers_killed_starts_each_tick_once(
    tmp_path: Path, where: tuple[str, Store, dict[str, str]]
) -> None:
    path, store, store_env = where
    clock_file, side = str(tmp_path / "clock"), tmp_path / "side"
    schedule_app.set_time(clock_file, START)
    async with Runtime(store=store, clock=FakeClock(START)) as client:
        await client.schedule(
            schedule_app.Stamped,
            1,
            schedule_id="five",
            every=datetime.timedelta(minutes=5),
            catch_up="all",
        )
    env = {
        **os.environ,
        **store_env,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        "ACTORFLOW_TEST_CLOCK": clock_file,
        "ACTORFLOW_TEST_SIDE": str(side),
        "ACTORFLOW_LOG_LEVEL": "warning",
    }
    expected = [tick_run_id("five", START)]
    workers: list[Process] = []
    try:
        with anyio.fail_after(DEADLINE):
            workers += [await _start_worker(path, env) for _ in range(2)]
            await _completed(store, expected[0])
            for minute in range(1, 61):
                schedule_app.set_time(clock_file, START + 60 * minute)
                if minute % 5 == 0:
                    expected.append(tick_run_id("five", START + 60 * minute))
                if minute in KILL_AT:
                    victim = workers.pop(0)
                    victim.send_signal(signal.SIGKILL)
                    await victim.wait()
                    workers.append(await _start_worker(path, env))
                if minute % 5 == 0:
                    await _completed(store, expected[-1])
            for run_id in expected:
                await _completed(store, run_id)
    finally:
        await _stop(*workers)
    runs = await store.list_runs()
    assert sorted(m.run_id for m in runs) == sorted(expected)  # one run per tick, no other
    assert all(m.schedule == "five" for m in runs)
    stamped = {line.split()[0] for line in side.read_text().splitlines()}
    assert stamped == set(expected)
    await store.aclose()
