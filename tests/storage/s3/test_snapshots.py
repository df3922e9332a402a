"""S3 snapshots whose keys list them: one PUT per write, older manifest-listed ones still work.

The conformance suite covers the contract; these tests cover what the S3
layout adds: the requests a write makes, snapshots written the older way
(``snapshots/{id}`` listed by the manifest), one id per snapshot across
stores, entries too long for a key, and fencing.
"""

from __future__ import annotations

import functools
import uuid
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import anyio
import anyio.lowlevel
import msgspec
import pytest

from actorflow.errors import CheckpointNotFoundError, LeaseLostError, StorageError
from actorflow.storage._manifests import add_snapshot, snapshot_info
from actorflow.storage._records import RunManifest, RunStatus, Snapshot, SnapshotStatus
from actorflow.storage._sealing import Codec
from actorflow.storage._snapshot_names import entry_name
from tests.storage.factories_s3 import KEY, lost_at, open_s3_store, sibling

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable

    from actorflow.storage._records import SnapshotInfo
    from actorflow.storage.s3._store import S3Store
    from tests.storage.s3_servers import S3Server


@pytest.fixture(params=["seaweed_server", "moto_server"], ids=["seaweed", "moto"])
def server(request: pytest.FixtureRequest) -> S3Server:
    """Each S3-compatible server the store is tested against."""
    result: S3Server = request.getfixturevalue(request.param)
    return result


def manifest() -> RunManifest:
    return RunManifest(run_id="r1", workflow="wf", input=b"\x90", input_hash="h")


def snap(sid: str, position: int, **fields: Any) -> Snapshot:
    values: dict[str, Any] = {"created": 1.5, "trigger": "phase_end", "phase": "plan"}
    values.update(fields)
    return Snapshot(run_id="r1", snapshot_id=sid, position=position, **values)


def keys(store: S3Store, server: S3Server) -> list[str]:
    """The run's snapshot keys, as the server lists them."""
    prefix = store._objects.key("r1", "snapshots", "")
    listed = server.client().list_objects_v2(Bucket=server.bucket, Prefix=prefix)
    return [o["Key"][len(prefix) :] for o in listed.get("Contents", ())]


def manifest_etag(store: S3Store, server: S3Server) -> str:
    head = server.client().head_object(
        Bucket=server.bucket, Key=store._objects.key("r1", "manifest")
    )
    return str(head["ETag"])


class Requests:
    """The S3 operations a store sends, with their key (or prefix), while counting."""

    def __init__(self, store: S3Store) -> None:
        self._events = store._objects.wire._client.meta.events
        self.calls: list[tuple[str, str]] = []

    def _hook(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        self.calls.append((model.name, params.get("Key") or params.get("Prefix") or ""))

    def __enter__(self) -> Requests:
        self._events.register("provide-client-params.s3", self._hook)
        return self

    def __exit__(self, *_: object) -> None:
        self._events.unregister("provide-client-params.s3", self._hook)

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self.calls]


async def write_the_older_way(store: S3Store, s: Snapshot) -> SnapshotInfo:
    """What actorflow 0.1 wrote: ``snapshots/{id}``, then the manifest lists it."""
    sealed, raw = store.codec.dump_snapshot(s)
    info = snapshot_info(s, stored_size=len(sealed), raw_size=raw)
    key = store._objects.key(s.run_id, "snapshots", s.snapshot_id)
    await store._objects.put("write checkpoint", key, sealed, token=uuid.uuid4().hex)
    await store.update_run(s.run_id, lambda m: add_snapshot(m, info))
    return info


@pytest.fixture
async def store(server: S3Server) -> AsyncIterator[S3Store]:
    opened = open_s3_store(server)
    try:
        yield opened
    finally:
        await opened.aclose()


def name(info: SnapshotInfo) -> str:
    """The key name (after ``snapshots/``) that lists ``info``."""
    found = entry_name(info)
    assert found is not None
    return found


