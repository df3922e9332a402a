"""Fencing on S3: a stale owner's writes are refused by the log, whatever its clock says.

Two stores on one prefix stand for two processes; a stale owner is one whose
lease another process took over while it was paused (its clock may even say
the lease is still good). The last class runs a real owner in a subprocess,
stops it with SIGSTOP past its lease, recovers the run, and resumes it.
"""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import uuid
from typing import TYPE_CHECKING, Any

import anyio
import msgspec
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream

from actorflow import Runtime
from actorflow.errors import LeaseLostError, RunLockedError
from actorflow.storage._codec import encode_record
from actorflow.storage._records import (
    EventRecord,
    RunManifest,
    RunStatus,
    Snapshot,
    StepRecord,
)
from actorflow.storage.s3._fencing import COUNT, EPOCH, STALE_WRITE, TakeOver, takeover_epoch
from tests.storage.factories_s3 import open_s3_store, sibling
from tests.storage.s3 import stale_owner_child as child

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from anyio.abc import Process

    from actorflow.storage import LogRecord
    from actorflow.storage.s3._store import S3Store
    from tests.storage.s3_servers import S3Server

RUN = "run-1"
CHILD_DEADLINE = 120  # seconds: a bound on the child and on waiting for a lease to lapse


def manifest(run_id: str = RUN) -> RunManifest:
    return RunManifest(run_id=run_id, workflow="wf", input=b"\x90", input_hash="h")


def step(i: int) -> StepRecord:
    return StepRecord(step_id=f"main/{i}", kind="ask", target="a", result=b"r%d" % i)


@pytest.fixture(params=["seaweed_server", "moto_server"], ids=["seaweed", "moto"])
def server(request: pytest.FixtureRequest) -> S3Server:
    """Each S3-compatible server the store is tested against."""
    result: S3Server = request.getfixturevalue(request.param)
    return result


async def taken_over(server: S3Server) -> tuple[S3Store, S3Store]:
    """``old`` owned the run and wrote ``step(0)``; then ``new`` took it over.

    ``old`` still believes its lease good (as if its clock lagged): only the
    store can stop it now.
    """
    old = open_s3_store(server, lease_ttl=0.0)  # lapses at once, as if it had stalled
    new = sibling(old, server)
    await old.create_run(manifest())
    stale = await old.claim(RUN, "old")
    await old.append(RUN, [step(0)])
    await new.claim(RUN, "new")
    old._leases._held[RUN] = msgspec.structs.replace(stale, expires=math.inf)
    return old, new


async def write_as_an_older_version(
    store: S3Store, position: int, records: list[StepRecord], epoch: int
) -> None:
    """A segment as actorflow wrote them before take-over records: no fence, no checks."""
    body = store._log._frame(RUN, position, [encode_record(r) for r in records])
    key = store._objects.key(RUN, "log", f"{position:020d}")
    meta = {COUNT: str(len(records)), EPOCH: str(epoch)}
    await store._objects.put("test", key, body, token=uuid.uuid4().hex, metadata=meta)


def segment_epochs(store: S3Store, server: S3Server, run_id: str = RUN) -> list[tuple[int, int]]:
    """``(start, epoch)`` of each of the run's segments, as the server holds them."""
    client = server.client()
    prefix = store._objects.key(run_id, "log", "")
    listed = client.list_objects_v2(Bucket=server.bucket, Prefix=prefix).get("Contents", [])
    found = []
    for o in listed:
        meta = client.head_object(Bucket=server.bucket, Key=o["Key"])["Metadata"]
        found.append((int(o["Key"][len(prefix) :]), int(meta.get(EPOCH, "0"))))
    return sorted(found)


def steps_of(log: list[LogRecord]) -> list[StepRecord]:
    return [r for r in log if isinstance(r, StepRecord)]


async def close(*stores: S3Store) -> None:
    for s in stores:
        await s.aclose()


