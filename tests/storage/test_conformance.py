"""The one conformance suite: every store (memory, file, S3...) behaves the same.

Each test runs once per store factory in ``conftest.STORES`` and per event loop.
"""

from __future__ import annotations

import functools
import time
from typing import TYPE_CHECKING

import anyio
import msgspec
import pytest

from actorflow.errors import (
    CheckpointNotFoundError,
    CheckpointTooLargeError,
    EncodingError,
    InvalidNameError,
    InvalidRunIdError,
    LeaseLostError,
    RunLockedError,
    RunNotFoundError,
    StorageError,
)
from actorflow.storage import (
    AgentSnapshot,
    DecisionRecord,
    ErrorInfo,
    EventRecord,
    RetentionPolicy,
    RunManifest,
    RunStatus,
    Snapshot,
    StateRef,
    StepRecord,
    Store,
)

if TYPE_CHECKING:
    from collections.abc import Callable


def manifest(run_id: str = "run-1", *, workflow: str = "wf", created: float = 0.0) -> RunManifest:
    return RunManifest(
        run_id=run_id, workflow=workflow, input=b"\x91\x01", input_hash="h", created=created
    )


def step(i: int, blob: str | None = None) -> StepRecord:
    state = StateRef(agent="a", type="T", blob=blob) if blob else None
    return StepRecord(step_id=f"main/{i}", kind="ask", target="a", result=b"r%d" % i, state=state)


def snapshot(
    sid: str,
    position: int,
    *,
    run_id: str = "run-1",
    phase: str | None = None,
    created: float = 1.0,
    blob: str | None = None,
    size: int = 0,
) -> Snapshot:
    agents = {}
    if blob:
        agents["a"] = AgentSnapshot(
            name="a", type="T", state=StateRef(agent="a", type="T", blob=blob)
        )
    return Snapshot(
        run_id=run_id,
        snapshot_id=sid,
        position=position,
        created=created,
        trigger="test",
        phase=phase,
        agents=agents,
        metrics={"pad": 0.0},
        events=(EventRecord(kind="pad", data=b"x" * size),) if size else (),
    )


