"""The file store's event stream: segments in ``events/``, torn batches, following reads, bound.

The conformance suite covers what every store with an event stream promises;
these tests reach into the folder: a batch torn by a killed writer, a
reader that follows the newest segment across a rotation, the bytes kept
on disk, sealing, and deletion.
"""

from __future__ import annotations

import functools
import os
from typing import TYPE_CHECKING

import anyio.to_thread
import pytest

from actorflow.errors import EncryptionKeyError
from actorflow.storage import Codec, FileStore, RunManifest, encode_event

if TYPE_CHECKING:
    from pathlib import Path

    from actorflow.storage import EventStreamWriter

RUN = "r1"
KEY = bytes(range(32))


def manifest() -> RunManifest:
    return RunManifest(run_id=RUN, workflow="wf", input=b"\x90", input_hash="h", created=1.0)


def segments(root: Path) -> list[Path]:
    return sorted((root / "runs" / RUN / "events").iterdir())


async def write(
    writer: EventStreamWriter, values: list[object], *, lost: int = 0, end: bool = False
) -> None:
    events = [encode_event(2.0, "a", "T", v) for v in values]
    await anyio.to_thread.run_sync(functools.partial(writer.write, events, lost=lost, end=end))


async def positions(store: FileStore, start: int = 0) -> list[tuple[int, object]]:
    got = await store.read_events(RUN, start)
    return [(e.position, e.decode()) for e in got.events]


async def test_a_batch_torn_by_a_killed_writer_is_skipped_and_the_next_attempt_goes_on(
    tmp_path: Path,
) -> None:
    store = FileStore(tmp_path)
    await store.create_run(manifest())
    first = store.open_event_stream(RUN)
    await write(first, ["a", "b"])
    await write(first, ["c"])
    (segment,) = segments(tmp_path)
    whole = segment.read_bytes()
    segment.write_bytes(whole + whole[: len(whole) // 3])  # killed in the middle of a write
    assert await positions(store) == [(0, "a"), (1, "b"), (2, "c")]
    torn = await store.read_events(RUN, 3)
    assert (torn.events, torn.next, torn.ended) == ([], 3, False)  # as if not written yet

    second = FileStore(tmp_path).open_event_stream(RUN)  # the next attempt, another process
    await write(second, ["d"], end=True)
    assert len(segments(tmp_path)) == 2  # a segment of its own: nothing after a tear
    assert await positions(store) == [(0, "a"), (1, "b"), (2, "c"), (3, "d")]
    after = await store.read_events(RUN, 3)  # from where the torn read stopped
    assert [e.decode() for e in after.events] == ["d"]
    assert after.ended


async def test_a_reader_that_follows_reads_each_batch_once_across_rotations(
    tmp_path: Path,
) -> None:
    store = FileStore(tmp_path, event_bytes=64 * 1024)  # segments of 8 KiB
    await store.create_run(manifest())
    writer = store.open_event_stream(RUN)
    reader = FileStore(tmp_path)  # another process's store object
    seen: list[int] = []
    position = 0
    for i in range(40):
        await write(writer, [os.urandom(1024).hex()[:1500] + str(i)] * 3)  # ~4.5 KiB a batch
        got = await reader.read_events(RUN, position)
        seen += [e.position for e in got.events]
        position = got.next
    assert seen == list(range(120))
    assert len(segments(tmp_path)) > 1


async def test_the_oldest_segments_go_past_the_bound(tmp_path: Path) -> None:
    keep = 64 * 1024
    store = FileStore(tmp_path, event_bytes=keep)
    await store.create_run(manifest())
    writer = store.open_event_stream(RUN)
    for _ in range(100):
        await write(writer, [os.urandom(2000)])
    total = sum(p.stat().st_size for p in segments(tmp_path))
    assert total <= keep + keep // 8 + 4096  # the bound, plus the open segment's last batch
    got = await store.read_events(RUN, 0)
    assert got.events[0].position > 0
    assert got.events[-1].position == 99


async def test_batches_are_sealed_with_the_stores_key(tmp_path: Path) -> None:
    secret = "a token nobody may read on disk"
    store = FileStore(tmp_path, codec=Codec(keys={"k1": KEY}))
    await store.create_run(manifest())
    await write(store.open_event_stream(RUN), [secret], end=True)
    (segment,) = segments(tmp_path)
    assert secret.encode() not in segment.read_bytes()
    assert await positions(store) == [(0, secret)]
    with pytest.raises(EncryptionKeyError):
        await FileStore(tmp_path, codec=Codec(keys={"k2": KEY[::-1]})).read_events(RUN)


async def test_deleting_a_run_removes_its_stream(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    await store.create_run(manifest())
    await write(store.open_event_stream(RUN), ["a"], end=True)
    assert await positions(store) == [(0, "a")]
    await store.delete_run(RUN)  # a tombstone stays
    assert not (tmp_path / "runs" / RUN / "events").exists()
    assert await positions(store) == []
