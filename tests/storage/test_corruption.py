"""Corruption: flip a byte or truncate in every region of a snapshot, a blob and a log
segment. Each is detected, named (file and offset), and never decompressed or decoded."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import anyio
import pytest
from structlog.testing import capture_logs

from actorflow.errors import (
    CheckpointCorruptedError,
    CorruptedDataError,
    EncryptionKeyError,
    EncryptionKeyMissingError,
    LogCorruptedError,
)
from actorflow.storage import (
    Codec,
    EventRecord,
    FileStore,
    RunManifest,
    Snapshot,
    _codec,
    _envelope,
    _sealing,
    run_verifier,
    verify_store,
)
from actorflow.storage._sealing import _FIXED
from actorflow.storage.file._frames import HEADER_SIZE, frame

if TYPE_CHECKING:
    from pathlib import Path

KEY = bytes(range(32))
RUN = "r1"


@pytest.fixture(params=["plain-key", "aes"])
def codec(request: pytest.FixtureRequest) -> Codec:
    if request.param == "aes":
        return Codec(compress_above=64, keys={"k1": KEY})
    return Codec(compress_above=64)


class Spy:
    """Counts what reaches decompression and decoding."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[str] = []
        for name in ("_snapshot_decoder", "_record_decoder"):
            real = getattr(_codec, name)
            monkeypatch.setattr(_codec, name, self._wrap(name, real))
        # Codec.open calls the module-level name, so the spy replaces it there.
        real_decompress = _envelope.decompress

        def decompress(header: Any, *args: Any) -> bytes:
            if header.kind is not _sealing.Kind.MANIFEST:
                self.calls.append("decompress")
            return real_decompress(header, *args)

        monkeypatch.setattr(_sealing, "decompress", decompress)

    def _wrap(self, name: str, real: Any) -> Any:
        spy = self

        class Wrapped:
            def decode(self, data: bytes) -> Any:
                spy.calls.append(name)
                return real.decode(data)

        return Wrapped()


