"""What only the S3 store has: conditional writes, leases, the wire, a real server.

The conformance suite (test_conformance.py) covers the Store contract on S3;
these tests cover races between processes (several stores on one bucket),
fencing, cancellation, server restarts and the errors a user meets first.
"""

from __future__ import annotations

import math
import subprocess
import sys
import threading
import uuid
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel
import msgspec
import pytest
from structlog.testing import capture_logs

from actorflow.errors import LeaseLostError, RunLockedError, StorageError, StoreUnavailableError
from actorflow.storage._protocol import RetentionPolicy
from actorflow.storage._records import RunManifest, RunStatus, Snapshot, StepRecord
from actorflow.storage._sealing import Codec
from actorflow.storage.s3._store import S3Store
from actorflow.storage.s3._wire import NotFound, PreconditionFailed
from tests.storage.factories_s3 import lost_at, open_s3_store, sibling, unreachable_s3_store
from tests.storage.s3_servers import ACCESS_KEY

if TYPE_CHECKING:
    from tests.storage.s3_servers import S3Server


def manifest(run_id: str = "run-1", **kw: Any) -> RunManifest:
    return RunManifest(run_id=run_id, workflow="wf", input=b"\x90", input_hash="h", **kw)


def step(i: int) -> StepRecord:
    return StepRecord(step_id=f"main/{i}", kind="ask", target="a", result=b"r%d" % i)


@pytest.fixture(params=["seaweed_server", "moto_server"], ids=["seaweed", "moto"])
def server(request: pytest.FixtureRequest) -> S3Server:
    """Each S3-compatible server the store is tested against."""
    result: S3Server = request.getfixturevalue(request.param)
    return result


@pytest.fixture
def seaweed(seaweed_server: S3Server) -> S3Server:
    """SeaweedFS alone: it checks signatures and survives restarts."""
    return seaweed_server


