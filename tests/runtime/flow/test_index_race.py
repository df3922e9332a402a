"""A worker that looks while a run is being created does not drop it from the index.

A store indexes a run before its manifest exists (so the index never misses
one): a worker that finds the entry in that moment must not take the missing
manifest for a run deleted or never created, and unindex it for good.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import pytest

from actorflow import AdoptionPolicy, Runtime
from actorflow.errors import RunNotFoundError
from actorflow.storage import FileStore, RunManifest, RunStatus
from tests.runtime.flow.queue_flows import Audited

if TYPE_CHECKING:
    from pathlib import Path

FAST = AdoptionPolicy(
    poll_interval=0.02, recheck_interval=0.05, backoff=0.01, max_backoff=0.05, reindex_interval=None
)
DEADLINE = 30.0
"""A bound on the test: it turns a hang into a failure, it times nothing."""


class MidCreation(FileStore):
    """A file store whose run ``creating`` reads as missing until the test lets it be created."""

    creating = "fresh"

    def __init__(self, path: Path, *, looks: int = 1) -> None:
        super().__init__(path)
        self.seen_missing = anyio.Event()
        self.created = False
        self.looks = looks  # how many times a worker finds it missing before it is created
        self.missed = 0

    async def read_run(self, run_id: str) -> RunManifest:
        if run_id == self.creating and not self.created:
            self.missed += 1
            if self.missed >= self.looks:
                self.seen_missing.set()  # the index lists it; its manifest is not there yet
            raise RunNotFoundError(run_id)
        return await super().read_run(run_id)


@pytest.mark.parametrize("looks", [1, 5], ids=["one-look", "slow-creation"])
async def test_a_run_indexed_before_its_manifest_is_adopted_once_created(
    tmp_path: Path, looks: int
) -> None:
    """A creation may outlast several polls on a busy disk: the entry stays all along."""
    store = MidCreation(tmp_path / "store", looks=looks)
    async with Runtime(store=store) as client:
        await client.submit(Audited, 1, run_id=store.creating)
    async with Runtime(store=store, adopt_orphans=FAST) as worker:
        with anyio.fail_after(DEADLINE):
            await store.seen_missing.wait()
            store.created = True  # the creation finishes: the manifest is there now
            worker.adopt_now()
            while (await store.read_run(store.creating)).status is not RunStatus.COMPLETED:  # noqa: ASYNC110
                await anyio.sleep(0.01)  # the worker's task drives it
