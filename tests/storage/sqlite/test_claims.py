"""SqliteStore's claims (flocks beside the file, fenced epochs), and its capabilities."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import msgspec
import pytest

from actorflow.errors import LeaseLostError, RunLockedError
from actorflow.storage import (
    ClaimInspector,
    EventRecord,
    FileStore,
    InboxChecker,
    QueueSlots,
    RetentionPolicy,
    RunIndex,
    RunManifest,
    RunStatus,
    ScheduleStore,
    SealChecker,
    SharedLimits,
    Snapshot,
    SqliteStore,
    Store,
    SupportsBlobSync,
    SupportsEventStream,
    SupportsInbox,
    SupportsInboxWatch,
    SupportsSnapshotSync,
    UnreadableLister,
)

if TYPE_CHECKING:
    from pathlib import Path


def _manifest(owner: str | None = None) -> RunManifest:
    return RunManifest(run_id="r1", workflow="w", input=b"", input_hash="h", owner=owner)


async def test_an_owner_whose_run_was_taken_is_refused_every_write(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    async with SqliteStore(path) as first, SqliteStore(path) as second:
        await first.create_run(_manifest())
        old = await first.claim("r1", "first")
        await first.append("r1", [EventRecord(kind="x")])
        # the first owner's flock is lost without its process dying (its lock file
        # removed by hand): the second takes the run under a newer epoch
        os.unlink(f"{path}-locks/runs/r1")
        new = await second.claim("r1", "second")
        assert new.epoch == old.epoch + 1
        with pytest.raises(LeaseLostError, match="taken over"):
            await first.append("r1", [EventRecord(kind="stale")])
        with pytest.raises(LeaseLostError):
            await first.update_run(
                "r1", lambda m: msgspec.structs.replace(m, status=RunStatus.FAILED)
            )
        snapshot = Snapshot(run_id="r1", snapshot_id="s1", position=1, created=1.0, trigger="t")
        with pytest.raises(LeaseLostError):
            await first.write_snapshot(snapshot)
        assert await second.append("r1", [EventRecord(kind="y")]) == 2
        assert [r.kind for r in await second.read_log("r1")] == ["x", "y"]  # type: ignore[union-attr]
        assert (await second.read_run("r1")).status is RunStatus.RUNNING
        assert await second.list_snapshots("r1") == []


async def test_a_run_created_for_an_owner_is_claimed_for_it_at_once(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    async with SqliteStore(path) as creator, SqliteStore(path) as other:
        await creator.create_run(_manifest(owner="me"))
        assert await other.is_owned("r1")  # nobody can adopt it before its owner's claim
        with pytest.raises(RunLockedError, match="me"):
            await other.claim("r1", "other")
        lease = await creator.claim("r1", "me")
        assert lease.epoch == 1
        await creator.release(lease)
        assert not await other.is_owned("r1")


async def test_a_closed_store_opens_the_file_again_on_its_next_call(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "store.db")
    await store.create_run(_manifest())
    await store.aclose()
    await store.aclose()
    assert (await store.read_run("r1")).run_id == "r1"
    await store.aclose()


def test_it_offers_every_capability_the_file_store_does(tmp_path: Path) -> None:
    file_store = FileStore(tmp_path / "folder")
    store = SqliteStore(tmp_path / "store.db")
    capabilities = [
        Store,
        UnreadableLister,
        ClaimInspector,
        SealChecker,
        RunIndex,
        InboxChecker,
        QueueSlots,
        ScheduleStore,
        SharedLimits,
        SupportsInbox,
        SupportsInboxWatch,
        SupportsEventStream,
        SupportsSnapshotSync,
        SupportsBlobSync,
    ]
    assert all(isinstance(file_store, c) for c in capabilities)
    assert [c.__name__ for c in capabilities if not isinstance(store, c)] == []


async def test_prune_removes_the_lock_files_of_finished_runs_nobody_holds(tmp_path: Path) -> None:
    async with SqliteStore(tmp_path / "store.db") as store:
        for run_id in ("done", "live", "waiting"):
            await store.create_run(msgspec.structs.replace(_manifest(), run_id=run_id))
        for run_id in ("done", "waiting"):
            await store.release(await store.claim(run_id, "me"))
        await store.update_run(
            "done", lambda m: msgspec.structs.replace(m, status=RunStatus.COMPLETED)
        )
        held = await store.claim("live", "me")
        await store.update_run(
            "live", lambda m: msgspec.structs.replace(m, status=RunStatus.COMPLETED)
        )
        await store.prune(RetentionPolicy(keep_last=None))
        # a finished run nobody holds loses its file; a held one and an unfinished one keep theirs
        assert sorted(os.listdir(f"{tmp_path / 'store.db'}-locks/runs")) == ["live", "waiting"]
        async with SqliteStore(tmp_path / "store.db") as other:
            with pytest.raises(RunLockedError):
                await other.claim("live", "other")
        await store.release(held)
        again = await store.claim("done", "me")  # its file is made anew
        assert again.epoch == 2