class TestRequests:
    async def test_a_snapshot_write_is_one_put_and_leaves_the_manifest_alone(
        self, store: S3Store, server: S3Server
    ) -> None:
        await store.create_run(manifest())
        first = await store.write_snapshot(snap("s0", 0))  # opens the connection
        etag = manifest_etag(store, server)
        with Requests(store) as sent:
            infos = [first, *[await store.write_snapshot(snap(f"s{i}", i)) for i in (1, 2)]]
        assert sent.names == ["PutObject", "PutObject"]
        assert all("/snapshots/" in key and "~" in key for _, key in sent.calls)
        assert manifest_etag(store, server) == etag
        assert (await store.read_run("r1")).snapshots == ()
        with Requests(store) as sent:
            assert await store.list_snapshots("r1") == infos
        assert sent.names == ["ListObjectsV2"]
        other = sibling(store, server)  # another process lists them from the keys alone
        assert await other.list_snapshots("r1") == infos
        assert await other.read_snapshot("r1", "s1") == snap("s1", 1)
        with Requests(other) as sent:
            assert await other.delete_snapshot("r1", "s1") == infos[1].stored_size
        assert sent.names == ["ListObjectsV2", "DeleteObjects"]
        assert manifest_etag(store, server) == etag
        assert await store.list_snapshots("r1") == [infos[0], infos[2]]
        for s in (store, other):
            await s.aclose()

    async def test_an_update_is_one_more_put_after_the_snapshot(
        self, store: S3Store, server: S3Server
    ) -> None:
        await store.create_run(manifest())
        await store.write_snapshot(snap("s0", 0))
        done = functools.partial(msgspec.structs.replace, status=RunStatus.COMPLETED)
        with Requests(store) as sent:
            info = await store.write_snapshot(snap("final", 3), update=done)
        # and the finished run leaves the index of unfinished runs
        assert sent.names == ["PutObject", "PutObject", "DeleteObjects"]
        assert sent.calls[0][1].endswith(name(info))
        assert sent.calls[1][1] == store._objects.key("r1", "manifest")
        fresh = sibling(store, server)
        assert (await fresh.read_run("r1")).status is RunStatus.COMPLETED
        assert [i.snapshot_id for i in await fresh.list_snapshots("r1")] == ["s0", "final"]
        for s in (store, fresh):
            await s.aclose()

    async def test_a_read_by_a_store_that_knows_the_key_is_one_get(
        self, store: S3Store, server: S3Server
    ) -> None:
        await store.create_run(manifest())
        await store.write_snapshot(snap("s0", 0))
        with Requests(store) as sent:
            await store.read_snapshot("r1", "s0")
        assert sent.names == ["GetObject"]
        other = sibling(store, server)
        assert not await other.is_owned("r1")  # opens the connection, sees the run
        with Requests(other) as sent:  # a store that has not listed them finds the key first
            await other.read_snapshot("r1", "s0")
        assert sent.names == ["ListObjectsV2", "GetObject"]
        for s in (store, other):
            await s.aclose()


class TestOlderSnapshots:
    async def test_manifest_listed_snapshots_still_list_read_and_delete(
        self, store: S3Store, server: S3Server
    ) -> None:
        await store.create_run(manifest())
        old = await write_the_older_way(store, snap("old", 1))
        new = await store.write_snapshot(snap("new", 2))
        assert sorted(keys(store, server)) == sorted(["old", name(new)])
        fresh = sibling(store, server)
        assert await fresh.list_snapshots("r1") == [old, new]
        assert await fresh.read_snapshot("r1", "old") == snap("old", 1)
        assert await fresh.delete_snapshot("r1", "old") == old.stored_size
        assert await store.list_snapshots("r1") == [new]
        (entry,) = (await store.read_run("r1")).snapshots
        assert (entry.snapshot_id, entry.status) == ("old", SnapshotStatus.DELETED)
        assert keys(store, server) == [name(new)]
        with pytest.raises(CheckpointNotFoundError):
            await fresh.read_snapshot("r1", "old")
        for s in (store, fresh):
            await s.aclose()

    async def test_a_self_listing_key_wins_over_the_manifest_for_one_id(
        self, store: S3Store, server: S3Server
    ) -> None:
        await store.create_run(manifest())
        await write_the_older_way(store, snap("s", 1))
        # The same id under a self-listing key too (as a race could leave it).
        newer = snap("s", 2, created=2.5)
        sealed, raw = store.codec.dump_snapshot(newer)
        info = snapshot_info(newer, stored_size=len(sealed), raw_size=raw)
        key = store._objects.key("r1", "snapshots", name(info))
        await store._objects.put("test", key, sealed, token="t")
        fresh = sibling(store, server)
        assert await fresh.list_snapshots("r1") == [info]
        assert await fresh.read_snapshot("r1", "s") == newer
        assert await fresh.delete_snapshot("r1", "s") > info.stored_size  # both objects go
        assert keys(store, server) == []
        assert await store.list_snapshots("r1") == []
        for s in (store, fresh):
            await s.aclose()

    async def test_a_manifest_entry_whose_object_is_gone_is_not_listed(
        self, store: S3Store, server: S3Server
    ) -> None:
        await store.create_run(manifest())
        await write_the_older_way(store, snap("old", 1))
        # 0.1 deleted the object first, then marked the entry: a crash in between.
        await store._objects.delete("test", [store._objects.key("r1", "snapshots", "old")])
        fresh = sibling(store, server)
        assert await fresh.list_snapshots("r1") == []
        with pytest.raises(CheckpointNotFoundError):
            await fresh.read_snapshot("r1", "old")
        await fresh.aclose()


