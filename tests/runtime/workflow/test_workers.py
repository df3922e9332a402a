"""Worker processes that heal each other: ``actorflow worker`` on one file store, and on S3.

Three real worker processes adopt submitted runs; one is killed with
SIGKILL while it owns runs. The others must finish its runs with the
results of uninterrupted runs, no step that had a log record may run again
(the side file says what ran, and where), and no run may ever have two
live owners: each run's executions come from one owner at a time, in the
order of its log's ``adopted`` records, never back to an earlier one. On S3
the killed worker's runs are free once its one worker lease has run out; a
live worker stalled past its lease on this loaded machine may lose a run the
same way, and then the fencing epoch, not the clock, keeps it from writing.
"""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import msgspec
import pytest

from actorflow import Runtime
from actorflow.runtime.workflow._adoption import ADOPTED, Adopted
from actorflow.storage import EventRecord, FileStore, RunStatus, SqliteStore, StepRecord
from tests.runtime.workflow import worker_app
from tests.storage.factories_s3 import open_s3_store
from tests.storage.pg_server import open_pg_store, pg_url

if TYPE_CHECKING:
    from anyio.abc import Process

    from actorflow.storage import Store
    from tests.storage.s3_servers import S3Server

ROOT = Path(__file__).resolve().parents[3]
RUNS = 6
DEADLINE = 90.0
"""A bound on the whole test: it turns a hang into a failure, it times nothing."""


def _lines(side: Path) -> list[tuple[str, str, int]]:
    if not side.exists():
        return []
    out = []
    for line in side.read_text().splitlines():
        run_id, step_id, pid = line.split()
        out.append((run_id, step_id, int(pid)))
    return out


async def _start_worker(store: str, env: dict[str, str]) -> Process:
    command = worker_app.worker_command(store, poll=0.05)
    return await anyio.open_process(
        command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


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


@pytest.mark.slow
async def test_workers_finish_a_killed_workers_runs_exactly_once(
    tmp_path: Path, where: tuple[str, Store, dict[str, str]]
) -> None:
    store_path, store, store_env = where
    side, gate = tmp_path / "side", tmp_path / "gate"
    env = {
        **os.environ,
        **store_env,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        "ACTORFLOW_TEST_SIDE": str(side),
        "ACTORFLOW_TEST_GATE": str(gate),
        "ACTORFLOW_LOG_LEVEL": "warning",
    }
    seeds = {}
    async with Runtime(store=store) as client:
        for seed in range(RUNS):
            seeds[await client.submit(worker_app.WorkerChain, seed * 1000)] = seed * 1000
    workers: list[Process] = []
    try:
        with anyio.fail_after(DEADLINE):
            for _ in range(3):
                workers.append(await _start_worker(store_path, env))
            # every run has run its first tick, and waits at its second for the gate
            # the workers are other processes: nothing to wait on but the side file
            while len({r for r, s, _ in _lines(side)}) < RUNS or any(  # noqa: ASYNC110
                len([line for line in _lines(side) if line[0] == r]) < 2 for r in seeds
            ):
                await anyio.sleep(0.02)
            first_owner: dict[str, int] = {}
            for run_id, _, pid in _lines(side):
                first_owner.setdefault(run_id, pid)
            owned = collections.Counter(first_owner.values())
            victim_pid = owned.most_common(1)[0][0]
            victim = next(w for w in workers if w.pid == victim_pid)
            victim.send_signal(signal.SIGKILL)
            await victim.wait()
            # what the log held when the owner died: none of it may run again
            recorded = {
                (run_id, r.step_id)
                for run_id in seeds
                for r in await store.read_log(run_id)
                if isinstance(r, StepRecord) and r.kind == "ask"
            }
            assert len(recorded) >= RUNS  # each run's first tick, at least
            gate.touch()
            while True:
                manifests = [await store.read_run(r) for r in seeds]
                if all(m.status is RunStatus.COMPLETED for m in manifests):
                    break
                await anyio.sleep(0.02)
    finally:
        await worker_app.stop_workers(*workers)

    for run_id, seed in seeds.items():
        manifest = await store.read_run(run_id)
        assert manifest.result is not None
        assert msgspec.msgpack.decode(manifest.result) == worker_app.expected(seed)

    lines = _lines(side)
    ran = collections.Counter((run_id, step_id) for run_id, step_id, _ in lines)
    for key in recorded:
        assert ran[key] == 1, f"{key} had a log record when its owner died, and ran again"

    victims_runs = {r for r, pid in first_owner.items() if pid == victim_pid}
    assert victims_runs
    for run_id in seeds:
        adopted = [
            msgspec.msgpack.decode(r.data, type=Adopted)
            for r in await store.read_log(run_id)
            if isinstance(r, EventRecord) and r.kind == ADOPTED and r.data is not None
        ]
        # each owner in turn, as its adoption record says: the first one, then whoever
        # took the run over (on S3 also from a live worker stalled past its lease: fenced)
        owners = [int(a.owner.split(":")[1]) for a in adopted]
        pids = [p for r, _, p in lines if r == run_id]
        # one owner at a time: a run's executions never go back to an earlier owner
        turns = [p for i, p in enumerate(pids) if i == 0 or pids[i - 1] != p]
        assert turns == [o for o in owners if o in pids], (run_id, pids, owners)
        assert len(set(owners)) == len(owners), (run_id, owners)
        if run_id in victims_runs:
            assert owners[0] == victim_pid, (run_id, owners)
            assert len(owners) >= 2, (run_id, owners)
        else:
            assert owners[0] == pids[0], (run_id, owners)
        # a step ran again only under a later owner, never twice under one
        for step_id in {s for r, s, _ in lines if r == run_id}:
            by = [p for r, s, p in lines if (r, s) == (run_id, step_id)]
            assert len(set(by)) == len(by), (run_id, step_id, by)
    await store.aclose()