class TestManifests:
    async def test_create_run_is_create_if_absent(self, store: Store) -> None:
        first, created = await store.create_run(manifest())
        assert created
        again, created_again = await store.create_run(manifest(workflow="other"))
        assert not created_again
        assert again == first
        assert again.workflow == "wf"

    async def test_read_run_of_unknown_run_raises(self, store: Store) -> None:
        with pytest.raises(RunNotFoundError, match="no run 'nope'"):
            await store.read_run("nope")

    async def test_update_run_replaces_and_returns_the_manifest(self, store: Store) -> None:
        await store.create_run(manifest())
        done = await store.update_run(
            "run-1",
            lambda m: msgspec.structs.replace(m, status=RunStatus.COMPLETED, result=b"\x01"),
        )
        assert done.status is RunStatus.COMPLETED
        assert await store.read_run("run-1") == done

    async def test_update_of_unknown_run_raises(self, store: Store) -> None:
        with pytest.raises(RunNotFoundError):
            await store.update_run("nope", lambda m: m)

    async def test_concurrent_updates_are_not_lost(self, store: Store) -> None:
        await store.create_run(manifest())

        async def bump() -> None:
            await store.update_run(
                "run-1", lambda m: msgspec.structs.replace(m, attempt=m.attempt + 1)
            )

        async with anyio.create_task_group() as tg:
            for _ in range(10):
                tg.start_soon(bump)
        assert (await store.read_run("run-1")).attempt == 10

    async def test_list_runs_filters_by_status_and_workflow_oldest_first(
        self, store: Store
    ) -> None:
        await store.create_run(manifest("b", workflow="x", created=2.0))
        await store.create_run(manifest("a", workflow="y", created=1.0))
        await store.create_run(manifest("c", workflow="x", created=3.0))
        await store.update_run("c", lambda m: msgspec.structs.replace(m, status=RunStatus.FAILED))
        assert [m.run_id for m in await store.list_runs()] == ["a", "b", "c"]
        assert [m.run_id for m in await store.list_runs(workflow="x")] == ["b", "c"]
        assert [m.run_id for m in await store.list_runs(status=RunStatus.FAILED)] == ["c"]
        both = await store.list_runs(status=[RunStatus.FAILED, RunStatus.RUNNING], workflow="x")
        assert [m.run_id for m in both] == ["b", "c"]

    async def test_a_blocked_run_keeps_its_error_and_code_version(self, store: Store) -> None:
        await store.create_run(manifest())
        await store.create_run(manifest("other", created=1.0))
        blocked = await store.update_run(
            "run-1",
            lambda m: msgspec.structs.replace(
                m,
                status=RunStatus.BLOCKED,
                error=ErrorInfo(type="NonDeterminismError", message="step 2 differs"),
                blocked_code_version="v2",
            ),
        )
        assert await store.read_run("run-1") == blocked
        assert await store.list_runs(status=RunStatus.BLOCKED) == [blocked]
        assert not RunStatus.BLOCKED.finished  # nothing is done with it as with a finished run

    async def test_intact_runs_leave_nothing_unreadable(self, store: Store) -> None:
        await store.create_run(manifest("a"))
        await store.append("a", [step(0)])
        await store.delete_run("a")  # a tombstone: a run still
        await store.create_run(manifest("b"))
        assert await store.list_unreadable() == []

    @pytest.mark.parametrize("bad", ["", "../x", "a/b", "a\\b", "..", "x" * 129, "a b", ".hidden"])
    async def test_bad_run_ids_are_refused_everywhere(self, store: Store, bad: str) -> None:
        with pytest.raises(InvalidRunIdError, match="invalid run id"):
            await store.create_run(manifest(bad))
        with pytest.raises(InvalidRunIdError):
            await store.read_run(bad)
        with pytest.raises(InvalidRunIdError):
            await store.append(bad, [step(0)])

    async def test_delete_run_leaves_a_tombstone_that_blocks_the_id(self, store: Store) -> None:
        await store.create_run(manifest())
        await store.update_run(
            "run-1",
            lambda m: msgspec.structs.replace(m, status=RunStatus.COMPLETED, result=b"\x07"),
        )
        await store.append("run-1", [step(0)])
        await store.put_blob("run-1", b"state")
        await store.write_snapshot(snapshot("s1", 1))
        assert await store.delete_run("run-1") > 0
        stone = await store.read_run("run-1")
        assert stone.tombstone
        assert stone.result == b"\x07"
        assert stone.status is RunStatus.COMPLETED
        assert await store.list_snapshots("run-1") == []
        assert await store.list_blobs("run-1") == []
        assert not (await store.create_run(manifest()))[1]

    async def test_delete_run_without_tombstone_forgets_the_run(self, store: Store) -> None:
        await store.create_run(manifest())
        await store.append("run-1", [step(0)])
        await store.delete_run("run-1", tombstone=False)
        with pytest.raises(RunNotFoundError):
            await store.read_run("run-1")
        assert (await store.create_run(manifest()))[1]
        assert await store.log_length("run-1") == 0