class TestOneSnapshotPerId:
    async def test_the_same_snapshot_again_is_accepted_and_stored_once(
        self, store: S3Store, server: S3Server
    ) -> None:
        await store.create_run(manifest())
        info = await store.write_snapshot(snap("s", 1))
        assert await store.write_snapshot(snap("s", 1)) == info  # this store knows the key
        other = sibling(store, server)
        assert await other.write_snapshot(snap("s", 1)) == info  # another one lists first
        assert keys(store, server) == [name(info)]
        assert await other.list_snapshots("r1") == [info]
        for s in (store, other):
            await s.aclose()

    async def test_a_different_snapshot_under_a_used_id_is_refused(
        self, store: S3Store, server: S3Server
    ) -> None:
        await store.create_run(manifest())
        info = await store.write_snapshot(snap("s", 1))
        other = sibling(store, server)
        for writer in (store, other):
            with pytest.raises(StorageError, match="different checkpoint with id 's'"):
                await writer.write_snapshot(snap("s", 2, created=9.0))
        assert keys(store, server) == [name(info)]
        assert await other.list_snapshots("r1") == [info]
        for s in (store, other):
            await s.aclose()

    async def test_of_two_concurrent_writes_of_one_id_one_is_refused(
        self, store: S3Store, server: S3Server
    ) -> None:
        await store.create_run(manifest())
        outcomes: list[str] = []

        async def write(position: int) -> None:
            try:
                await store.write_snapshot(snap("s", position, created=float(position)))
                outcomes.append("written")
            except StorageError as exc:
                outcomes.append("refused" if "different checkpoint" in str(exc) else str(exc))

        async with anyio.create_task_group() as tg:
            for position in (1, 2):
                tg.start_soon(write, position)
        assert sorted(outcomes) == ["refused", "written"]
        assert len(keys(store, server)) == 1

    async def test_an_id_another_store_wrote_meanwhile_meets_the_condition(
        self, store: S3Store, server: S3Server
    ) -> None:
        await store.create_run(manifest())  # this store knows the run has no snapshots
        other = sibling(store, server)
        info = await other.write_snapshot(snap("s", 1))
        # Same entry, same key: If-None-Match refuses the PUT, and the object holds it.
        assert await store.write_snapshot(snap("s", 1)) == info
        assert keys(store, server) == [name(info)]
        for s in (store, other):
            await s.aclose()

    async def test_a_new_owner_lists_before_writing(self, store: S3Store, server: S3Server) -> None:
        await store.create_run(manifest())  # this store knows the run has no snapshots
        other = sibling(store, server)
        lease = await other.claim("r1", "other")
        await other.write_snapshot(snap("s", 1))
        await other.release(lease)
        await store.claim("r1", "me")  # epoch 2: someone owned it before
        with pytest.raises(StorageError, match="different checkpoint"):
            await store.write_snapshot(snap("s", 2, created=9.0))
        assert len(keys(store, server)) == 1
        for s in (store, other):
            await s.aclose()

    @pytest.mark.parametrize("moment", ["before-send", "after-call"])
    async def test_a_write_again_after_a_lost_answer_finds_what_landed(
        self, store: S3Store, server: S3Server, moment: str
    ) -> None:
        await store.create_run(manifest())
        await store.write_snapshot(snap("s0", 0))  # opens the connection
        with lost_at(store, moment) as scope:
            await store.write_snapshot(snap("s1", 1))
        assert scope.cancelled_caught
        assert len(keys(store, server)) == (1 if moment == "before-send" else 2)
        if moment == "after-call":  # it landed: the id is taken
            with pytest.raises(StorageError, match="different checkpoint"):
                await store.write_snapshot(snap("s1", 7))
        info = await store.write_snapshot(snap("s1", 1))
        assert [i.snapshot_id for i in await store.list_snapshots("r1")] == ["s0", "s1"]
        assert name(info) in keys(store, server)
        await store.aclose()


