"""Log segments grown ahead of their records: appends inside the space set aside,
zeros read as space (never as damage), cut on close, torn writes over them cut."""

from __future__ import annotations

import errno
from typing import TYPE_CHECKING

import pytest
from structlog.testing import capture_logs

from actorflow.errors import LogCorruptedError, StorageError
from actorflow.storage import EventRecord, FileStore, OSFileSystem, RunManifest
from actorflow.storage.file._frames import HEADER_SIZE, frame, scan

if TYPE_CHECKING:
    from pathlib import Path

RUN = "seg"


def rec(i: int) -> EventRecord:
    return EventRecord(kind="step", step_id=f"s{i}", data=b"x" * 40)


class CountingFS(OSFileSystem):
    """The real file system, counting how appends make themselves durable."""

    def __init__(self) -> None:
        self.fsyncs = 0
        self.data_syncs = 0

    def fsync(self, handle: int) -> None:
        self.fsyncs += 1
        super().fsync(handle)

    def sync_data(self, handle: int) -> None:
        self.data_syncs += 1
        super().sync_data(handle)


async def new_store(path: Path, **options: object) -> FileStore:
    store = FileStore(path, **options)  # type: ignore[arg-type]
    await store.create_run(RunManifest(run_id=RUN, workflow="w", input=b"", input_hash=""))
    return store


def segment(path: Path) -> Path:
    (only,) = sorted((path / "runs" / RUN / "log").iterdir())
    return only


def content_end(data: bytes) -> int:
    return scan(data, location="test", last=True).end


async def test_appends_after_the_first_change_no_file_size(tmp_path: Path) -> None:
    fs = CountingFS()
    store = await new_store(tmp_path, fs=fs)
    fs.fsyncs = 0
    for i in range(5):
        await store.append(RUN, [rec(i)])
    # the first append grew the segment (a full fsync); the others wrote inside it
    assert (fs.fsyncs, fs.data_syncs) == (1, 4)
    data = segment(tmp_path).read_bytes()
    end = content_end(data)
    assert len(data) > end
    assert data[end:] == bytes(len(data) - end)
    assert await store.read_log(RUN) == [rec(i) for i in range(5)]
    assert await store.log_length(RUN) == 5
    await store.aclose()
    # closing cuts the zeros off
    assert segment(tmp_path).stat().st_size == end


async def test_zeros_left_by_a_writer_that_died_are_space_not_damage(tmp_path: Path) -> None:
    dead = await new_store(tmp_path)
    for i in range(3):
        await dead.append(RUN, [rec(i)])
    # `dead` never closes its log, as a killed process would not
    zeros_at = content_end(segment(tmp_path).read_bytes())
    assert segment(tmp_path).stat().st_size > zeros_at

    heir = FileStore(tmp_path)
    assert await heir.read_log(RUN) == [rec(0), rec(1), rec(2)]
    with capture_logs() as events:
        assert await heir.append(RUN, [rec(3)]) == 4
    assert not [e for e in events if e["event"] == "log_tail_cut"]
    await heir.aclose()
    assert await FileStore(tmp_path).read_log(RUN) == [rec(i) for i in range(4)]
    await dead.aclose()


async def test_a_torn_write_over_the_zeros_is_cut_by_the_next_writer(tmp_path: Path) -> None:
    dead = await new_store(tmp_path)
    for i in range(2):
        await dead.append(RUN, [rec(i)])
    path = segment(tmp_path)
    data = bytearray(path.read_bytes())
    at = content_end(bytes(data))
    torn = frame(b"y" * 200)[: HEADER_SIZE + 30]  # the write stopped partway
    data[at : at + len(torn)] = torn
    path.write_bytes(bytes(data))

    heir = FileStore(tmp_path)
    assert await heir.read_log(RUN) == [rec(0), rec(1)]
    with capture_logs() as events:
        assert await heir.append(RUN, [rec(2)]) == 3
    (cut,) = [e for e in events if e["event"] == "log_tail_cut"]
    assert cut["offset"] == at
    await heir.aclose()
    assert await FileStore(tmp_path).read_log(RUN) == [rec(0), rec(1), rec(2)]
    await dead.aclose()