def flip(path: Path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0x5A
    path.write_bytes(bytes(data))


def truncate(path: Path, size: int) -> None:
    path.write_bytes(path.read_bytes()[:size])


def regions(codec: Codec, size: int) -> dict[str, int]:
    kid = len(codec.key_id or "")
    return {
        "magic": 0,
        "header-lengths": 24,
        "key-id-or-checksum": _FIXED.size + max(kid - 1, 0),
        "checksum": _FIXED.size + kid + 10,
        "payload": _FIXED.size + kid + 32 + (size - _FIXED.size - kid - 32) // 2,
        "last-byte": size - 1,
    }


async def new_store(tmp_path: Path, codec: Codec) -> FileStore:
    store = FileStore(tmp_path / "s", codec=codec)
    await store.create_run(RunManifest(run_id=RUN, workflow="w", input=b"", input_hash=""))
    return store


def big_snapshot() -> Snapshot:
    events = tuple(EventRecord(kind="e", data=b"payload %d " % i * 20) for i in range(40))
    return Snapshot(
        run_id=RUN, snapshot_id="s1", position=0, created=1.0, trigger="t", events=events
    )


REGIONS = ["magic", "header-lengths", "key-id-or-checksum", "checksum", "payload", "last-byte"]


@pytest.mark.parametrize("region", REGIONS)
async def test_a_flipped_byte_in_a_snapshot_is_detected_and_never_decoded(
    tmp_path: Path, codec: Codec, region: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = await new_store(tmp_path, codec)
    await store.write_snapshot(big_snapshot())
    (path,) = (tmp_path / "s/runs/r1/snapshots").iterdir()
    flip(path, regions(codec, path.stat().st_size)[region])
    spy = Spy(monkeypatch)
    with pytest.raises(CheckpointCorruptedError) as caught:
        await store.read_snapshot(RUN, "s1")
    assert caught.value.location == str(path)
    assert path.name in str(caught.value)
    assert spy.calls == []


@pytest.mark.parametrize("keep", ["empty", "half-header", "header", "half-payload", "all-but-one"])
async def test_a_truncated_snapshot_is_detected_and_never_decoded(
    tmp_path: Path, codec: Codec, keep: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = await new_store(tmp_path, codec)
    await store.write_snapshot(big_snapshot())
    (path,) = (tmp_path / "s/runs/r1/snapshots").iterdir()
    size = path.stat().st_size
    cut = {"empty": 0, "half-header": 16, "header": _FIXED.size, "half-payload": size // 2}
    truncate(path, cut.get(keep, size - 1))
    spy = Spy(monkeypatch)
    with pytest.raises(CheckpointCorruptedError, match=r"truncated|length"):
        await store.read_snapshot(RUN, "s1")
    assert spy.calls == []


@pytest.mark.parametrize("region", [*REGIONS, "truncated"])
async def test_a_damaged_blob_is_detected(tmp_path: Path, codec: Codec, region: str) -> None:
    store = await new_store(tmp_path, codec)
    ref = await store.put_blob(RUN, b"agent state " * 100)
    path = tmp_path / "s/runs/r1/blobs" / ref
    if region == "truncated":
        truncate(path, path.stat().st_size - 3)
    else:
        flip(path, regions(codec, path.stat().st_size)[region])
    with pytest.raises(CorruptedDataError) as caught:
        await store.get_blob(RUN, ref)
    assert caught.value.location == str(path)


def rec(i: int) -> EventRecord:
    return EventRecord(kind="e", data=b"record %d " % i * 10)


async def three_records(tmp_path: Path, codec: Codec) -> tuple[FileStore, Path, list[int]]:
    store = await new_store(tmp_path, codec)
    for i in range(3):
        await store.append(RUN, [rec(i)])
    await store.aclose()
    (path,) = (tmp_path / "s/runs/r1/log").iterdir()
    data = path.read_bytes()
    offsets = [0]
    for _ in range(2):
        at = offsets[-1]
        offsets.append(at + HEADER_SIZE + int.from_bytes(data[at : at + 4], "big"))
    return FileStore(tmp_path / "s", codec=codec), path, offsets


FRAME_REGIONS = [("length", 1), ("payload-crc", 5), ("header-crc", 9), ("payload", 40)]


@pytest.mark.parametrize(("region", "delta"), FRAME_REGIONS)
async def test_a_damaged_record_in_the_middle_is_an_error_naming_file_and_offset(
    tmp_path: Path, codec: Codec, region: str, delta: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, path, offsets = await three_records(tmp_path, codec)
    flip(path, offsets[1] + delta)
    spy = Spy(monkeypatch)
    with pytest.raises(LogCorruptedError) as caught:
        await store.read_log(RUN)
    assert caught.value.location == f"{path} at byte {offsets[1]}"
    assert spy.calls.count("_record_decoder") <= 1  # record 0 may decode; record 1 never
    with pytest.raises(LogCorruptedError):
        await store.read_log(RUN, 1)


@pytest.mark.parametrize(("region", "delta"), FRAME_REGIONS)
async def test_a_damaged_record_is_stepped_over_by_reads_from_after_it_and_keeps_its_position(
    tmp_path: Path, codec: Codec, region: str, delta: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # whichever part of its frame is hit, where the record ends is certain:
    # its header's length (checked by the header's crc), or else the length
    # its sealed payload gives (checked by the payload's own checksum)
    store, path, offsets = await three_records(tmp_path, codec)
    flip(path, offsets[1] + delta)
    spy = Spy(monkeypatch)
    assert await store.read_log(RUN, 2) == [rec(2)]
    assert spy.calls.count("_record_decoder") <= 1  # only record 2 is decoded
    assert await store.log_length(RUN) == 3
    assert await store.append(RUN, [rec(9)]) == 4  # after the damage, at the right position
    assert await store.read_log(RUN, 2) == [rec(2), rec(9)]
    with pytest.raises(LogCorruptedError):  # whoever needs it still learns of the damage
        await store.read_log(RUN)
    await store.aclose()


async def test_damage_that_hides_where_the_next_record_begins_stops_readers_and_writers(
    tmp_path: Path, codec: Codec
) -> None:
    # header and payload both damaged: the record's length is known from nowhere,
    # so no position after it can be counted (guessing would misplace records)
    store, path, offsets = await three_records(tmp_path, codec)
    flip(path, offsets[1] + 1)
    flip(path, offsets[1] + 40)
    with pytest.raises(LogCorruptedError, match="where the records after it begin is unknown"):
        await store.read_log(RUN, 2)
    with pytest.raises(LogCorruptedError):
        await store.log_length(RUN)
    with pytest.raises(LogCorruptedError) as caught:
        await store.append(RUN, [rec(9)])  # never appends past damage it cannot measure
    assert caught.value.location == f"{path} at byte {offsets[1]}"
    await store.aclose()


async def test_a_record_whose_frame_checks_but_whose_seal_does_not_is_never_decoded(
    tmp_path: Path, codec: Codec, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, path, offsets = await three_records(tmp_path, codec)
    data = bytearray(path.read_bytes())
    payload = bytearray(data[offsets[1] + HEADER_SIZE : offsets[2]])
    payload[-1] ^= 1
    data[offsets[1] : offsets[2]] = frame(bytes(payload))  # a valid frame around a bad seal
    path.write_bytes(bytes(data))
    spy = Spy(monkeypatch)
    with pytest.raises(LogCorruptedError, match="checksum mismatch"):
        await store.read_log(RUN)
    assert spy.calls.count("_record_decoder") == 1


@pytest.mark.parametrize("damage", ["flip-header", "flip-payload", "cut-header", "cut-payload"])
async def test_a_torn_tail_is_skipped_by_readers_and_cut_by_the_writer(
    tmp_path: Path, codec: Codec, damage: str
) -> None:
    store, path, offsets = await three_records(tmp_path, codec)
    if damage == "flip-header":
        flip(path, offsets[2] + 2)
    elif damage == "flip-payload":
        flip(path, offsets[2] + HEADER_SIZE + 20)
    elif damage == "cut-header":
        truncate(path, offsets[2] + 5)
    else:
        truncate(path, path.stat().st_size - 7)
    assert await store.read_log(RUN) == [rec(0), rec(1)]
    assert await store.log_length(RUN) == 2
    with capture_logs() as events:
        assert await store.append(RUN, [rec(7)]) == 3
    (cut,) = [e for e in events if e["event"] == "log_tail_cut"]
    assert cut["file"] == str(path)
    assert cut["offset"] == offsets[2]
    assert await store.read_log(RUN) == [rec(0), rec(1), rec(7)]
    await store.aclose()


async def test_the_verifier_reports_a_corrupt_snapshot(tmp_path: Path, codec: Codec) -> None:
    store = await new_store(tmp_path, codec)
    await store.write_snapshot(big_snapshot())
    assert await verify_store(store) == []
    (path,) = (tmp_path / "s/runs/r1/snapshots").iterdir()
    flip(path, 100)
    with capture_logs() as events:
        async with anyio.create_task_group() as tg:
            await tg.start(
                lambda task_status: run_verifier(store, interval=3600, task_status=task_status)
            )
            tg.cancel_scope.cancel()
    (found,) = [e for e in events if e["event"] == "checkpoint_corrupted"]
    assert found["location"] == str(path)


async def test_a_store_opened_with_the_wrong_key_says_so(tmp_path: Path) -> None:
    await new_store(tmp_path, Codec(keys={"k1": KEY}))
    wrong = FileStore(tmp_path / "s", codec=Codec(keys={"k1": os.urandom(32)}))
    with pytest.raises(EncryptionKeyError, match="key is wrong"):
        await wrong.read_run(RUN)
    unkeyed = FileStore(tmp_path / "s")
    with pytest.raises(EncryptionKeyMissingError, match="was not given that key"):
        await unkeyed.read_run(RUN)