class TestPackaging:
    def test_importing_storage_does_not_import_aioboto3(self) -> None:
        code = "import sys, actorflow.storage; assert 'aioboto3' not in sys.modules"
        subprocess.run([sys.executable, "-c", code], check=True, timeout=60)

    def test_missing_aioboto3_names_the_extra(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setitem(sys.modules, "aioboto3", None)
        with pytest.raises(StoreUnavailableError, match=r"pip install 'actorflow\[s3\]'"):
            S3Store("bucket")


class TestExit:
    @pytest.mark.parametrize("backend", ["asyncio", "trio"])
    def test_a_store_never_closed_does_not_keep_the_process_alive(
        self, server: S3Server, backend: str
    ) -> None:
        args = [server.url, server.bucket, server.access_key, server.secret_key]
        prefix = f"t-{uuid.uuid4().hex[:12]}"
        try:
            done = subprocess.run(
                [sys.executable, "-m", "tests.storage.s3.exit_child", backend, *args, prefix],
                capture_output=True,
                timeout=60,  # a bound, not a timing assertion: it exits in about a second
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            pytest.fail(f"the process did not exit after using the store: {exc.stdout!r}")
        assert done.stdout == b"used\n", done.stderr.decode()
        assert done.returncode == 0, done.stderr.decode()


class TestFirstContact:
    async def test_missing_bucket_tells_the_user_to_create_it(self, seaweed: S3Server) -> None:
        store = S3Store(
            "no-such-bucket",
            endpoint_url=seaweed.url,
            region_name="us-east-1",
            aws_access_key_id=seaweed.access_key,
            aws_secret_access_key=seaweed.secret_key,
        )
        with pytest.raises(StoreUnavailableError, match=r"does not exist; create it first"):
            await store.read_log("run-1")
        await store.aclose()

    @pytest.mark.parametrize("key_id", [ACCESS_KEY, "somebody-else"])
    async def test_bad_credentials_are_refused_clearly(
        self, seaweed: S3Server, key_id: str
    ) -> None:
        store = S3Store(
            seaweed.bucket,
            endpoint_url=seaweed.url,
            region_name="us-east-1",
            aws_access_key_id=key_id,
            aws_secret_access_key="wrong-secret",
        )
        with pytest.raises(StoreUnavailableError, match="refused the credentials"):
            await store.create_run(manifest())
        await store.aclose()

    async def test_unreachable_endpoint_is_retried_then_reported(self) -> None:
        store = unreachable_s3_store(max_attempts=3)
        with pytest.raises(StoreUnavailableError, match="unavailable after 3 attempts"):
            await store.read_run("run-1")
        await store.aclose()


def client_error(code: str, status: int) -> Exception:
    from botocore.exceptions import ClientError

    meta = {"HTTPStatusCode": status}
    error: Exception = ClientError(
        {"Error": {"Code": code, "Message": "x"}, "ResponseMetadata": meta}, "PutObject"
    )
    return error


class TestRetryPolicy:
    @pytest.mark.parametrize(
        ("code", "status"),
        [("SlowDown", 503), ("InternalError", 500), ("TooManyRequests", 429), ("", 502)],
    )
    def test_throttling_and_server_errors_are_retried(self, code: str, status: int) -> None:
        wire = S3Store("bucket", endpoint_url="http://127.0.0.1:1")._objects.wire
        error = client_error(code, status)
        outcome = wire._classify("append", error)
        assert not isinstance(outcome, Exception)
        assert isinstance(outcome.final, StoreUnavailableError)

    @pytest.mark.parametrize(
        ("code", "status", "kind"),
        [
            ("PreconditionFailed", 412, PreconditionFailed),
            ("NoSuchKey", 404, NotFound),
            ("NoSuchBucket", 404, StoreUnavailableError),
            ("SignatureDoesNotMatch", 403, StoreUnavailableError),
            ("InvalidArgument", 400, StorageError),
        ],
    )
    def test_other_answers_are_final(self, code: str, status: int, kind: type) -> None:
        wire = S3Store("bucket", endpoint_url="http://127.0.0.1:1")._objects.wire
        error = client_error(code, status)
        outcome = wire._classify("append", error)
        assert isinstance(outcome, kind)
        assert isinstance(outcome, Exception)
        assert outcome.__cause__ is error


class TestConditionalWrites:
    async def test_many_concurrent_creators_exactly_one_wins(self, server: S3Server) -> None:
        first = open_s3_store(server)
        stores = [first] + [sibling(first, server) for _ in range(7)]
        won: list[int] = []

        async def create(i: int) -> None:
            stored, created = await stores[i].create_run(manifest(code_version=str(i)))
            if created:
                won.append(i)
            else:
                assert stored.code_version != str(i)

        async with anyio.create_task_group() as tg:
            for i in range(len(stores)):
                tg.start_soon(create, i)
        assert len(won) == 1
        assert (await first.read_run("run-1")).code_version == str(won[0])
        for s in stores:
            await s.aclose()

    async def test_many_concurrent_claimers_exactly_one_owns(self, server: S3Server) -> None:
        first = open_s3_store(server)
        await first.create_run(manifest())
        stores = [first] + [sibling(first, server) for _ in range(7)]
        owners: list[str] = []

        async def claim(i: int) -> None:
            try:
                owners.append((await stores[i].claim("run-1", f"owner-{i}")).owner)
            except RunLockedError:
                pass

        async with anyio.create_task_group() as tg:
            for i in range(len(stores)):
                tg.start_soon(claim, i)
        assert len(owners) == 1
        for s in stores:
            await s.aclose()

    async def test_appenders_in_many_processes_lose_and_repeat_nothing(
        self, server: S3Server
    ) -> None:
        first = open_s3_store(server)
        await first.create_run(manifest())
        stores = [first] + [sibling(first, server) for _ in range(5)]

        async def writer(w: int) -> None:
            for i in range(4):
                await stores[w].append("run-1", [step(w * 10 + i)])

        async with anyio.create_task_group() as tg:
            for w in range(len(stores)):
                tg.start_soon(writer, w)
        log = await first.read_log("run-1")
        ids = [int(r.step_id[5:]) for r in log if isinstance(r, StepRecord)]
        assert sorted(ids) == sorted(w * 10 + i for w in range(6) for i in range(4))
        for w in range(6):  # each writer's records stay in its order
            assert [x for x in ids if x // 10 == w] == [w * 10 + i for i in range(4)]
        for s in stores:
            await s.aclose()

    async def test_a_retried_write_finds_its_own_earlier_attempt(self, server: S3Server) -> None:
        store = open_s3_store(server)
        key = store._objects.key("run-1", "probe")
        token = uuid.uuid4().hex
        etag = await store._objects.put("probe", key, b"one", token=token)
        # The same write again (a retry after a lost response): it landed, so it succeeded.
        assert await store._objects.put("probe", key, b"one", token=token) == etag
        with pytest.raises(PreconditionFailed):
            await store._objects.put("probe", key, b"two", token=uuid.uuid4().hex)
        await store.aclose()

    async def test_listing_follows_pagination(self, server: S3Server) -> None:
        store = open_s3_store(server)
        await store.create_run(manifest())
        store._objects.page_size = 2
        for i in range(7):
            await store.append("run-1", [step(i)])
        assert await store.read_log("run-1") == [step(i) for i in range(7)]
        assert await store.log_length("run-1") == 7
        await store.aclose()


class TestDamage:
    """One object that does not decode never hides the other runs."""

    async def test_unreadable_entries_are_skipped_with_a_warning_and_named(
        self, server: S3Server
    ) -> None:
        store = open_s3_store(server)
        await store.create_run(manifest("good"))
        await store.create_run(manifest("bad"))
        await store.create_run(manifest("orphan"))
        await store.append("orphan", [step(0)])
        root = f"{store.prefix}runs/"
        client = server.client()
        sealed = client.get_object(Bucket=server.bucket, Key=f"{root}bad/manifest")["Body"].read()
        damaged = sealed[:40] + bytes([sealed[40] ^ 0xFF]) + sealed[41:]
        client.put_object(Bucket=server.bucket, Key=f"{root}bad/manifest", Body=damaged)
        client.put_object(Bucket=server.bucket, Key=f"{root}bad dir/x", Body=b"stray")
        client.delete_object(Bucket=server.bucket, Key=f"{root}orphan/manifest")
        other = sibling(store, server)  # remembers nothing of these runs
        with capture_logs() as logs:
            assert [m.run_id for m in await other.list_runs()] == ["good"]
        url = f"s3://{server.bucket}/{root}"
        warned = {e["location"] for e in logs if e["event"] == "run_unreadable"}
        assert warned == {f"{url}bad/manifest", f"{url}bad dir", f"{url}orphan/"}
        found = {e.location: e for e in await other.list_unreadable()}
        assert sorted(found) == sorted(warned)
        assert found[f"{url}bad/manifest"].run_id == "bad"
        assert "without a manifest" in found[f"{url}orphan/"].problem
        assert found[f"{url}bad dir"].run_id is None
        await store.aclose()
        await other.aclose()

    async def test_a_foreign_object_among_blobs_is_skipped_not_fatal(
        self, server: S3Server
    ) -> None:
        store = open_s3_store(server)
        await store.create_run(manifest("r1", status=RunStatus.COMPLETED))
        await store.put_blob("r1", b"an unreferenced state")
        key = f"{store.prefix}runs/r1/blobs/notes.txt"
        server.client().put_object(Bucket=server.bucket, Key=key, Body=b"mine")
        with capture_logs() as logs:
            report = await store.prune(RetentionPolicy())
        assert report.blobs_deleted == 1
        assert [e["location"] for e in logs if e["event"] == "blob_foreign"] == [
            f"s3://{server.bucket}/{key}"
        ]
        assert server.client().head_object(Bucket=server.bucket, Key=key)["ContentLength"] == 4
        await store.aclose()


class TestLeases:
    async def test_takeover_fences_the_stale_owner(self, server: S3Server) -> None:
        # lease_ttl=0: the old owner's lease lapses at once, as if it had stalled.
        old = open_s3_store(server, lease_ttl=0.0)
        new = sibling(old, server, lease_ttl=60.0)
        await old.create_run(manifest())
        stale = await old.claim("run-1", "old")
        lease = await new.claim("run-1", "new")
        assert lease.epoch == stale.epoch + 1
        assert await new.append("run-1", [step(0)]) == 2  # after its take-over record
        with pytest.raises(LeaseLostError, match="taken over"):
            await old.append("run-1", [step(99)])
        with pytest.raises(LeaseLostError):
            await old.renew(stale)
        await old.release(stale)  # releasing a lost lease leaves the new owner alone
        assert await new.is_owned("run-1")
        assert [r for r in await new.read_log("run-1") if isinstance(r, StepRecord)] == [step(0)]
        for s in (old, new):
            await s.aclose()

    async def test_a_stale_owner_with_a_slow_clock_loses_the_race_for_a_position(
        self, server: S3Server
    ) -> None:
        old = open_s3_store(server, lease_ttl=0.0)
        new = sibling(old, server)
        await old.create_run(manifest())
        stale = await old.claim("run-1", "old")
        await old.append("run-1", [step(0)])  # renews first: its lease had lapsed
        await new.claim("run-1", "new")
        await new.append("run-1", [step(1)])
        # The old owner believes its lease is still good (its clock lags) and
        # writes at the position it remembers: the position is taken, so it is fenced.
        old._leases._held["run-1"] = msgspec.structs.replace(stale, expires=math.inf)
        with pytest.raises(LeaseLostError):
            await old.append("run-1", [step(99)])
        log = await new.read_log("run-1")
        assert [r for r in log if isinstance(r, StepRecord)] == [step(0), step(1)]
        for s in (old, new):
            await s.aclose()


class TestCancellation:
    @pytest.mark.parametrize("moment", ["before-send", "after-call"])
    async def test_a_cancelled_append_is_never_lost_track_of(
        self, server: S3Server, moment: str
    ) -> None:
        """Cancel an append before its request leaves, or after the server stored it."""
        store = open_s3_store(server)
        await store.create_run(manifest())
        assert await store.append("run-1", [step(0)]) == 1
        with lost_at(store, moment) as scope:
            await store.append("run-1", [step(1)])
        assert scope.cancelled_caught
        landed = [step(0)] if moment == "before-send" else [step(0), step(1)]
        assert await store.read_log("run-1") == landed
        assert await store.append("run-1", [step(2)]) == len(landed) + 1
        assert await store.read_log("run-1") == [*landed, step(2)]
        await store.aclose()


class TestRestart:
    async def test_a_server_crash_loses_no_acknowledged_object(self, seaweed: S3Server) -> None:
        store = open_s3_store(seaweed, max_attempts=60, backoff_max=0.25)
        await store.create_run(manifest())
        acked: list[int] = []
        blobs: list[str] = []
        before, after = anyio.Event(), anyio.Event()
        restarted = anyio.Event()

        async def writer() -> None:
            i = 0
            while not (restarted.is_set() and len(acked) >= 20):
                await store.append("run-1", [step(i)])
                blobs.append(await store.put_blob("run-1", b"state %d" % i))
                acked.append(i)
                i += 1
                if i == 10:
                    before.set()
            after.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(writer)
            await before.wait()
            await anyio.to_thread.run_sync(seaweed.restart)  # SIGKILL, then start again
            restarted.set()
            await after.wait()
        await store.write_snapshot(
            Snapshot(
                run_id="run-1", snapshot_id="s1", position=len(acked), created=1.0, trigger="t"
            )
        )
        await store.aclose()
        fresh = sibling(store, seaweed)
        assert await fresh.read_log("run-1") == [step(i) for i in acked]
        for i, ref in zip(acked, blobs, strict=True):
            assert await fresh.get_blob("run-1", ref) == b"state %d" % i
        assert (await fresh.read_snapshot("run-1", "s1")).position == len(acked)
        await fresh.aclose()


class TestFormat:
    async def test_objects_are_sealed_like_every_other_store(self, server: S3Server) -> None:
        codec = Codec(compression="gzip", compress_above=16)
        store = open_s3_store(server, codec)
        await store.create_run(manifest())
        ref = await store.put_blob("run-1", b"shared state " * 10)
        raw = (
            server.client()
            .get_object(Bucket=server.bucket, Key=store._objects.key("run-1", "blobs", ref))["Body"]
            .read()
        )
        # Any store's codec opens it: the bytes are the codec's envelope, nothing S3-specific.
        assert Codec().load_blob(raw, run_id="run-1", address=ref, location="x") == (
            b"shared state " * 10
        )
        await store.aclose()

    async def test_states_are_sealed_off_the_event_loop_thread(self, server: S3Server) -> None:
        threads: list[int] = []

        class Noting(Codec):
            def dump_blob(self, data: bytes, *, run_id: str) -> tuple[str, bytes]:
                threads.append(threading.get_ident())
                return super().dump_blob(data, run_id=run_id)

            def dump_snapshot(self, snapshot: Snapshot) -> tuple[bytes, int]:
                threads.append(threading.get_ident())
                return super().dump_snapshot(snapshot)

        store = open_s3_store(server, Noting())
        await store.create_run(manifest())
        ref = await store.put_blob("run-1", b"state " * 2000)
        await store.write_snapshot(
            Snapshot(run_id="run-1", snapshot_id="s", position=0, created=1.0, trigger="manual")
        )
        assert len(threads) == 2
        assert threading.get_ident() not in threads
        assert await store.get_blob("run-1", ref) == b"state " * 2000
        await store.aclose()


class TestLongLived:
    async def test_a_released_run_leaves_nothing_cached(self, seaweed: S3Server) -> None:
        store = open_s3_store(seaweed)
        for i in range(5):
            run_id = f"lived-{i}"
            await store.create_run(manifest(run_id))
            lease = await store.claim(run_id, "me")
            await store.append(run_id, [step(0)])
            await store.write_snapshot(
                Snapshot(run_id=run_id, snapshot_id="s1", position=1, created=1.0, trigger="t")
            )
            await store.update_run(run_id, lambda m: msgspec.structs.replace(m, attempt=1))
            await store.release(lease)
        # a long-lived store kept a manifest, a listing and locks for every run it ran
        assert store._manifests._cache == {}
        assert store._manifests._locks == {}
        assert store._log._next == {}
        assert store._log._locks == {}
        assert store._snapshots._known == {}
        assert store._snapshots._locks == {}

        # and what it no longer caches it reads afresh: another process's changes count
        other = sibling(store, seaweed)
        lease = await other.claim("lived-2", "other")
        await other.append("lived-2", [step(1)])
        await other.update_run("lived-2", lambda m: msgspec.structs.replace(m, attempt=7))
        await other.release(lease)
        await other.aclose()
        lease = await store.claim("lived-2", "me")
        # step(0), other's take-over record, step(1), this claim's take-over record
        assert await store.append("lived-2", [step(2)]) == 5
        changed = await store.update_run(
            "lived-2", lambda m: msgspec.structs.replace(m, attempt=m.attempt + 1)
        )
        assert changed.attempt == 8
        with pytest.raises(StorageError, match="s1"):  # an id is still written once
            await store.write_snapshot(
                Snapshot(run_id="lived-2", snapshot_id="s1", position=3, created=2.0, trigger="t")
            )
        await store.release(lease)
        await store.aclose()