class TestLog:
    async def test_append_returns_the_new_length_and_reads_back_in_order(
        self, store: Store
    ) -> None:
        await store.create_run(manifest())
        assert await store.log_length("run-1") == 0
        assert await store.append("run-1", [step(0), step(1)]) == 2
        decision = DecisionRecord(step_id="main/2", agent="lead", type="plan", alternatives=("a",))
        assert await store.append("run-1", [decision]) == 3
        assert await store.read_log("run-1") == [step(0), step(1), decision]
        assert await store.read_log("run-1", 2) == [decision]
        assert await store.read_log("run-1", 3) == []
        assert await store.log_length("run-1") == 3

    async def test_append_to_an_unknown_run_raises(self, store: Store) -> None:
        with pytest.raises(RunNotFoundError):
            await store.append("nope", [step(0)])

    async def test_empty_append_changes_nothing(self, store: Store) -> None:
        await store.create_run(manifest())
        assert await store.append("run-1", []) == 0

    async def test_concurrent_appenders_each_get_a_contiguous_range(self, store: Store) -> None:
        await store.create_run(manifest())
        ends: list[int] = []

        async def writer(w: int) -> None:
            for i in range(5):
                ends.append(
                    await store.append("run-1", [step(w * 100 + i), step(w * 100 + i + 50)])
                )

        async with anyio.create_task_group() as tg:
            for w in range(8):
                tg.start_soon(writer, w)
        log = await store.read_log("run-1")
        assert len(log) == 80
        assert sorted(ends) == list(range(2, 81, 2))
        for end in ends:  # each append's two records are adjacent
            first, second = log[end - 2], log[end - 1]
            assert isinstance(first, StepRecord)
            assert isinstance(second, StepRecord)
            assert int(second.step_id.split("/")[1]) == int(first.step_id.split("/")[1]) + 50

    async def test_truncate_before_keeps_absolute_positions(self, store: Store) -> None:
        await store.create_run(manifest())
        await store.append("run-1", [step(i) for i in range(10)])
        dropped = await store.truncate_log_before("run-1", 6)
        assert 0 <= dropped <= 6
        assert await store.log_length("run-1") == 10
        assert await store.read_log("run-1", 6) == [step(i) for i in range(6, 10)]
        assert await store.append("run-1", [step(10)]) == 11
        assert (await store.read_log("run-1", 10)) == [step(10)]

    async def test_non_encodable_record_is_an_encoding_error_and_appends_nothing(
        self, store: Store
    ) -> None:
        await store.create_run(manifest())
        bad = EventRecord(kind="x", data=object())  # type: ignore[arg-type]
        with pytest.raises(EncodingError):
            await store.append("run-1", [step(0), bad])
        assert await store.log_length("run-1") == 0


class TestBlobs:
    async def test_blobs_are_content_addressed_and_stored_once(self, store: Store) -> None:
        await store.create_run(manifest())
        data = b"state " * 5000
        ref = await store.put_blob("run-1", data)
        assert await store.put_blob("run-1", data) == ref
        assert await store.get_blob("run-1", ref) == data
        assert await store.has_blob("run-1", ref)
        assert await store.list_blobs("run-1") == [ref]
        assert await store.delete_blob("run-1", ref) > 0
        assert not await store.has_blob("run-1", ref)
        assert await store.delete_blob("run-1", ref) == 0

    async def test_missing_blob_is_a_storage_error(self, store: Store) -> None:
        await store.create_run(manifest())
        with pytest.raises(StorageError, match="no blob"):
            await store.get_blob("run-1", "0" * 64)

    async def test_a_blob_ref_that_is_not_an_address_is_refused(self, store: Store) -> None:
        await store.create_run(manifest())
        with pytest.raises(StorageError, match="not a blob address"):
            await store.get_blob("run-1", "../../etc/passwd")


