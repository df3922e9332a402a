"""Conformance: retention (what ``prune`` keeps and drops) and the verifier."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import msgspec

from actorflow.storage import (
    RetentionPolicy,
    RunStatus,
    Store,
    verify_store,
)
from actorflow.testing.conformance._samples import manifest, snapshot, step

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["RetentionTests"]


class RetentionTests:
    """``prune``: what each retention policy keeps, and the verifier on a healthy store."""

    async def fill(
        self,
        store: Store,
        n: int,
        *,
        run_id: str = "run-1",
        phase_of: Callable[[int], str] | None = None,
    ) -> list[str]:
        # a run of n steps, each with a blob and a snapshot after it; returns the blobs' refs
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

    async def test_snapshots_a_log_cut_rests_on_are_durable(self, store: Store) -> None:
        """The oldest kept (where the log now starts) and the newest survive a power loss."""
        await self.fill(store, 6)
        await store.prune(RetentionPolicy(keep_last=3))
        listed = await store.list_snapshots("run-1")
        assert [s.snapshot_id for s in listed] == ["s3", "s4", "s5"]
        assert listed[0].durable
        assert listed[-1].durable

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

    async def test_verifier_finds_nothing_in_a_healthy_store(self, store: Store) -> None:
        await store.create_run(manifest())
        await store.write_snapshot(snapshot("s1", 0, created=time.time()))
        assert await verify_store(store) == []