async def test_a_segment_closed_for_the_next_keeps_no_zeros(tmp_path: Path) -> None:
    store = await new_store(tmp_path, segment_bytes=400)
    for i in range(12):
        await store.append(RUN, [rec(i)])
    files = sorted((tmp_path / "runs" / RUN / "log").iterdir())
    assert len(files) > 2
    for older in files[:-1]:
        data = older.read_bytes()
        assert len(data) == content_end(data)
    # the newest is still open and may have zeros set aside, but never past the limit
    assert files[-1].stat().st_size <= 400 + len(frame(b"x" * 400))
    assert await FileStore(tmp_path).read_log(RUN) == [rec(i) for i in range(12)]
    await store.aclose()


def test_scan_reads_zeros_as_space_in_any_segment() -> None:
    body = frame(b"a" * 10) + frame(b"b" * 10)
    found = scan(body + bytes(500), location="old.seg", last=False)
    assert (len(found.payloads), found.end, found.torn, found.spare) == (2, len(body), 0, 500)


def test_scan_still_tells_damage_before_zeros() -> None:
    good = frame(b"a" * 10)
    damaged = bytearray(frame(b"b" * 10))
    damaged[HEADER_SIZE + 2] ^= 0xFF
    later = frame(b"c" * 10)
    # a damaged frame with a good one after it is damage in the middle, zeros or not:
    # reported at its position (its header says where it ends), never a torn tail
    found = scan(good + bytes(damaged) + later + bytes(300), location="x.seg", last=True)
    assert found.payloads[1] is None
    assert found.damaged == {1: "payload checksum mismatch"}
    assert (len(found.payloads), found.torn, found.spare) == (3, 0, 300)
    assert found.where("x.seg", 1) == f"x.seg at byte {len(good)}"
    # a damaged frame with only zeros after it is a torn tail
    found = scan(good + bytes(damaged) + bytes(300), location="x.seg", last=True)
    assert (len(found.payloads), found.torn, found.damaged) == (1, len(damaged) + 300, {})
    # and in an older segment, which never has a torn tail, it is damage at its position
    found = scan(good + bytes(damaged) + bytes(300), location="x.seg", last=False)
    assert (len(found.payloads), found.damaged) == (2, {1: "payload checksum mismatch"})


def test_scan_fails_where_damage_hides_where_the_next_frame_begins() -> None:
    good = frame(b"a" * 10)
    damaged = bytearray(frame(b"b" * 10))
    damaged[1] ^= 0xFF  # the length: the header's crc fails, and no payload says how long it is
    later = frame(b"c" * 10)
    with pytest.raises(LogCorruptedError, match="unknown"):
        scan(good + bytes(damaged) + later + bytes(300), location="x.seg", last=True)
    with pytest.raises(LogCorruptedError, match="unknown"):
        scan(good + bytes(damaged) + bytes(300), location="x.seg", last=False)
    # a payload that measures itself gives the frame's end back
    found = scan(good + bytes(damaged) + later, location="x.seg", last=True, measure=lambda _: 10)
    assert (len(found.payloads), found.damaged) == (3, {1: "bad frame header"})
    assert bytes(found.payloads[2] or b"") == b"c" * 10


class FullDisk(OSFileSystem):
    """The real file system with a disk that fills up at ``room`` bytes per file."""

    def __init__(self, room: int) -> None:
        self.room = room

    def write_at(self, handle: int, data: bytes, offset: int) -> None:
        fits = max(0, self.room - offset)
        super().write_at(handle, data[:fits], offset)  # what fits lands, as on a real disk
        if fits < len(data):
            raise OSError(errno.ENOSPC, "No space left on device")


async def test_a_disk_too_full_for_the_zeros_still_takes_the_records(tmp_path: Path) -> None:
    one = len(frame(b"x" * 200))  # about one sealed record
    fs = FullDisk(room=3 * one)
    store = await new_store(tmp_path, fs=fs)
    for i in range(2):
        await store.append(RUN, [rec(i)])
    assert await store.read_log(RUN) == [rec(0), rec(1)]
    data = segment(tmp_path).read_bytes()
    assert len(data) == content_end(data)  # no zeros: there was no room for them

    fs.room = content_end(data) + 10  # not even room for the next record
    with pytest.raises(StorageError, match="No space left"):
        await store.append(RUN, [rec(2)])
    assert await FileStore(tmp_path).read_log(RUN) == [rec(0), rec(1)]  # nothing half-written

    fs.room = 10 * one  # space freed: appends go on where the log ends
    assert await store.append(RUN, [rec(3)]) == 3
    assert await FileStore(tmp_path).read_log(RUN) == [rec(0), rec(1), rec(3)]
    await store.aclose()