class TestSnapshots:
    async def test_write_read_list_delete(self, store: Store) -> None:
        await store.create_run(manifest())
        ref = await store.put_blob("run-1", b"agent state")
        snap = snapshot("s1", 4, phase="draft#0", blob=ref, size=10_000)
        info = await store.write_snapshot(snap)
        assert (info.snapshot_id, info.position, info.phase) == ("s1", 4, "draft#0")
        assert info.raw_size > 10_000
        assert info.stored_size > 0
        assert await store.read_snapshot("run-1", "s1") == snap
        assert await store.list_snapshots("run-1") == [info]
        assert await store.delete_snapshot("run-1", "s1") > 0
        assert await store.list_snapshots("run-1") == []
        assert await store.delete_snapshot("run-1", "s1") == 0
        with pytest.raises(CheckpointNotFoundError, match="has no checkpoint 's1'"):
            await store.read_snapshot("run-1", "s1")

    async def test_snapshots_list_oldest_first_by_position(self, store: Store) -> None:
        await store.create_run(manifest())
        for sid, pos in [("c", 9), ("a", 1), ("b", 5)]:
            await store.write_snapshot(snapshot(sid, pos))
        assert [s.snapshot_id for s in await store.list_snapshots("run-1")] == ["a", "b", "c"]

    async def test_update_goes_into_the_write_that_lists_the_snapshot(self, store: Store) -> None:
        await store.create_run(manifest())
        finished = functools.partial(
            msgspec.structs.replace, status=RunStatus.COMPLETED, result=b"\xa2ok"
        )
        info = await store.write_snapshot(snapshot("final", 3), update=finished)
        stored = await store.read_run("run-1")
        assert (stored.status, stored.result) == (RunStatus.COMPLETED, b"\xa2ok")
        assert await store.list_snapshots("run-1") == [info]

    async def test_a_checkpoint_id_is_written_once(self, store: Store) -> None:
        await store.create_run(manifest())
        first = await store.write_snapshot(snapshot("s1", 1))
        assert await store.write_snapshot(snapshot("s1", 1)) == first  # the same: a no-op
        with pytest.raises(StorageError, match="different checkpoint with id 's1'"):
            await store.write_snapshot(snapshot("s1", 2))
        assert await store.list_snapshots("run-1") == [first]
        assert (await store.read_snapshot("run-1", "s1")).position == 1

    async def test_an_update_that_renames_the_run_is_refused(self, store: Store) -> None:
        await store.create_run(manifest())
        renamed = functools.partial(msgspec.structs.replace, run_id="run-2")
        with pytest.raises(StorageError, match="rename"):
            await store.write_snapshot(snapshot("final", 3), update=renamed)
        assert await store.list_snapshots("run-1") == []

    async def test_oversize_snapshot_is_refused_with_a_clear_error(self, store: Store) -> None:
        await store.create_run(manifest())
        codec = store.codec  # type: ignore[attr-defined]
        big = snapshot("big", 1, size=codec.max_snapshot_bytes + 1)
        with pytest.raises(CheckpointTooLargeError, match="over the limit"):
            await store.write_snapshot(big)
        assert await store.list_snapshots("run-1") == []

    async def test_snapshot_of_unknown_run_raises(self, store: Store) -> None:
        with pytest.raises(RunNotFoundError):
            await store.write_snapshot(snapshot("s1", 0, run_id="ghost"))

    async def test_unsafe_snapshot_id_is_refused(self, store: Store) -> None:
        await store.create_run(manifest())
        with pytest.raises(InvalidNameError, match="checkpoint id"):
            await store.write_snapshot(snapshot("../x", 0))


class TestOwnership:
    async def test_one_owner_at_a_time(self, store: Store) -> None:
        await store.create_run(manifest())
        assert not await store.is_owned("run-1")
        lease = await store.claim("run-1", "me")
        assert lease.owner == "me"
        assert await store.is_owned("run-1")
        with pytest.raises(RunLockedError, match="is owned"):
            await store.claim("run-1", "you")
        assert await store.renew(lease) == lease or (await store.renew(lease)).epoch == lease.epoch
        await store.release(lease)
        await store.release(lease)
        assert not await store.is_owned("run-1")
        second = await store.claim("run-1", "you")
        assert second.epoch > lease.epoch
        with pytest.raises(LeaseLostError, match="taken over"):
            await store.renew(lease)
        await store.release(second)

    async def test_claim_of_unknown_run_raises(self, store: Store) -> None:
        with pytest.raises(RunNotFoundError):
            await store.claim("ghost", "me")


