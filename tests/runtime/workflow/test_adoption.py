"""Workers that adopt runs: ``Runtime(adopt_orphans=...)``, ``submit`` and the run index.

A worker finds runs through its store's index of unfinished runs, takes the
orphaned, queued and resumable-paused ones, and leaves the rest alone
without spending their recovery attempts: other workflows and code
versions, classes it has not imported, data a newer actorflow wrote.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import anyio
import msgspec
import pytest

from actorflow import AdoptionPolicy, Orchestrator, RunContext, Runtime, RuntimeConfig
from actorflow.errors import (
    ConfigurationError,
    LeaseLostError,
    NewerFormatError,
    RunInputMismatchError,
    RunPaused,
    StoreUnavailableError,
)
from actorflow.runtime.workflow._adoption import ADOPTED, Adopted
from actorflow.storage import (
    FORMAT_VERSION,
    EventRecord,
    FileStore,
    MemoryStore,
    RunIndex,
    RunStatus,
    Snapshot,
    SqliteStore,
    StepRecord,
)
from actorflow.storage._envelope import Kind
from tests.runtime.workflow.signal_child import Fix
from tests.storage.factories_s3 import open_s3_store, unreachable_s3_store

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from pathlib import Path

    from actorflow.storage import Lease, Store
    from actorflow.storage._records import RunManifest

FAST = AdoptionPolicy(poll_interval=0.05, recheck_interval=0.05, backoff=0.01, max_backoff=0.05)
"""Looks often: the tests wait on run states, and a slow look only makes them slower."""


class Twice(Orchestrator):
    __actorflow_name__ = "tests.adoption.Twice"

    async def run(self, ctx: RunContext, n: int) -> int:
        await ctx.now()
        await ctx.now()
        return n * 2


class Elsewhere(Orchestrator):
    __actorflow_name__ = "tests.adoption.Elsewhere"

    async def run(self, ctx: RunContext, n: int) -> int:
        return n


class WaitsForFix(Orchestrator):
    __actorflow_name__ = "tests.adoption.WaitsForFix"

    async def run(self, ctx: RunContext, _: None) -> int:
        fix = await ctx.wait_for(Fix, pause=True)
        return fix.n


class WaitsInPlace(Orchestrator):
    __actorflow_name__ = "tests.adoption.WaitsInPlace"

    async def run(self, ctx: RunContext, _: None) -> int:
        fix = await ctx.wait_for(Fix)  # live all the while: its lease is renewed
        return fix.n


@pytest.fixture(params=["memory", "file", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    if request.param == "sqlite":
        return SqliteStore(tmp_path / "store.db")
    return MemoryStore() if request.param == "memory" else FileStore(tmp_path / "store")


async def until(check: Callable[[], Awaitable[bool]], what: str) -> None:
    """Poll ``check()`` until true; the bound only turns a hang into a failure naming ``what``."""
    try:
        with anyio.fail_after(30):
            # another task (or process) changes what is checked: nothing to wait on but that
            while not await check():  # noqa: ASYNC110
                await anyio.sleep(0.01)
    except TimeoutError:
        pytest.fail(f"never happened: {what}")


async def statuses(store: Store, *run_ids: str) -> list[RunStatus]:
    return [(await store.read_run(r)).status for r in run_ids]


async def test_a_worker_starts_submitted_runs(store: Store) -> None:
    async with Runtime(store=store) as client:
        ids = [await client.submit(Twice, n) for n in range(4)]
        assert await statuses(store, *ids) == [RunStatus.QUEUED] * 4
        assert sorted(await store.list_unfinished()) == sorted(ids)  # type: ignore[attr-defined]
    async with Runtime(store=store, adopt_orphans=FAST) as worker:

        async def done() -> bool:
            return all(s is RunStatus.COMPLETED for s in await statuses(store, *ids))

        await until(done, "every submitted run completed")
        assert [await worker.result(r) for r in ids] == [0, 2, 4, 6]
    for run_id in ids:
        manifest = await store.read_run(run_id)
        assert manifest.attempt == 0  # a first start spends no recovery attempt
        log = await store.read_log(run_id)
        adopted = [r for r in log if isinstance(r, EventRecord) and r.kind == ADOPTED]
        assert len(adopted) == 1
        assert adopted[0].data is not None
        assert msgspec.msgpack.decode(adopted[0].data, type=Adopted).owner == worker.owner
    assert await store.list_unfinished() == []  # type: ignore[attr-defined]


async def test_submit_is_idempotent_and_refuses_another_input(store: Store) -> None:
    async with Runtime(store=store) as client:
        run_id = await client.submit(Twice, 1, run_id="same")
        assert await client.submit(Twice, 1, run_id="same") == run_id
        with pytest.raises(RunInputMismatchError):
            await client.submit(Twice, 2, run_id="same")


async def test_an_interrupted_run_is_adopted_and_counts_one_attempt(store: Store) -> None:
    async with Runtime(store=store) as client:
        run_id = await client.submit(Twice, 5)
    # an owner that died: running, no claim held
    await store.update_run(
        run_id, lambda m: msgspec.structs.replace(m, status=RunStatus.RUNNING, owner="dead:1:x")
    )
    async with Runtime(store=store, adopt_orphans=FAST) as worker:

        async def done() -> bool:
            return (await store.read_run(run_id)).status is RunStatus.COMPLETED

        await until(done, "the orphan completed")
        assert await worker.result(run_id) == 10
    assert (await store.read_run(run_id)).attempt == 1


async def test_a_worker_leaves_other_workflows_and_code_versions_alone(store: Store) -> None:
    async with Runtime(store=store, config=RuntimeConfig(code_version="v1")) as v1:
        mine = await v1.submit(Twice, 1)
        other_flow = await v1.submit(Elsewhere, 1)
    async with Runtime(store=store, config=RuntimeConfig(code_version="v2")) as v2:
        other_version = await v2.submit(Twice, 2)
    policy = msgspec.structs.replace(
        FAST, workflows=(Twice.__actorflow_name__,), code_versions=("v1",)
    )
    async with Runtime(store=store, adopt_orphans=policy):

        async def done() -> bool:
            return (await store.read_run(mine)).status is RunStatus.COMPLETED

        await until(done, "the run it may take completed")
        # it had many looks at the others meanwhile
        assert await statuses(store, other_flow, other_version) == [RunStatus.QUEUED] * 2


async def test_a_run_whose_class_is_not_imported_is_left_alone(store: Store) -> None:
    async with Runtime(store=store) as client:
        lost = await client.submit(Twice, 3)
        known = await client.submit(Elsewhere, 3)

    def unknown(m: RunManifest) -> RunManifest:
        return msgspec.structs.replace(m, workflow="nowhere.NotImported")

    await store.update_run(lost, unknown)
    async with Runtime(store=store, adopt_orphans=FAST):

        async def done() -> bool:
            return (await store.read_run(known)).status is RunStatus.COMPLETED

        await until(done, "the run it can import completed")
    manifest = await store.read_run(lost)
    assert (manifest.status, manifest.attempt) == (RunStatus.QUEUED, 0)


def _seal_raw(
    store: FileStore | MemoryStore, payload: dict[str, object], kind: Kind, run_id: str, slot: str
) -> bytes:
    """``payload`` sealed as the store seals what it writes, whatever its shape."""
    return store.codec.seal(msgspec.msgpack.encode(payload), kind=kind, run_id=run_id, slot=slot)


async def test_a_status_a_newer_actorflow_wrote_raises_newer_format_and_is_left_alone(
    tmp_path: Path,
) -> None:
    store = FileStore(tmp_path / "store")
    async with Runtime(store=store) as client:
        future = await client.submit(Twice, 1)
        fine = await client.submit(Twice, 2)
    manifest = msgspec.to_builtins(await store.read_run(future))
    manifest["status"] = "hibernating"
    manifest["tag"] = "manifest"
    sealed = _seal_raw(store, manifest, Kind.MANIFEST, future, "manifest")
    (tmp_path / "store" / "runs" / future / "manifest").write_bytes(sealed)
    with pytest.raises(NewerFormatError, match="newer actorflow"):
        await store.read_run(future)
    async with Runtime(store=store, adopt_orphans=FAST):

        async def done() -> bool:
            return (await store.read_run(fine)).status is RunStatus.COMPLETED

        await until(done, "the readable run completed")
    assert (tmp_path / "store" / "runs" / future / "manifest").read_bytes() == sealed  # untouched
    await store.aclose()


async def assert_given_back(store: MemoryStore, run_id: str) -> None:
    """An orphan a worker tries and gives back: left interrupted, its attempt returned."""
    await store.update_run(
        run_id, lambda m: msgspec.structs.replace(m, status=RunStatus.INTERRUPTED)
    )
    async with Runtime(store=store, adopt_orphans=FAST) as worker:

        async def tried() -> bool:
            return worker._runs.adopter is not None and bool(worker._runs.adopter._failures)

        await until(tried, "the worker tried the run")
    manifest = await store.read_run(run_id)
    assert manifest.status is RunStatus.INTERRUPTED
    assert manifest.attempt == 0  # the attempt it took was given back


async def test_a_record_a_newer_actorflow_wrote_gives_the_run_back_and_the_attempt_too() -> None:
    store = MemoryStore()
    async with Runtime(store=store) as client:
        run_id = await client.submit(Twice, 1)
    await store.append(run_id, [StepRecord(step_id="0", kind="now", result=b"\x01")])
    # a record of a type this actorflow does not know, sealed as a newer one would seal it
    newer = _seal_raw(store, {"tag": "hologram", "x": 1}, Kind.LOG_RECORD, run_id, "log/1")
    store._runs[run_id].log.append(newer)  # no public way to write what no writer here can
    with pytest.raises(NewerFormatError):
        await store.read_log(run_id)
    await assert_given_back(store, run_id)
    assert await store.log_length(run_id) == 2  # nothing written, nothing cut


async def test_a_snapshot_a_newer_actorflow_wrote_gives_the_run_back_not_an_older_replay() -> None:
    """A newer snapshot format may hold part of the run in a field this code lacks: the
    worker neither reads it as far as it goes nor falls back to the log."""
    store = MemoryStore()
    async with Runtime(store=store) as client:
        run_id = await client.submit(Twice, 1)
    await store.append(run_id, [StepRecord(step_id="0", kind="now", result=b"\x01")])
    newer = Snapshot(
        run_id=run_id,
        snapshot_id="0001-p1",
        position=1,
        created=1.0,
        trigger="phase_end",
        format_version=FORMAT_VERSION + 1,
    )
    await store.write_snapshot(newer)
    await assert_given_back(store, run_id)
    assert await store.log_length(run_id) == 1  # nothing written


async def test_a_paused_run_is_adopted_once_its_signal_arrives(store: Store) -> None:
    async with Runtime(store=store) as client:
        handle = await client.start(WaitsForFix, None)
        await handle.wait()
        assert handle.status is RunStatus.PAUSED
    async with Runtime(store=store, adopt_orphans=FAST) as worker:
        assert await statuses(store, handle.run_id) == [RunStatus.PAUSED]
        await worker.signal(handle.run_id, Fix(7))

        async def done() -> bool:
            return (await store.read_run(handle.run_id)).status is RunStatus.COMPLETED

        await until(done, "the woken run completed")
        assert await worker.result(handle.run_id) == 7


async def test_adopt_now_looks_at_once() -> None:
    store = MemoryStore()
    slow = msgspec.structs.replace(FAST, poll_interval=3600.0, reindex_interval=None)
    async with Runtime(store=store, adopt_orphans=slow) as worker:
        await anyio.wait_all_tasks_blocked()  # its first look found nothing
        async with Runtime(store=store) as client:
            run_id = await client.submit(Twice, 4)
        worker.adopt_now()

        async def done() -> bool:
            return (await store.read_run(run_id)).status is RunStatus.COMPLETED

        await until(done, "the run submitted after the first look completed")


async def test_a_store_without_an_index_is_refused() -> None:
    class NoIndex:
        """A store that forwards everything but the index."""

        def __init__(self) -> None:
            self._inner = MemoryStore()

        def __getattr__(self, name: str) -> object:
            if name in ("list_unfinished", "unindex", "reindex"):
                raise AttributeError(name)
            return getattr(self._inner, name)

    with pytest.raises(ConfigurationError, match="index of unfinished runs"):
        async with Runtime(store=NoIndex(), adopt_orphans=True):  # type: ignore[arg-type]
            pass


@pytest.mark.parametrize(
    ("options", "option"),
    [
        ({"max_concurrent": 0}, "max_concurrent"),
        ({"poll_interval": 0.0}, "poll_interval"),
        ({"backoff": float("nan")}, "backoff"),
        ({"reindex_interval": -1.0}, "reindex_interval"),
    ],
)
def test_a_bad_policy_is_refused_by_name(options: dict[str, object], option: str) -> None:
    with pytest.raises(ConfigurationError, match=option):
        AdoptionPolicy(**options)  # type: ignore[arg-type]


# --- the index each store keeps --------------------------------------------------


@pytest.fixture(params=["memory", "file", "s3", "sqlite"])
def indexed(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], Store]:
    """Opens a store object (another process, in effect) on one location."""
    if request.param == "memory":
        memory = MemoryStore()
        return lambda: memory
    if request.param == "file":
        return lambda: FileStore(tmp_path / "store")
    if request.param == "sqlite":
        return lambda: SqliteStore(tmp_path / "store.db")
    server = request.getfixturevalue("seaweed_server")
    prefix = f"t-{uuid.uuid4().hex[:12]}"
    return lambda: open_s3_store(server, prefix=prefix)


async def test_the_index_holds_exactly_the_unfinished_runs(indexed: Callable[[], Store]) -> None:
    store = indexed()
    assert isinstance(store, RunIndex)
    async with Runtime(store=store) as rt:
        done = await rt.run(Twice, 1, run_id="done")
        assert done == 2
        await rt.submit(Twice, 2, run_id="queued")
    assert sorted(await store.list_unfinished()) == ["queued"]
    await store.delete_run("queued", tombstone=False)
    assert await store.list_unfinished() == []
    # an entry a power loss took (or an older actorflow never wrote) comes back
    async with Runtime(store=store) as rt:
        await rt.submit(Twice, 3, run_id="lost")
    await store.unindex("lost")
    assert await store.list_unfinished() == []
    assert await store.reindex() == 1
    assert await store.list_unfinished() == ["lost"]
    assert await store.reindex() == 0
    await store.aclose()


async def test_unowned_leaves_out_what_a_live_owner_holds(indexed: Callable[[], Store]) -> None:
    owner, other = indexed(), indexed()
    assert isinstance(owner, RunIndex)
    assert isinstance(other, RunIndex)
    async with Runtime(store=owner) as rt:
        await rt.submit(Twice, 1, run_id="held")
        await rt.submit(Twice, 1, run_id="free")
    lease = await owner.claim("held", "owner")
    await owner.renew(lease)  # a worker lease lists what it holds at its renewal
    if hasattr(owner, "_leases"):  # S3: make the renewal that lists "held" due now
        owner._leases.workers._renewed = 0.0
        await owner.renew(lease)
    assert sorted(await other.list_unfinished(unowned=True)) == ["free"]
    assert sorted(await other.list_unfinished()) == ["free", "held"]
    await owner.release(lease)
    if owner is not other:
        await owner.aclose()  # an S3 store ends its worker lease
    assert sorted(await other.list_unfinished(unowned=True)) == ["free", "held"]
    await other.aclose()


class Heartbeats(MemoryStore):
    """A memory store with a heartbeat every millisecond that logs renewals and releases.

    Its release stays open for a few heartbeats, so a renewal that raced it
    would be seen; its renewals of ``lost`` raise ``LeaseLostError``, as if
    another owner had taken that run.
    """

    def __init__(self, lost: str = "") -> None:
        super().__init__()
        self.calls: list[tuple[str, str]] = []
        self.lost = lost
        self.lost_seen = anyio.Event()

    @property
    def renew_interval(self) -> float | None:
        return 0.001

    async def renew(self, lease: Lease) -> Lease:
        self.calls.append(("renew", lease.run_id))
        if lease.run_id == self.lost:
            self.lost_seen.set()
            raise LeaseLostError(lease.run_id, lease.epoch)
        return await super().renew(lease)

    async def release(self, lease: Lease) -> None:
        await super().release(lease)
        self.calls.append(("release", lease.run_id))
        for _ in range(5):  # heartbeats would fire meanwhile, were any still running
            await anyio.sleep(0.002)


async def test_no_renewal_races_a_release() -> None:
    store = Heartbeats()
    async with Runtime(store=store) as rt:
        with pytest.raises(RunPaused):  # it pauses: its lease is released
            await rt.run(WaitsForFix, None, run_id="first")
        assert await rt.run(Twice, 2, run_id="second") == 4
    for run_id in ("first", "second"):
        mine = [kind for kind, r in store.calls if r == run_id]
        assert mine.count("release") == 1
        assert mine[-1] == "release", f"{run_id}: a renewal after its release: {mine}"


async def test_a_heartbeat_that_finds_its_lease_lost_stops_only_itself() -> None:
    store = Heartbeats(lost="lost")
    async with Runtime(store=store) as rt:
        handle = await rt.start(WaitsInPlace, None, run_id="lost")
        await store.lost_seen.wait()  # its heartbeat found the lease gone, and stopped
        assert await rt.run(Twice, 3) == 6  # the runtime's other runs go on
        await rt.signal("lost", Fix(1))
        await handle.wait()
    renewals = [r for kind, r in store.calls if kind == "renew" and r == "lost"]
    assert renewals == ["lost"]  # one renewal failed; none was tried after it


async def test_a_run_that_keeps_failing_to_recover_ends_failed_after_max_attempts() -> None:
    store = MemoryStore()
    async with Runtime(store=store) as client:
        run_id = await client.submit(Twice, 1)
    await store.append(run_id, [StepRecord(step_id="0", kind="now", result=b"\x01")] * 2)
    store._runs[run_id].log[0] = b"damaged"  # every attempt stops on it: nothing to write with
    await store.update_run(
        run_id, lambda m: msgspec.structs.replace(m, status=RunStatus.INTERRUPTED)
    )
    config = RuntimeConfig(max_recovery_attempts=2)
    async with Runtime(store=store, config=config, adopt_orphans=FAST) as worker:

        async def failed() -> bool:
            return (await store.read_run(run_id)).status is RunStatus.FAILED

        await until(failed, "the run was marked failed")
        assert worker._runs.adopter is not None
        assert worker._runs.adopter._failures.get(run_id, 0) >= 2  # each failure backed off
    manifest = await store.read_run(run_id)
    assert manifest.error is not None
    assert manifest.error.type == "RecoveryFailedError"
    assert manifest.attempt == 3  # two attempts failed; the third take found the limit
    assert await store.list_unfinished() == []


async def test_a_worker_whose_store_cannot_be_reached_says_so_at_once() -> None:
    store = unreachable_s3_store(max_attempts=2)
    with pytest.raises(StoreUnavailableError, match="unavailable after 2 attempts"):
        async with Runtime(store=store, adopt_orphans=FAST):
            await anyio.sleep_forever()  # the worker's first look ends it
    await store.aclose()
