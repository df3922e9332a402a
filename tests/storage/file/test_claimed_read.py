"""A run's owner reads its log to go on appending (a recovery): one scan opens it for both.

The read leaves the log as it is; a torn tail it found is cut by the first
append, as when the writer opened the log on its own.
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread
from structlog.testing import capture_logs

from actorflow.storage import EventRecord, FileStore, OSFileSystem, RunManifest
from actorflow.storage.file._frames import HEADER_SIZE, frame, scan

if TYPE_CHECKING:
    from pathlib import Path

    from actorflow.storage import LogRecord

RUN = "claimed"


def rec(i: int) -> EventRecord:
    return EventRecord(kind="step", step_id=f"s{i}", data=b"x" * 40)


class ReadCountingFS(OSFileSystem):
    """The real file system, counting whole-file reads of log segments."""

    def __init__(self) -> None:
        super().__init__()
        self.segment_reads: Counter[str] = Counter()

    def read(self, path: str) -> bytes:
        if path.endswith(".seg"):
            self.segment_reads[path] += 1
        return super().read(path)


async def a_dead_writer(path: Path, records: int) -> FileStore:
    """A store that appended ``records`` and never closed its log (a killed process)."""
    store = FileStore(path)
    await store.create_run(RunManifest(run_id=RUN, workflow="w", input=b"", input_hash=""))
    for i in range(records):
        await store.append(RUN, [rec(i)])
    return store


def segment(path: Path) -> Path:
    (only,) = sorted((path / "runs" / RUN / "log").iterdir())
    return only


def tear_after_the_records(path: Path) -> int:
    """Write half a frame where the next record would go; return where it starts."""
    data = bytearray(path.read_bytes())
    at = scan(bytes(data), location="test", last=True).end
    torn = frame(b"y" * 200)[: HEADER_SIZE + 30]
    data[at : at + len(torn)] = torn
    path.write_bytes(bytes(data))
    return at


async def test_the_owner_reads_the_last_segment_once_to_read_and_append(tmp_path: Path) -> None:
    dead = await a_dead_writer(tmp_path, 3)
    fs = ReadCountingFS()
    heir = FileStore(tmp_path, fs=fs)
    lease = await heir.claim(RUN, "heir")
    assert await heir.read_log(RUN, 1) == [rec(1), rec(2)]
    assert await heir.append(RUN, [rec(3)]) == 4
    assert list(fs.segment_reads.values()) == [1]  # the writer did not scan it again
    await heir.release(lease)
    await heir.aclose()
    assert await FileStore(tmp_path).read_log(RUN) == [rec(i) for i in range(4)]
    await dead.aclose()


async def test_a_reader_without_the_claim_opens_nothing(tmp_path: Path) -> None:
    dead = await a_dead_writer(tmp_path, 2)
    fs = ReadCountingFS()
    other = FileStore(tmp_path, fs=fs)
    assert await other.read_log(RUN) == [rec(0), rec(1)]
    assert await other.read_log(RUN) == [rec(0), rec(1)]
    assert list(fs.segment_reads.values()) == [2]  # read afresh each time, as always
    await other.aclose()
    await dead.aclose()


async def test_a_torn_tail_the_owner_read_is_cut_by_its_first_append(tmp_path: Path) -> None:
    dead = await a_dead_writer(tmp_path, 2)
    at = tear_after_the_records(segment(tmp_path))
    heir = FileStore(tmp_path)
    lease = await heir.claim(RUN, "heir")
    before = segment(tmp_path).read_bytes()
    with capture_logs() as events:
        assert await heir.read_log(RUN) == [rec(0), rec(1)]
    assert segment(tmp_path).read_bytes() == before  # a read changes nothing
    assert not [e for e in events if e["event"] == "log_tail_cut"]
    with capture_logs() as events:
        assert await heir.append(RUN, [rec(2)]) == 3
    (cut,) = [e for e in events if e["event"] == "log_tail_cut"]
    assert cut["offset"] == at
    await heir.release(lease)
    await heir.aclose()
    assert await FileStore(tmp_path).read_log(RUN) == [rec(0), rec(1), rec(2)]
    await dead.aclose()


async def test_an_owner_that_only_reads_leaves_the_log_as_it_found_it(tmp_path: Path) -> None:
    dead = await a_dead_writer(tmp_path, 2)
    tear_after_the_records(segment(tmp_path))
    before = segment(tmp_path).read_bytes()
    heir = FileStore(tmp_path)
    lease = await heir.claim(RUN, "heir")
    assert await heir.read_log(RUN) == [rec(0), rec(1)]
    await heir.release(lease)
    await heir.aclose()
    assert segment(tmp_path).read_bytes() == before  # torn tail and zeros alike
    await dead.aclose()


class HeldListing(OSFileSystem):
    """The real file system; a listing of the log folder waits for ``go`` once armed."""

    def __init__(self) -> None:
        super().__init__()
        self.armed = False
        self.listed, self.go = threading.Event(), threading.Event()

    def listdir(self, path: str) -> list[str]:
        names = super().listdir(path)
        if self.armed and path.endswith("log"):
            self.armed = False
            self.listed.set()
            self.go.wait(30)
        return names


async def test_a_read_that_an_append_overtakes_never_becomes_the_writer(tmp_path: Path) -> None:
    fs = HeldListing()
    store = FileStore(tmp_path, fs=fs)
    manifest = RunManifest(run_id=RUN, workflow="w", input=b"", input_hash="", owner="me")
    await store.create_run(manifest)  # claimed by its creator
    read: list[list[LogRecord]] = []

    async def reader() -> None:
        read.append(await store.read_log(RUN))

    async with anyio.create_task_group() as tg:
        fs.armed = True
        tg.start_soon(reader)
        await anyio.to_thread.run_sync(fs.listed.wait, 30)  # the read saw an empty log
        assert await store.append(RUN, [rec(0)]) == 1
        fs.go.set()
    assert read == [[]]
    assert await store.append(RUN, [rec(1)]) == 2  # still through the writer that appended
    await store.aclose()
    assert await FileStore(tmp_path).read_log(RUN) == [rec(0), rec(1)]


async def test_an_owner_that_only_reads_keeps_the_zeros_a_dead_writer_set_aside(
    tmp_path: Path,
) -> None:
    dead = await a_dead_writer(tmp_path, 2)
    before = segment(tmp_path).read_bytes()
    assert before.endswith(b"\0" * 64)  # space the dead writer set aside
    heir = FileStore(tmp_path)
    lease = await heir.claim(RUN, "heir")
    assert await heir.read_log(RUN) == [rec(0), rec(1)]
    await heir.release(lease)
    await heir.aclose()
    assert segment(tmp_path).read_bytes() == before
    await dead.aclose()
