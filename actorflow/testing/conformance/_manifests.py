"""Conformance: manifests (create once, update atomically, list, delete) and claims."""

from __future__ import annotations

import anyio
import msgspec
import pytest

from actorflow.errors import (
    InvalidRunIdError,
    LeaseLostError,
    RunLockedError,
    RunNotFoundError,
)
from actorflow.storage import ErrorInfo, Lease, RunStatus, Store
from actorflow.testing.conformance._samples import manifest, snapshot, step

__all__ = ["ManifestTests", "OwnershipTests"]


class ManifestTests:
    """A run's manifest: created once, replaced atomically, listed, deleted."""

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


class OwnershipTests:
    """Claims: one owner at a time, and a new owner's epoch is higher."""

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

    async def test_claims_racing_in_one_store_have_one_winner(self, store: Store) -> None:
        """Tasks of one process claiming a run at once (a worker's adopter and a
        dispatch, say): exactly one gets it, and the others hold nothing after."""
        await store.create_run(manifest())
        won: list[Lease] = []
        refused: list[str] = []

        async def claim(owner: str) -> None:
            try:
                won.append(await store.claim("run-1", owner))
            except RunLockedError:
                refused.append(owner)

        async with anyio.create_task_group() as tg:
            for owner in ("a", "b", "c", "d"):
                tg.start_soon(claim, owner)
        assert len(won) == 1, f"{len(won)} tasks hold the run at once"
        assert len(refused) == 3
        await store.release(won[0])
        assert not await store.is_owned("run-1")
        later = await store.claim("run-1", "e")
        assert later.epoch > won[0].epoch
        await store.release(later)

    async def test_claim_of_unknown_run_raises(self, store: Store) -> None:
        with pytest.raises(RunNotFoundError):
            await store.claim("ghost", "me")