class TestRetention:
    async def fill(
        self,
        store: Store,
        n: int,
        *,
        run_id: str = "run-1",
        phase_of: Callable[[int], str] | None = None,
    ) -> list[str]:
        await store.create_run(manifest(run_id))
        refs = []
        for i in range(n):
            ref = await store.put_blob(run_id, b"state %d" % i)
            refs.append(ref)
            await store.append(run_id, [step(i, ref)])
            phase = phase_of(i) if phase_of else None
            await store.write_snapshot(
                snapshot(f"s{i}", i + 1, run_id=run_id, blob=ref, phase=phase, created=100.0 + i)
            )
        return refs

    async def test_keep_last_drops_older_snapshots_log_and_blobs(self, store: Store) -> None:
        refs = await self.fill(store, 6)
        report = await store.prune(RetentionPolicy(keep_last=2))
        assert [s.snapshot_id for s in await store.list_snapshots("run-1")] == ["s4", "s5"]
        assert report.snapshots_deleted == 4
        # the log stays readable from the oldest kept snapshot's position
        assert await store.read_log("run-1", 5) == [step(5, refs[5])]
        assert set(await store.list_blobs("run-1")) == {refs[4], refs[5]}
        assert report.blobs_deleted == 4

    async def test_keep_per_phase(self, store: Store) -> None:
        await self.fill(store, 6, phase_of=lambda i: "a" if i < 3 else "b")
        await store.prune(RetentionPolicy(keep_last=1, keep_per_phase=True))
        assert [s.snapshot_id for s in await store.list_snapshots("run-1")] == ["s2", "s5"]

    async def test_max_age_keeps_the_newest_snapshot(self, store: Store) -> None:
        await self.fill(store, 3)
        await store.prune(RetentionPolicy(keep_last=None, max_age=1.0))
        assert [s.snapshot_id for s in await store.list_snapshots("run-1")] == ["s2"]

    async def test_log_is_never_pruned_for_a_run_without_snapshots(self, store: Store) -> None:
        await store.create_run(manifest())
        ref = await store.put_blob("run-1", b"kept")
        await store.append("run-1", [step(i, ref) for i in range(5)])
        await store.prune(RetentionPolicy(keep_last=1, max_age=0.0))
        assert len(await store.read_log("run-1")) == 5
        assert await store.list_blobs("run-1") == [ref]

    async def test_blobs_of_an_owned_run_are_not_collected(self, store: Store) -> None:
        await store.create_run(manifest())
        lease = await store.claim("run-1", "me")
        ref = await store.put_blob("run-1", b"not yet referenced")
        await store.write_snapshot(snapshot("s0", 0))
        await store.prune(RetentionPolicy())
        assert await store.has_blob("run-1", ref)
        await store.release(lease)

    async def test_delete_completed_leaves_tombstones(self, store: Store) -> None:
        await self.fill(store, 2)
        await self.fill(store, 2, run_id="run-2")
        await store.update_run(
            "run-1", lambda m: msgspec.structs.replace(m, status=RunStatus.COMPLETED)
        )
        report = await store.prune(RetentionPolicy(delete_completed=True))
        assert report.runs_deleted == 1
        assert (await store.read_run("run-1")).tombstone
        assert await store.list_snapshots("run-1") == []
        assert len(await store.list_snapshots("run-2")) == 2
        assert (await store.prune(RetentionPolicy(delete_completed=True))).runs_deleted == 0

    async def test_delete_completed_keeps_blocked_runs(self, store: Store) -> None:
        await self.fill(store, 2)
        await store.update_run(
            "run-1", lambda m: msgspec.structs.replace(m, status=RunStatus.BLOCKED)
        )
        report = await store.prune(RetentionPolicy(delete_completed=True))
        assert report.runs_deleted == 0
        assert not (await store.read_run("run-1")).tombstone
        assert len(await store.list_snapshots("run-1")) == 2

    async def test_size_budget_drops_oldest_first_finished_runs_first(self, store: Store) -> None:
        await self.fill(store, 3)
        await self.fill(store, 3, run_id="run-2")
        await store.update_run(
            "run-2", lambda m: msgspec.structs.replace(m, status=RunStatus.FAILED)
        )
        sizes = {
            rid: sum(s.stored_size for s in await store.list_snapshots(rid))
            for rid in ("run-1", "run-2")
        }
        budget = sum(sizes.values()) - 1
        await store.prune(RetentionPolicy(keep_last=None, max_total_bytes=budget))
        assert [s.snapshot_id for s in await store.list_snapshots("run-2")] == ["s1", "s2"]
        assert len(await store.list_snapshots("run-1")) == 3
        await store.prune(RetentionPolicy(keep_last=None, max_total_bytes=0))
        assert [s.snapshot_id for s in await store.list_snapshots("run-1")] == ["s2"]
        assert [s.snapshot_id for s in await store.list_snapshots("run-2")] == ["s2"]


async def test_verifier_finds_nothing_in_a_healthy_store(store: Store) -> None:
    from actorflow.storage._retention import verify_store

    await store.create_run(manifest())
    await store.write_snapshot(snapshot("s1", 0, created=time.time()))
    assert await verify_store(store) == []