class TestTakeOver:
    async def test_a_claim_that_replaces_an_owner_writes_a_take_over_record(
        self, server: S3Server
    ) -> None:
        old, new = await taken_over(server)
        log = await new.read_log(RUN)
        assert log[0] == step(0)  # the first owner's claim took over from nobody: no record
        assert [takeover_epoch(r) for r in log] == [None, 2]
        assert isinstance(log[1], EventRecord)
        assert log[1].data is not None
        assert msgspec.msgpack.decode(log[1].data, type=TakeOver).owner == "new"
        # the manifest carries the new epoch as soon as the run is claimed
        reader = sibling(old, server)
        assert (await reader.read_run(RUN)).epoch == 2
        await close(old, new, reader)

    @pytest.mark.parametrize("looks_again", [False, True], ids=["cached-end", "reads-the-end"])
    async def test_a_stale_owner_appending_after_a_take_over_is_fenced(
        self, server: S3Server, looks_again: bool
    ) -> None:
        old, new = await taken_over(server)
        if looks_again:  # as after a cancelled append: it reads the log's end again
            old._log.forget(RUN)
        with pytest.raises(LeaseLostError, match="taken over"):
            await old.append(RUN, [step(99)])
        assert await new.append(RUN, [step(1)]) == 3
        reader = sibling(old, server)
        log = await reader.read_log(RUN)
        assert steps_of(log) == [step(0), step(1)]
        assert [takeover_epoch(r) for r in log] == [None, 2, None]
        assert segment_epochs(reader, server) == [(0, 1), (1, 2), (2, 2)]
        await close(old, new, reader)

    async def test_a_stale_owner_cannot_record_a_status_over_the_new_owners(
        self, server: S3Server
    ) -> None:
        old, new = await taken_over(server)
        with pytest.raises(LeaseLostError):
            await old.update_run(
                RUN, lambda m: msgspec.structs.replace(m, status=RunStatus.INTERRUPTED)
            )
        await new.update_run(RUN, lambda m: msgspec.structs.replace(m, status=RunStatus.COMPLETED))
        with pytest.raises(LeaseLostError):  # refused from now on, without asking the store
            await old.update_run(RUN, lambda m: msgspec.structs.replace(m, status=RunStatus.FAILED))
        assert (await new.read_run(RUN)).status is RunStatus.COMPLETED
        await close(old, new)

    async def test_a_lease_found_lost_refuses_every_write_until_released(
        self, server: S3Server
    ) -> None:
        old, new = await taken_over(server)
        stale = old._leases._held[RUN]
        with pytest.raises(LeaseLostError):
            await old.renew(stale)  # the heartbeat learns it first
        # still fenced by its epoch: it never goes on as a store without a lease
        with pytest.raises(LeaseLostError):
            await old.append(RUN, [step(99)])
        with pytest.raises(LeaseLostError):
            await old.write_snapshot(
                Snapshot(run_id=RUN, snapshot_id="s", position=1, created=1.0, trigger="t")
            )
        await old.release(stale)  # the run's driver lets go; the new owner keeps the run
        assert await new.is_owned(RUN)
        assert steps_of(await new.read_log(RUN)) == [step(0)]
        assert await new.list_snapshots(RUN) == []
        await close(old, new)

    async def test_a_writer_without_a_lease_is_never_fenced(self, server: S3Server) -> None:
        old, new = await taken_over(server)
        tool = sibling(old, server)  # holds no lease: a tool or a test, not an owner
        assert await tool.append(RUN, [step(5)]) == 3
        assert await new.append(RUN, [step(1)]) == 4
        reader = sibling(old, server)
        assert steps_of(await reader.read_log(RUN)) == [step(0), step(5), step(1)]
        await close(old, new, tool, reader)

    async def test_a_claim_overtaken_before_its_take_over_record_raises_run_locked(
        self, server: S3Server
    ) -> None:
        old, new = await taken_over(server)
        await new.release(new._leases._held[RUN])
        late = sibling(old, server, lease_ttl=0.0)  # its lease lapses at once
        newer = sibling(old, server)
        take_over = late._log.take_over

        async def overtaken(run_id: str, owner: str, epoch: int) -> int:
            await newer.claim(run_id, "newer")  # the next epoch, and its record, get in first
            return await take_over(run_id, owner, epoch)

        late._log.take_over = overtaken  # type: ignore[method-assign]
        with pytest.raises(RunLockedError):
            await late.claim(RUN, "late")
        assert await newer.is_owned(RUN)
        assert [takeover_epoch(r) for r in await newer.read_log(RUN)] == [None, 2, 4]
        await close(old, new, late, newer)

    async def test_taking_a_deleted_runs_tombstone_writes_no_log(self, server: S3Server) -> None:
        first = open_s3_store(server)
        second = sibling(first, server)
        await first.create_run(manifest())
        lease = await first.claim(RUN, "first")
        await first.append(RUN, [step(0)])
        await first.update_run(
            RUN, lambda m: msgspec.structs.replace(m, status=RunStatus.COMPLETED)
        )
        await first.release(lease)
        await first.delete_run(RUN)  # a tombstone: manifest and lease stay
        await second.release(await second.claim(RUN, "second"))  # a recoverer that came late
        assert segment_epochs(second, server) == []
        assert (await second.read_run(RUN)).epoch == 2
        await close(first, second)


