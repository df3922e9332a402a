"""``actorflow runs`` tells a live run from a dead one, and shows where each stands.

A real child process holds a run inside its ``evaluate`` phase (see
``progress_child``): while it lives, after SIGKILL, and after SIGINT, ``runs``
(table and ``--json``) shows the phase, the last activity, the owner
(host:pid) and whether that owner is alive. None of it costs the run a sync.
"""

from __future__ import annotations

import collections
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from typing import TYPE_CHECKING, Any

import anyio
import pytest
from typer.testing import CliRunner

from actorflow import Runtime
from actorflow.cli import app
from actorflow.runtime.reading import run_progress
from actorflow.storage import FileStore, OSFileSystem
from tests import forkserver
from tests.cli import progress_child
from tests.cli.progress_child import CONFIG, GATHERED, Gates, Review
from tests.runtime.workflow.crash_parent import ROOT, child_env

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

CHILD_DEADLINE = 60.0
"""Longest the child may take to hold its run, and to exit once signalled, in seconds."""

runner = CliRunner()


def runs_json(store: Path) -> dict[str, Any]:
    result = runner.invoke(app, ["runs", "--store", str(store), "--json"])
    assert result.exit_code == 0, result.output
    [row] = json.loads(result.stdout)
    return dict(row)


def runs_table(store: Path) -> str:
    result = runner.invoke(app, ["runs", "--store", str(store)], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    return result.stdout


def newest_checkpoint(store: Path, run_id: str) -> float:
    result = runner.invoke(app, ["checkpoints", run_id, "--store", str(store), "--json"])
    assert result.exit_code == 0, result.output
    return max(float(c["created"]) for c in json.loads(result.stdout))


class Held:
    """A child process whose run holds inside ``evaluate``."""

    def __init__(self, store: Path, backend: str) -> None:
        self.proc = forkserver.popen(
            [sys.executable, "-m", "tests.cli.progress_child", str(store), "held", backend],
            cwd=ROOT,
            env=child_env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
        )
        self.owner = f"{socket.gethostname()}:{self.proc.pid}"

    def wait_held(self) -> None:
        assert self.proc.stdout is not None
        seen = b""
        deadline = time.monotonic() + CHILD_DEADLINE
        while b"HELD" not in seen:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self.proc.stdout], [], [], max(left, 0))
            assert ready, f"the child did not hold its run in {CHILD_DEADLINE} s: {seen!r}"
            chunk = os.read(self.proc.stdout.fileno(), 4096)
            assert chunk, f"the child exited first ({self.proc.wait()}): {seen!r}"
            seen += chunk

    def signal(self, signum: int) -> None:
        self.proc.send_signal(signum)
        self.proc.wait(timeout=CHILD_DEADLINE)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=CHILD_DEADLINE)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


@pytest.fixture(params=["asyncio", "trio"])
def held(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Held]:
    child = Held(tmp_path / "store", request.param)
    try:
        child.wait_held()
        yield child
    finally:
        child.close()


def check_progress(row: dict[str, Any], store: Path, held: Held, *, status: str) -> None:
    assert row["status"] == status
    # no checkpoint names `evaluate` (its start coalesced with gather's end): the log does
    assert row["phase"] == "evaluate"
    assert row["snapshots"] == GATHERED + 1  # and the phase's end
    # the steps logged after the newest checkpoint are the last activity
    assert row["activity"] > newest_checkpoint(store, "held") > row["started"]
    assert row["owner"].startswith(held.owner + ":")
    assert row["lease_expires"] is None  # a flock: it ends with its process


class TestRunsShowsProgressAndOwners:
    def test_a_live_run_then_the_same_run_killed(self, held: Held, tmp_path: Path) -> None:
        store = tmp_path / "store"
        live = runs_json(store)
        check_progress(live, store, held, status="running")
        assert live["alive"] is True
        assert f"{held.owner} alive" in runs_table(store)
        assert "evaluate" in runs_table(store)

        held.signal(signal.SIGKILL)
        dead = runs_json(store)
        check_progress(dead, store, held, status="running")
        assert dead["alive"] is False
        assert dead["activity"] == live["activity"]
        table = runs_table(store)
        assert f"{held.owner} gone" in table
        assert "running" in table

    def test_an_interrupted_run_names_its_last_owner(self, held: Held, tmp_path: Path) -> None:
        store = tmp_path / "store"
        held.signal(signal.SIGINT)
        row = runs_json(store)
        check_progress(row, store, held, status="interrupted")
        assert row["alive"] is False
        assert f"{held.owner} gone" in runs_table(store)


class SyncCounter(OSFileSystem):
    """The real file system, counting syncs (fsync, fdatasync, folder fsync) and renames."""

    def __init__(self) -> None:
        self.syncs = 0
        self.renamed: collections.Counter[str] = collections.Counter()

    def fsync(self, handle: int) -> None:
        self.syncs += 1
        super().fsync(handle)

    def sync_data(self, handle: int) -> None:
        self.syncs += 1
        super().sync_data(handle)

    def fsync_dir(self, path: str) -> None:
        self.syncs += 1
        super().fsync_dir(path)

    def rename(self, src: str, dst: str) -> None:
        self.renamed[os.path.basename(dst)] += 1
        super().rename(src, dst)

    def link(self, src: str, dst: str) -> bool:
        self.renamed[os.path.basename(dst)] += 1
        return super().link(src, dst)


async def test_progress_costs_the_run_no_sync_and_reading_it_syncs_nothing(
    tmp_path: Path,
) -> None:
    progress_child.GATES = gates = Gates()  # this event loop's
    fs = SyncCounter()
    store = FileStore(tmp_path / "store", fs=fs)
    reader = FileStore(tmp_path / "store", fs=fs)  # as `actorflow runs` opens it
    try:
        async with Runtime(store=store, config=CONFIG) as runtime:
            handle = await runtime.start(Review, None, run_id="held")
            async with anyio.create_task_group() as tg:

                async def watch() -> None:
                    async for event in handle.events(emits=False):
                        if event.name == "checkpoint_saved":
                            gates.checkpoint_saved(event["trigger"])

                tg.start_soon(watch)
                with anyio.fail_after(CHILD_DEADLINE):
                    await gates.held.wait()
                # 8 checkpoints and two phases, and the manifest was written once: at creation
                assert fs.renamed["manifest"] == 1
                syncs = fs.syncs
                manifest = await reader.read_run("held")
                snapshots = await reader.list_snapshots("held")
                progress = await run_progress(reader, manifest, snapshots)
                assert progress.phase == "evaluate"
                assert progress.activity > max(s.created for s in snapshots)
                assert progress.claim.alive is True
                assert progress.claim.owner == runtime.owner
                assert fs.syncs == syncs  # reading it synced nothing
                gates.release.set()
                await handle.result()
                tg.cancel_scope.cancel()
    finally:
        await reader.aclose()
        await store.aclose()
