"""The runs pages' shared listing: refreshed by reading only the manifests that changed."""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from actorflow.storage import FileStore, MemoryStore, RunManifest, RunStatus
from actorflow.ui._listing import Listing

if TYPE_CHECKING:
    from pathlib import Path


class CountingStore(MemoryStore):
    """A memory store that counts whole listings and single manifest reads."""

    listings = 0
    reads = 0

    async def list_runs(self, **filters: object) -> list[RunManifest]:
        self.listings += 1
        return await super().list_runs(**filters)  # type: ignore[arg-type]

    async def read_run(self, run_id: str) -> RunManifest:
        self.reads += 1
        return await super().read_run(run_id)


def _manifest(run_id: str, created: float) -> RunManifest:
    return RunManifest(run_id=run_id, workflow="wf", input=b"\xc0", input_hash="h", created=created)


async def test_a_refresh_reads_only_what_changed() -> None:
    store = CountingStore()
    for i in range(20):
        await store.create_run(_manifest(f"run-{i:02d}", float(i)))
    listing = Listing(store, ttl=0.0)
    first, _ = await listing.manifests()
    assert [m.run_id for m in first] == [f"run-{i:02d}" for i in range(20)]
    assert (store.listings, store.reads) == (1, 0)
    await store.update_run(
        "run-03", lambda m: msgspec.structs.replace(m, status=RunStatus.COMPLETED)
    )
    await store.create_run(_manifest("run-new", 100.0))
    await store.delete_run("run-05", tombstone=False)
    second, _ = await listing.manifests()
    assert (store.listings, store.reads) == (1, 2)  # the changed run and the new one
    by_id = {m.run_id: m for m in second}
    assert by_id["run-03"].status is RunStatus.COMPLETED
    assert "run-new" in by_id
    assert "run-05" not in by_id
    assert [m.run_id for m in second] == sorted(by_id, key=lambda r: (by_id[r].created, r))
    third, _ = await listing.manifests()
    assert third == second
    assert (store.listings, store.reads) == (1, 2)  # nothing changed: nothing read


async def test_most_runs_changed_are_listed_again_in_one_go() -> None:
    store = CountingStore()
    for i in range(8):
        await store.create_run(_manifest(f"run-{i}", float(i)))
    listing = Listing(store, ttl=0.0)
    await listing.manifests()
    for i in range(4):
        await store.update_run(f"run-{i}", lambda m: msgspec.structs.replace(m, phase="p"))
    refreshed, _ = await listing.manifests()
    assert (store.listings, store.reads) == (2, 0)
    assert sum(m.phase == "p" for m in refreshed) == 4


async def test_a_file_store_listing_follows_changes(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    try:
        for i in range(5):
            await store.create_run(_manifest(f"run-{i}", float(i)))
        listing = Listing(store, ttl=0.0)
        assert len((await listing.manifests())[0]) == 5
        await store.update_run("run-1", lambda m: msgspec.structs.replace(m, phase="moved"))
        await store.delete_run("run-2", tombstone=False)
        await store.create_run(_manifest("run-9", 9.0))
        after = {m.run_id: m for m in (await listing.manifests())[0]}
        assert set(after) == {"run-0", "run-1", "run-3", "run-4", "run-9"}
        assert after["run-1"].phase == "moved"
    finally:
        await store.aclose()