class TestLongEntries:
    @pytest.mark.parametrize("phase", ["x" * 250, ""])
    async def test_an_entry_that_does_not_fit_a_key_is_listed_by_the_manifest(
        self, store: S3Store, server: S3Server, phase: str
    ) -> None:
        await store.create_run(manifest())
        info = await store.write_snapshot(snap("s", 1, phase=phase))
        assert keys(store, server) == ["s"]
        assert (await store.read_run("r1")).snapshots == (info,)
        fresh = sibling(store, server)
        assert await fresh.list_snapshots("r1") == [info]
        assert await fresh.read_snapshot("r1", "s") == snap("s", 1, phase=phase)
        with pytest.raises(StorageError, match="different checkpoint"):
            await fresh.write_snapshot(snap("s", 2, phase=phase))
        assert await fresh.delete_snapshot("r1", "s") == info.stored_size
        assert await store.list_snapshots("r1") == []
        assert keys(store, server) == []
        for s in (store, fresh):
            await s.aclose()

    @pytest.mark.parametrize(
        ("phase", "trigger"),
        [
            (None, "steps"),
            ("a_b~c", "manual:deploy ~ v2_final"),
            ("résumé/#1 %41 +=@,", "manual:100% sure"),
        ],
    )
    async def test_any_phase_and_trigger_round_trip_through_a_key(
        self, store: S3Store, server: S3Server, phase: str | None, trigger: str
    ) -> None:
        await store.create_run(manifest())
        s = snap("ck_1.a", 7, phase=phase, trigger=trigger, created=1769335300.123456)
        info = await store.write_snapshot(s)
        assert keys(store, server) == [name(info)]
        fresh = sibling(store, server)
        assert await fresh.list_snapshots("r1") == [info]
        assert await fresh.read_snapshot("r1", "ck_1.a") == s
        for x in (store, fresh):
            await x.aclose()


class TestSealedKeys:
    async def test_with_encryption_keys_hold_no_phase_or_reason_and_list_them(
        self, server: S3Server
    ) -> None:
        sealed = open_s3_store(server, Codec(keys={"k1": KEY}))
        await sealed.create_run(manifest())
        s = snap("ck-1", 3, phase="Nightingale_~%41/..", trigger="manual:ACME merger ~ 100%")
        info = await sealed.write_snapshot(s)
        (key,) = keys(sealed, server)
        for text in (key, unquote(key)):
            assert "nightingale" not in text.lower(), key
            assert "acme" not in text.lower(), key
        assert key.startswith("000000003_")
        assert "_sealed_ck-1~k1~" in key
        fresh = sibling(sealed, server)
        assert await fresh.list_snapshots("r1") == [info]
        assert (info.phase, info.trigger) == (s.phase, s.trigger)
        assert await fresh.read_snapshot("r1", "ck-1") == s
        for x in (sealed, fresh):
            await x.aclose()


class TestFencing:
    @pytest.mark.parametrize("operation", ["write", "delete"])
    async def test_a_stale_owner_can_neither_write_nor_delete_snapshots(
        self, server: S3Server, operation: str
    ) -> None:
        old = open_s3_store(server, lease_ttl=0.0)  # its lease lapses at once
        new = sibling(old, server, lease_ttl=60.0)
        await old.create_run(manifest())
        await old.claim("r1", "old")
        await new.claim("r1", "new")
        kept = await new.write_snapshot(snap("s0", 0))
        attempts: dict[str, Callable[[], Awaitable[object]]] = {
            "write": lambda: old.write_snapshot(snap("s1", 1)),
            "delete": lambda: old.delete_snapshot("r1", "s0"),
        }
        with pytest.raises(LeaseLostError):
            await attempts[operation]()
        assert await new.list_snapshots("r1") == [kept]
        assert keys(new, server) == [name(kept)]
        for s in (old, new):
            await s.aclose()
