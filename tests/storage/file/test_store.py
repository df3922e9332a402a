"""FileStore specifics: layout, flock ownership across instances, segments, reopening."""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING

import msgspec
import pytest

import actorflow.storage
from actorflow.errors import LogPrunedError, RunLockedError, StorageError
from actorflow.storage import Codec, EventRecord, FileStore, RunManifest, RunStatus, Snapshot

if TYPE_CHECKING:
    from pathlib import Path


def manifest() -> RunManifest:
    return RunManifest(run_id="r1", workflow="w", input=b"", input_hash="")


def rec(i: int) -> EventRecord:
    return EventRecord(kind="e", data=b"%d" % i * 20)


def test_public_names_are_exported() -> None:
    for name in actorflow.storage.__all__:
        assert getattr(actorflow.storage, name) is not None
    assert "FileStore" in actorflow.storage.__all__
    assert "LogWriter" in actorflow.storage.__all__


async def test_data_survives_reopening_the_folder(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    await store.create_run(manifest())
    await store.append("r1", [rec(0), rec(1)])
    await store.aclose()
    again = FileStore(tmp_path)
    assert await again.read_log("r1") == [rec(0), rec(1)]
    assert await again.append("r1", [rec(2)]) == 3


async def test_flock_excludes_a_second_store_until_the_first_closes(tmp_path: Path) -> None:
    first, second = FileStore(tmp_path), FileStore(tmp_path)
    await first.create_run(manifest())
    lease = await first.claim("r1", "worker-a")
    with pytest.raises(RunLockedError, match="owned by worker-a"):
        await second.claim("r1", "worker-b")
    assert await second.is_owned("r1")
    await first.aclose()
    assert not await second.is_owned("r1")
    taken = await second.claim("r1", "worker-b")
    assert taken.epoch == lease.epoch + 1
    await second.aclose()


async def test_log_rolls_over_segments_and_prunes_whole_ones(tmp_path: Path) -> None:
    store = FileStore(tmp_path, segment_bytes=400)
    await store.create_run(manifest())
    for i in range(20):
        await store.append("r1", [rec(i)])
    segments = sorted((tmp_path / "runs/r1/log").iterdir())
    assert len(segments) > 3
    dropped = await store.truncate_log_before("r1", 10)
    assert 0 < dropped <= 10
    assert await store.read_log("r1", 10) == [rec(i) for i in range(10, 20)]
    with pytest.raises(LogPrunedError, match="were pruned") as info:
        await store.read_log("r1", 0)
    assert (info.value.first, info.value.start) == (dropped, 0)
    assert await store.log_length("r1") == 20
    await store.aclose()


async def test_snapshot_file_names_read_as_position_time_phase_id(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    await store.create_run(manifest())
    snap = Snapshot(
        run_id="r1", snapshot_id="ck-7", position=42, created=0.0, trigger="t", phase="draft#1"
    )
    info = await store.write_snapshot(snap)
    (path,) = (tmp_path / "runs/r1/snapshots").iterdir()
    name = f"000000042_19700101T000000Z_draft%231_ck-7~t~0.0~{info.stored_size}~{info.raw_size}"
    assert path.name == f"{name}~unsynced.ckpt"  # until it is synced
    await store.sync_snapshots("r1", ["ck-7"])
    (path,) = (tmp_path / "runs/r1/snapshots").iterdir()
    assert path.name == f"{name}.ckpt"


def snap(sid: str, position: int, **fields: object) -> Snapshot:
    values: dict[str, object] = {"created": 1.5, "trigger": "phase_end", "phase": "plan"}
    values.update(fields)
    return Snapshot(run_id="r1", snapshot_id=sid, position=position, **values)  # type: ignore[arg-type]


async def test_a_snapshot_costs_one_file_and_no_manifest_rewrite(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    await store.create_run(manifest())
    before = (tmp_path / "runs/r1/manifest").stat().st_mtime_ns, (await store.read_run("r1"))
    infos = [await store.write_snapshot(snap(f"s{i}", i)) for i in range(3)]
    assert ((tmp_path / "runs/r1/manifest").stat().st_mtime_ns, await store.read_run("r1")) == (
        before
    )
    assert await store.list_snapshots("r1") == infos
    # a new store (a new process) lists them from the folder alone
    assert await FileStore(tmp_path).list_snapshots("r1") == infos
    assert await store.delete_snapshot("r1", "s1") == infos[1].stored_size
    assert await FileStore(tmp_path).list_snapshots("r1") == [infos[0], infos[2]]


@pytest.mark.parametrize(
    ("phase", "trigger"),
    [
        (None, "steps"),
        ("a_b~c", "manual:deploy ~ v2_final"),
        ("résumé/#1 %41", "manual:100% sure"),
        ("x" * 250, "phase_end"),  # too long for a name: listed by the manifest instead
        ("", "manual"),  # an empty phase reads like no phase in a name: manifest too
    ],
)
async def test_any_phase_and_trigger_list_back_exactly(
    tmp_path: Path, phase: str | None, trigger: str
) -> None:
    store = FileStore(tmp_path)
    await store.create_run(manifest())
    s = snap("ck_1.a", 7, phase=phase, trigger=trigger, created=1769335300.123456)
    info = await store.write_snapshot(s)
    assert await FileStore(tmp_path).list_snapshots("r1") == [info]
    assert await store.read_snapshot("r1", "ck_1.a") == s
    listed_in_manifest = bool((await store.read_run("r1")).snapshots)
    assert listed_in_manifest == (phase is not None and (phase == "" or len(phase) > 200))
    assert await store.delete_snapshot("r1", "ck_1.a") > 0
    assert await store.list_snapshots("r1") == []
    assert [p.name for p in (tmp_path / "runs/r1/snapshots").iterdir()] == []


async def test_an_id_taken_by_an_older_listed_snapshot_is_not_written_again(
    tmp_path: Path,
) -> None:
    store = FileStore(tmp_path)
    await store.create_run(manifest())
    old = await store.write_snapshot(snap("s", 1, phase="x" * 250))  # listed by the manifest
    with pytest.raises(StorageError, match="different checkpoint"):
        await store.write_snapshot(snap("s", 2))  # would list itself
    assert await store.list_snapshots("r1") == [old]
    assert len(list((tmp_path / "runs/r1/snapshots").iterdir())) == 1


class ThreadNoting(Codec):
    """A codec that notes which thread sealed each snapshot."""

    threads: list[int]

    def dump_snapshot(self, snapshot: Snapshot) -> tuple[bytes, int]:
        self.threads.append(threading.get_ident())
        return super().dump_snapshot(snapshot)

    def seal_blob(self, data: bytes, *, run_id: str, address: str) -> bytes:
        self.threads.append(threading.get_ident())
        return super().seal_blob(data, run_id=run_id, address=address)


async def test_snapshots_are_sealed_off_the_event_loop_thread(tmp_path: Path) -> None:
    # Compressing a large state takes milliseconds: in the writing worker
    # thread the loop runs on meanwhile. A run's final snapshot too, whose
    # manifest update is written at the same time in another thread.
    codec = ThreadNoting()
    codec.threads = []
    store = FileStore(tmp_path, codec=codec)
    await store.create_run(manifest())
    await store.write_snapshot(snap("a", 1))
    await store.write_snapshot(snap("b", 2, phase="x" * 250))  # listed by the manifest
    done = msgspec.structs.replace
    final = await store.write_snapshot(
        snap("c", 3, trigger="completed"), update=lambda m: done(m, status=RunStatus.COMPLETED)
    )
    assert threading.get_ident() not in codec.threads
    assert len(codec.threads) == 3
    assert [s.snapshot_id for s in await store.list_snapshots("r1")] == ["a", "b", "c"]
    assert (await store.read_snapshot("r1", "b")).position == 2
    assert final.stored_size == (await store.list_snapshots("r1"))[-1].stored_size > 0
    assert (await store.read_run("r1")).status == RunStatus.COMPLETED


async def test_a_final_snapshot_too_long_to_name_itself_is_listed_with_its_update(
    tmp_path: Path,
) -> None:
    store = FileStore(tmp_path)
    await store.create_run(manifest())
    info = await store.write_snapshot(
        snap("z", 5, phase="y" * 250, trigger="completed"),
        update=lambda m: msgspec.structs.replace(m, status=RunStatus.COMPLETED),
    )
    run = await store.read_run("r1")
    assert run.status == RunStatus.COMPLETED
    assert [s.snapshot_id for s in run.snapshots] == ["z"]  # the manifest lists it
    assert await store.list_snapshots("r1") == [info]


async def test_state_blobs_are_sealed_off_the_event_loop_thread_and_once(
    tmp_path: Path,
) -> None:
    codec = ThreadNoting()
    codec.threads = []
    store = FileStore(tmp_path, codec=codec)
    await store.create_run(manifest())
    state = b"tasks " * 10_000
    ref = await store.put_blob("r1", state)
    assert await store.put_blob("r1", state) == ref  # stored already: not sealed again
    assert len(codec.threads) == 1
    assert threading.get_ident() not in codec.threads
    assert await store.get_blob("r1", ref) == state


class ReadLog(actorflow.storage.OSFileSystem):
    """The real file system, noting every file read whole."""

    def __init__(self) -> None:
        self.reads: list[str] = []

    def read(self, path: str) -> bytes:
        self.reads.append(os.path.basename(path))
        return super().read(path)


async def test_writing_a_new_snapshot_reads_no_manifest(tmp_path: Path) -> None:
    # Only a file named the older way ("..._<id>.ckpt") can make the manifest
    # worth reading; without one, a new id's write reads nothing at all.
    fs = ReadLog()
    store = FileStore(tmp_path, fs=fs)
    await store.create_run(manifest())
    await store.write_snapshot(snap("a", 1))
    fs.reads.clear()
    await store.write_snapshot(snap("b", 2))
    assert fs.reads == []
    await store.write_snapshot(snap("old", 3, phase="x" * 250))  # the manifest's way
    fs.reads.clear()
    await store.write_snapshot(snap("c", 4))
    assert fs.reads == []  # "old" is not "c": its name does not send us to the manifest
    with pytest.raises(StorageError, match="different checkpoint"):
        await store.write_snapshot(snap("old", 5))
    assert "manifest" in " ".join(fs.reads)


async def test_snapshots_listed_by_an_older_manifest_still_list_read_and_delete(
    tmp_path: Path,
) -> None:
    # A store written before snapshot names listed themselves: the manifest lists them.
    store = FileStore(tmp_path)
    await store.create_run(manifest())
    old = await store.write_snapshot(snap("old", 1, phase="x" * 250))  # the manifest's way
    new = await store.write_snapshot(snap("new", 2))
    assert await store.list_snapshots("r1") == [old, new]
    assert (await store.read_snapshot("r1", "old")).position == 1
    assert await store.delete_snapshot("r1", "old") > 0
    assert await store.list_snapshots("r1") == [new]
    assert (await store.read_run("r1")).snapshots[0].status == "deleted"


async def test_stray_files_in_the_snapshots_folder_are_not_snapshots(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    await store.create_run(manifest())
    info = await store.write_snapshot(snap("s", 1))
    folder = tmp_path / "runs/r1/snapshots"
    for stray in (
        "notes.txt",
        ".tmp-0123",
        "1_2_3_4~a~b~c~d.ckpt",
        "x~y.ckpt",
        "a_b_c_../x~t~1~2~3.ckpt",
    ):
        if "/" not in stray:
            (folder / stray).write_bytes(b"junk")
    assert await store.list_snapshots("r1") == [info]


async def test_an_unwritable_folder_is_a_storage_error_naming_the_operation(
    tmp_path: Path,
) -> None:
    (tmp_path / "file").write_text("not a folder")
    store = FileStore(tmp_path / "file" / "store")
    with pytest.raises(StorageError, match="create run failed"):
        await store.create_run(manifest())


async def test_a_new_run_is_claimed_for_the_owner_its_manifest_names(tmp_path: Path) -> None:
    # between create_run and its owner's claim, no other process may take it for an orphan
    store, other = FileStore(tmp_path), FileStore(tmp_path)
    owned = RunManifest(run_id="r1", workflow="w", input=b"", input_hash="", owner="me")
    await store.create_run(owned)
    assert await other.is_owned("r1")
    with pytest.raises(RunLockedError):
        await other.claim("r1", "thief")
    lease = await store.claim("r1", "me")
    assert (lease.owner, lease.epoch) == ("me", 1)
    await store.release(lease)
    assert not await other.is_owned("r1")
    # without an owner in the manifest nothing is claimed
    await store.create_run(RunManifest(run_id="r2", workflow="w", input=b"", input_hash=""))
    assert not await other.is_owned("r2")
    await store.aclose()
    await other.aclose()


async def test_a_run_claimed_at_creation_is_let_go_when_the_store_closes(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    await store.create_run(
        RunManifest(run_id="r1", workflow="w", input=b"", input_hash="", owner="me")
    )
    await store.aclose()
    other = FileStore(tmp_path)
    lease = await other.claim("r1", "recoverer")
    assert lease.owner == "recoverer"
    await other.aclose()


async def test_a_run_created_here_but_written_elsewhere_appends_after_the_others(
    tmp_path: Path,
) -> None:
    # the store knows a run it created has an empty log only while it holds the claim
    store, other = FileStore(tmp_path), FileStore(tmp_path)
    owned = RunManifest(run_id="r1", workflow="w", input=b"", input_hash="", owner="me")
    await store.create_run(owned)
    await store.release(await store.claim("r1", "me"))
    lease = await other.claim("r1", "other")
    assert await other.append("r1", [rec(0), rec(1), rec(2)]) == 3
    await other.release(lease)
    await other.aclose()
    lease = await store.claim("r1", "me")
    assert await store.append("r1", [rec(3)]) == 4
    assert await FileStore(tmp_path).read_log("r1") == [rec(i) for i in range(4)]
    await store.aclose()


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts open files in /proc")
async def test_a_released_run_leaves_no_file_open(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    await store.create_run(RunManifest(run_id="warm", workflow="w", input=b"", input_hash=""))
    before = len(os.listdir("/proc/self/fd"))
    for i in range(40):
        run_id = f"many-{i}"
        await store.create_run(RunManifest(run_id=run_id, workflow="w", input=b"", input_hash=""))
        lease = await store.claim(run_id, "me")
        await store.append(run_id, [EventRecord(kind="step", step_id="s0")])
        await store.release(lease)
    # a long-lived store held one open log file per run it ever wrote
    assert len(os.listdir("/proc/self/fd")) == before
    # and a released run's log still reads, and appends again when claimed again
    lease = await store.claim("many-3", "me")
    assert await store.append("many-3", [EventRecord(kind="step", step_id="s1")]) == 2
    await store.release(lease)
    assert [r.step_id for r in await store.read_log("many-3")] == ["s0", "s1"]  # type: ignore[union-attr]
    await store.aclose()


async def test_a_claim_reads_the_log_afresh_after_another_owner_appended(tmp_path: Path) -> None:
    first, second = FileStore(tmp_path), FileStore(tmp_path)
    await first.create_run(RunManifest(run_id="r1", workflow="w", input=b"", input_hash=""))
    await first.append("r1", [rec(0)])  # `first` now has the log open at its end
    lease = await second.claim("r1", "second")
    assert await second.append("r1", [rec(1), rec(2)]) == 3
    await second.release(lease)
    lease = await first.claim("r1", "first")
    # appended after the other owner's records, never over them
    assert await first.append("r1", [rec(3)]) == 4
    await first.release(lease)
    assert await FileStore(tmp_path).read_log("r1") == [rec(i) for i in range(4)]
    await first.aclose()
    await second.aclose()


class _CountingFS(actorflow.storage.OSFileSystem):
    def __init__(self) -> None:
        self.syncs = 0

    def fsync(self, handle: int) -> None:
        self.syncs += 1
        super().fsync(handle)

    def fsync_dir(self, path: str) -> None:
        self.syncs += 1
        super().fsync_dir(path)


async def test_an_unsynced_manifest_change_costs_no_sync_and_never_replaces_the_durable_one(
    tmp_path: Path,
) -> None:
    fs = _CountingFS()
    store = FileStore(tmp_path, fs=fs)
    await store.create_run(manifest())
    durable = (tmp_path / "runs/r1/manifest").read_bytes()
    fs.syncs = 0

    def finish(m: RunManifest) -> RunManifest:
        return msgspec.structs.replace(m, status=RunStatus.COMPLETED, result=b"\x01")

    ended = await store.update_run("r1", finish, durable=False)
    assert fs.syncs == 0
    assert (tmp_path / "runs/r1/manifest").read_bytes() == durable
    assert await FileStore(tmp_path).read_run("r1") == ended
    assert [m.status for m in await FileStore(tmp_path).list_runs()] == [RunStatus.COMPLETED]

    # what a power loss may leave of it: the durable manifest, whole, is read instead
    (tmp_path / "runs/r1/manifest.unsynced").write_bytes(b"\x00" * 7)
    assert (await FileStore(tmp_path).read_run("r1")).status is RunStatus.RUNNING

    # a durable change starts from the newest and takes the unsynced one's place
    (tmp_path / "runs/r1/manifest.unsynced").unlink()
    await store.update_run("r1", finish, durable=False)
    tagged = await store.update_run("r1", lambda m: msgspec.structs.replace(m, phase="p"))
    assert tagged == msgspec.structs.replace(ended, phase="p", updated=tagged.updated)
    assert not (tmp_path / "runs/r1/manifest.unsynced").exists()
    assert await FileStore(tmp_path).read_run("r1") == tagged
