"""A file store opened without the key of its data: what it can still tell, and verify.

The runs are written by a store with the key, then read by one without it
(another process, say ``actorflow validate`` run without ``--key-file``).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from structlog.testing import capture_logs

from actorflow.storage import (
    ClaimInfo,
    Codec,
    EventRecord,
    FileStore,
    RunManifest,
    Snapshot,
    StateRef,
    StepRecord,
)
from actorflow.storage.file._frames import scan

if TYPE_CHECKING:
    from pathlib import Path

KEY = bytes(range(32))


def keyed(tmp_path: Path) -> FileStore:
    return FileStore(tmp_path / "s", codec=Codec(keys={"k1": KEY}, compress_above=64))


def step(i: int, blob: str = "") -> StepRecord:
    state = StateRef(agent="a", type="T", blob=blob) if blob else None
    return StepRecord(step_id=f"p.0/{i}", kind="ask", result=b"r%d" % i, state=state)


async def sealed_run(store: FileStore, run_id: str = "r1") -> None:
    await store.create_run(RunManifest(run_id=run_id, workflow="w", input=b"", input_hash=""))
    ref = await store.put_blob(run_id, b"a state " * 20)
    await store.append(run_id, [step(0), step(1, ref)])
    await store.append(run_id, [EventRecord(kind="e"), step(2)])
    await store.write_snapshot(
        Snapshot(run_id=run_id, snapshot_id="s1", position=4, created=0.0, trigger="t", phase="p")
    )


async def test_a_manifest_sealed_with_a_key_not_given_is_listed_as_sealed(
    tmp_path: Path,
) -> None:
    async with keyed(tmp_path) as store:
        await sealed_run(store)
    async with FileStore(tmp_path / "s") as unkeyed:
        with capture_logs() as logs:
            assert await unkeyed.list_runs() == []  # skipped, never fatal
        [entry] = await unkeyed.list_unreadable()
    assert [e["run_id"] for e in logs if e["event"] == "run_unreadable"] == ["r1"]
    assert (entry.run_id, entry.key_id) == ("r1", "k1")
    assert entry.location == str(tmp_path / "s" / "runs" / "r1" / "manifest")
    assert "was not given" in entry.problem
    assert "ACTORFLOW_KEYS" in entry.problem
    wrong = Codec(keys={"k1": os.urandom(32)})
    async with FileStore(tmp_path / "s", codec=wrong) as mistaken:
        with capture_logs():
            [entry] = await mistaken.list_unreadable()
    assert "has wrong" in entry.problem


async def test_checksums_are_verified_without_the_key(tmp_path: Path) -> None:
    async with keyed(tmp_path) as store:
        await sealed_run(store)
        lease = await store.claim("r1", "host:1:tag")  # an owner file, sealed too
        await store.release(lease)
    async with FileStore(tmp_path / "s") as unkeyed:
        check = await unkeyed.check_sealed("r1")
    assert (check.records, check.snapshots, check.blobs, check.other) == (4, 1, 1, 2)
    assert check.encrypted == 8
    assert check.problems == []


async def test_a_torn_tail_is_no_problem_and_damage_before_it_is_named(tmp_path: Path) -> None:
    async with keyed(tmp_path) as store:
        await sealed_run(store)
    [segment] = (tmp_path / "s" / "runs" / "r1" / "log").glob("*.seg")
    whole = segment.read_bytes()
    # the frames' end, not ``rstrip``: a sealed record may end with a zero byte itself
    data = whole[: scan(whole, location=segment.name, last=True).end]
    torn = data + b"\x00\x00\x01\x00half a frame"  # a killed writer's last append
    segment.write_bytes(torn)
    snapshot = next((tmp_path / "s" / "runs" / "r1" / "snapshots").iterdir())
    async with FileStore(tmp_path / "s") as unkeyed:
        assert (await unkeyed.check_sealed("r1")).problems == []
        damaged = bytearray(torn)
        damaged[12 + 40] ^= 0xFF  # the first record's sealed body: its frame checksum fails
        segment.write_bytes(bytes(damaged))
        body = bytearray(snapshot.read_bytes())
        body[-1] ^= 0xFF
        snapshot.write_bytes(bytes(body))
        problems = dict((await unkeyed.check_sealed("r1")).problems)
    assert problems == {
        f"{segment} at byte 0": "payload checksum mismatch",
        str(snapshot): "sha256 checksum mismatch",
    }


async def test_who_holds_a_run_shows_without_the_key_its_owner_s_name_does_not(
    tmp_path: Path,
) -> None:
    async with keyed(tmp_path) as store:
        await sealed_run(store)
        lease = await store.claim("r1", "host:1:tag")
        async with FileStore(tmp_path / "s") as unkeyed:
            assert await unkeyed.read_claim("r1") == ClaimInfo(owner=None, alive=True)
            async with keyed(tmp_path) as other:
                assert await other.read_claim("r1") == ClaimInfo(owner="host:1:tag", alive=True)
            await store.release(lease)
            assert await unkeyed.read_claim("r1") == ClaimInfo(owner=None, alive=False)
