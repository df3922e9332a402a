"""A reindex never drops the index entry of a run created while it lists the manifests.

Workers reindex when they start; a schedule's tick or a submit landing in
that moment was left out of the index until the next reindex (ten minutes),
so no worker started it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from actorflow.storage import FileStore, MemoryStore, RunManifest, RunStatus, SqliteStore

if TYPE_CHECKING:
    from pathlib import Path


def queued(run_id: str) -> RunManifest:
    return RunManifest(
        run_id=run_id, workflow="W", input=b"\xc0", input_hash="h", status=RunStatus.QUEUED
    )


class CreatesWhileListing:
    """Mixed into a store: a run is created by someone else while the manifests are listed."""

    created = False

    async def list_runs(self, *args: object, **kwargs: object) -> list[RunManifest]:
        found: list[RunManifest] = await super().list_runs(*args, **kwargs)  # type: ignore[misc]
        if not self.created:
            self.created = True
            await self.create_run(queued("late"))  # type: ignore[attr-defined]
        return found


class FileCreating(CreatesWhileListing, FileStore):
    pass


class MemoryCreating(CreatesWhileListing, MemoryStore):
    pass


class SqliteCreating(CreatesWhileListing, SqliteStore):
    pass


@pytest.mark.parametrize("kind", ["file", "memory", "sqlite"])
async def test_a_run_created_during_a_reindex_stays_indexed(kind: str, tmp_path: Path) -> None:
    store: FileCreating | MemoryCreating | SqliteCreating = (
        FileCreating(tmp_path)
        if kind == "file"
        else SqliteCreating(tmp_path / "store.db")
        if kind == "sqlite"
        else MemoryCreating()
    )
    await store.create_run(queued("early"))
    await store.reindex()
    assert sorted(await store.list_unfinished()) == ["early", "late"]