class TestWorkerLease:
    async def test_a_lapsed_worker_lease_loses_only_the_runs_taken_meanwhile(
        self, server: S3Server
    ) -> None:
        old = open_s3_store(server, lease_ttl=0.0)  # its one worker lease lapses at once
        new = sibling(old, server)
        for run_id in ("taken", "kept"):
            await old.create_run(manifest(run_id))
            await old.claim(run_id, "old")
        await new.claim("taken", "new")  # the worker lease it names is dead: free to take
        # old's next write renews its worker lease, then reads the lease of each run it holds
        with pytest.raises(LeaseLostError):
            await old.append("taken", [step(0)])
        assert await old.append("kept", [step(0)]) == 1
        with pytest.raises(LeaseLostError):  # and it stays lost until released
            await old.update_run("taken", lambda m: m)
        await close(old, new)

    async def test_one_renewal_keeps_every_held_run_alive_and_names_them(
        self, server: S3Server
    ) -> None:
        store = open_s3_store(server)
        other = sibling(store, server)
        leases = []
        for i in range(5):
            await store.create_run(manifest(f"r{i}"))
            leases.append(await store.claim(f"r{i}", "owner"))
        assert {lease.worker for lease in leases} == {store._leases.workers.worker}
        assert all(lease.expires is None for lease in leases)  # no expiry of their own
        store._leases.workers._renewed = 0.0  # a renewal is due
        for lease in leases:
            await store.renew(lease)
        assert await other._leases.workers.held_by_live() == {f"r{i}" for i in range(5)}
        for i in range(5):
            assert await other.is_owned(f"r{i}")
        await store.aclose()  # ends its worker lease: every run is free at once
        for i in range(5):
            assert not await other.is_owned(f"r{i}")
        await other.aclose()


class TestReaders:
    async def test_an_older_stale_owners_segment_after_a_take_over_is_dropped(
        self, server: S3Server
    ) -> None:
        old, new = await taken_over(server)
        # an older actorflow, still running as the stale owner, appends after the record
        await write_as_an_older_version(old, 2, [step(98), step(99)], epoch=1)
        assert await new.append(RUN, [step(1)]) == 5  # written after it: never lost
        reader = sibling(old, server)
        log = await reader.read_log(RUN)
        assert steps_of(log) == [step(0), step(1)]
        dropped = log[2:4]
        assert all(isinstance(r, EventRecord) and r.kind == STALE_WRITE for r in dropped)
        # positions stay where they are, and a read from past the record still drops them
        assert await reader.read_log(RUN, 2) == [*dropped, step(1)]
        assert await reader.read_log(RUN, 3) == [dropped[1], step(1)]
        await close(old, new, reader)

    async def test_a_log_without_take_over_records_is_read_as_before(
        self, server: S3Server
    ) -> None:
        store = open_s3_store(server)
        await store.create_run(manifest())
        # epochs as an earlier version wrote them, a lower one after a higher one included
        for position, epoch in enumerate([1, 2, 1]):
            await write_as_an_older_version(store, position, [step(position)], epoch=epoch)
        assert await store.read_log(RUN) == [step(0), step(1), step(2)]
        assert await store.append(RUN, [step(3)]) == 4
        await store.aclose()

    async def test_pruning_keeps_the_epochs_of_what_it_copies(self, server: S3Server) -> None:
        old, new = await taken_over(server)  # step(0) at 0, take-over record at 1
        assert await new.append(RUN, [step(1), step(2), step(3)]) == 5
        await write_as_an_older_version(old, 5, [step(99)], epoch=1)
        reader = sibling(old, server)
        assert await reader.truncate_log_before(RUN, 3) == 3  # copies step(2), step(3)
        log = await reader.read_log(RUN, 3)
        assert log[:2] == [step(2), step(3)]
        assert isinstance(log[2], EventRecord)
        assert log[2].kind == STALE_WRITE
        await close(old, new, reader)


async def wait_until_lapsed(store: S3Store, run_id: str) -> None:
    """Poll the run's lease until no live owner holds it (a lease runs out in time)."""
    with anyio.fail_after(CHILD_DEADLINE):  # a bound, not a timing assertion
        # a lease ends with time on the server's side of things: nothing to wait on but that
        while await store.is_owned(run_id):  # noqa: ASYNC110
            await anyio.sleep(0.05)


class HeldAppend:
    """A store whose first append waits for ``go`` (set by the test)."""

    def __init__(self, inner: S3Store) -> None:
        self.inner = inner
        self.appending = anyio.Event()
        self.go = anyio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def append(self, run_id: str, records: Sequence[LogRecord]) -> int:
        """Say an append is due, wait for ``go`` the first time, then append."""
        self.appending.set()
        await self.go.wait()
        return await self.inner.append(run_id, records)


class Child:
    """The owner process, and its stdout read line by line."""

    def __init__(self, process: Process) -> None:
        self.process = process
        assert process.stdout is not None
        self._lines = BufferedByteReceiveStream(process.stdout)

    async def line(self) -> str:
        return (await self._lines.receive_until(b"\n", 65536)).decode()

    async def say(self, text: str) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send(text.encode() + b"\n")


@pytest.mark.timeout(300)
class TestStoppedOwner:
    """A real owner process, stopped past its lease, recovered, then resumed."""

    @pytest.mark.parametrize("mode", ["paused", "lagging-clock"])
    async def test_a_resumed_stale_owner_writes_nothing_after_the_take_over(
        self, server: S3Server, anyio_backend: str, mode: str, tmp_path: Path
    ) -> None:
        prefix = f"t-{uuid.uuid4().hex[:12]}"
        command = [
            sys.executable,
            "-m",
            "tests.storage.s3.stale_owner_child",
            anyio_backend,
            server.url,
            server.bucket,
            server.access_key,
            server.secret_key,
            prefix,
            mode,
        ]
        store = open_s3_store(server, prefix=prefix)
        errors = tmp_path / "child.stderr"
        with errors.open("wb") as stderr, anyio.fail_after(CHILD_DEADLINE):
            process = await anyio.open_process(
                command,
                env={**os.environ, child.CONTROL_ENV: "1"},
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
            )
            owner = Child(process)
            try:
                outcome = await self._stop_recover_resume(owner, store)
            finally:
                if process.returncode is None:
                    process.send_signal(signal.SIGCONT)
                    process.kill()
                await process.wait()
                await process.aclose()
        assert outcome == "error LeaseLostError", errors.read_text(errors="replace")[-3000:]
        await self._check_the_run(store, server)
        await store.aclose()

    async def _stop_recover_resume(self, owner: Child, store: S3Store) -> str:
        """Stop the owner in the middle of step 1 and wait out its lease; recover the run
        here, and let the owner go on just before the recovery's first append; return
        how the owner's run ended."""
        assert await owner.line() == "reached 0"
        assert await owner.line() == "reached 1"
        owner.process.send_signal(signal.SIGSTOP)
        await wait_until_lapsed(store, child.RUN)
        held = HeldAppend(store)
        results: dict[str, object] = {}
        async with Runtime(store=held) as runtime, anyio.create_task_group() as tg:

            async def recover() -> None:
                results.update(await runtime.recover(child.RUN))

            tg.start_soon(recover)
            # claimed, log read, step 1 run again: the stale owner now writes first
            await held.appending.wait()
            await owner.say("go")
            owner.process.send_signal(signal.SIGCONT)
            outcome = await owner.line()
            held.go.set()
        assert results == {child.RUN: child.expected()}
        return outcome

    async def _check_the_run(self, store: S3Store, server: S3Server) -> None:
        reader = sibling(store, server)
        final = await reader.read_run(child.RUN)
        assert final.status is RunStatus.COMPLETED
        assert final.result is not None
        assert msgspec.msgpack.decode(final.result) == child.expected()
        log = await reader.read_log(child.RUN)
        ids = [r.step_id for r in steps_of(log)]
        assert len(ids) == len(set(ids)), f"a step recorded twice: {ids}"
        assert [e for r in log if (e := takeover_epoch(r)) is not None] == [2]
        assert not [r for r in log if isinstance(r, EventRecord) and r.kind == STALE_WRITE]
        # nothing the stopped owner wrote landed after the take-over record
        at = next(i for i, r in enumerate(log) if takeover_epoch(r) is not None)
        epochs = segment_epochs(reader, server, child.RUN)
        assert [epoch for start, epoch in epochs if start >= at] == [2] * len(
            [s for s, _ in epochs if s >= at]
        )
        await reader.aclose()
