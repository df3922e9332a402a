"""The file store's inbox: entries linked into place by seq, ids claimed, damage named.

The conformance suite covers what every store promises; these tests reach
into the folder: another process's entry at the next seq, a poster that
died between claiming its id and writing its entry, damaged entry files,
runs written before inboxes existed, and power loss at every call of a post.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from structlog.testing import capture_logs

from actorflow.errors import StorageError
from actorflow.storage import Codec, FileStore, InboxEntry, RunManifest
from actorflow.storage._inbox import id_key
from actorflow.storage.file import OSFileSystem
from actorflow.storage.file._inbox import ENTRY_SUFFIX
from tests.storage.file.simfs import SimFS

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

RUN = "r1"


def manifest() -> RunManifest:
    return RunManifest(run_id=RUN, workflow="wf", input=b"\x90", input_hash="h", created=1.0)


def entry_file(root: Path, seq: int) -> Path:
    return root / "runs" / RUN / "inbox" / f"{seq:020d}.msg"


async def post(store: FileStore, entry_id: str) -> InboxEntry:
    return await store.post(RUN, entry_id=entry_id, type="T", payload=entry_id.encode())


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[FileStore]:
    async with FileStore(tmp_path, codec=Codec(compress_above=64)) as opened:
        await opened.create_run(manifest())
        yield opened


async def test_an_entry_another_process_linked_first_pushes_the_post_to_the_next_seq(
    store: FileStore, tmp_path: Path
) -> None:
    assert (await post(store, "a")).seq == 0  # this store now expects seq 1 to be free
    async with FileStore(tmp_path, codec=store.codec) as other:
        assert (await post(other, "b")).seq == 1
    assert (await post(store, "c")).seq == 2  # its link at 1 failed: it took the next
    assert [e.entry_id for e in await store.read_inbox(RUN)] == ["a", "b", "c"]


async def test_a_retry_finishes_a_post_whose_poster_died_after_claiming_its_id(
    store: FileStore, tmp_path: Path
) -> None:
    await post(store, "before")
    claim = tmp_path / "runs" / RUN / "inbox" / f"{id_key(store.codec, 'lost')}.id"
    claim.touch(exist_ok=False)  # what a poster killed between claim and entry leaves
    retried = await post(store, "lost")
    assert retried.seq == 1
    assert await post(store, "lost") == retried
    assert [e.entry_id for e in await store.read_inbox(RUN)] == ["before", "lost"]


async def test_a_damaged_entry_is_skipped_with_a_warning_and_named_by_check_inbox(
    store: FileStore, tmp_path: Path
) -> None:
    posted = [await post(store, name) for name in ("a", "b", "c")]
    path = entry_file(tmp_path, 1)
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    with capture_logs() as logs:
        assert await store.read_inbox(RUN) == [posted[0], posted[2]]
        assert await store.read_inbox(RUN, 1) == [posted[2]]
        assert await store.read_inbox(RUN, 2) == [posted[2]]
    [warning] = [e for e in logs if e["event"] == "inbox_entry_damaged"]  # once per store
    assert (warning["seq"], warning["location"]) == (1, str(path))
    check = await store.check_inbox(RUN)
    assert check.entries == 3
    [(location, cause)] = check.damaged
    assert location == str(path)
    assert "checksum" in cause
    async with FileStore(tmp_path, codec=store.codec) as fresh:  # from 2: ids before are read
        with capture_logs():
            assert await fresh.read_inbox(RUN, 2) == [posted[2]]


async def test_an_entry_moved_to_another_seq_is_skipped_and_named(
    store: FileStore, tmp_path: Path
) -> None:
    first = await post(store, "a")
    entry_file(tmp_path, 1).hardlink_to(entry_file(tmp_path, 0))
    with capture_logs():
        assert await store.read_inbox(RUN) == [first]
    later = await post(store, "b")
    assert later.seq == 2
    with capture_logs():
        assert await store.read_inbox(RUN) == [first, later]
    [(_, cause)] = (await store.check_inbox(RUN)).damaged
    assert cause == "holds entry 0, not 1"


async def test_a_retry_of_an_id_skips_a_damaged_entry_while_it_looks_for_its_own(
    store: FileStore, tmp_path: Path
) -> None:
    await post(store, "a")
    first = await post(store, "b")
    path = entry_file(tmp_path, 0)
    path.write_bytes(path.read_bytes()[:10])
    async with FileStore(tmp_path, codec=store.codec) as other:  # knows no ids yet
        with capture_logs():
            assert await post(other, "b") == first


async def test_a_run_without_an_inbox_folder_reads_empty_and_gets_one_on_its_first_post(
    store: FileStore, tmp_path: Path
) -> None:
    inbox = tmp_path / "runs" / RUN / "inbox"
    assert not inbox.exists()  # as in every run written before inboxes
    assert await store.read_inbox(RUN) == []
    await store.delete_run(RUN)  # a tombstone, with no inbox to remove
    assert (await post(store, "a")).seq == 0
    assert inbox.is_dir()


async def test_a_duplicate_id_is_read_only_at_its_first_seq(
    store: FileStore, tmp_path: Path
) -> None:
    await post(store, "a")
    await post(store, "b")
    # a key rotation renames ids: the same id is then stored again at a later seq
    rotated = Codec(compress_above=64, keys={"k2": bytes(range(32))})
    async with FileStore(tmp_path, codec=rotated) as other:
        assert (await post(other, "a")).seq == 2
        await post(other, "c")
        assert [e.entry_id for e in await other.read_inbox(RUN, 2)] == ["c"]
    async with FileStore(tmp_path, codec=rotated) as fresh:
        assert [e.entry_id for e in await fresh.read_inbox(RUN, 1)] == ["b", "c"]


# --- power loss -----------------------------------------------------------------------

IDS = ("m0", "m1", "m2")


async def _posts(fs: SimFS, acked: list[InboxEntry]) -> None:
    store = FileStore("/store", fs=fs)
    try:
        await store.create_run(manifest())
        for entry_id in IDS:
            acked.append(await post(store, entry_id))
    except StorageError:
        pass  # the power went
    finally:
        await store.aclose()


async def test_a_post_that_returned_survives_power_loss_at_every_call() -> None:
    counting = SimFS()
    await _posts(counting, [])
    assert counting.ops > 3 * 6  # each post: claim, temp file, fsync, link, folder fsync ...
    for crash_at in range(1, counting.ops + 1):
        fs = SimFS(crash_at=crash_at)
        acked: list[InboxEntry] = []
        await _posts(fs, acked)
        async with FileStore("/store", fs=fs.after_power_loss()) as store:
            if not acked:
                continue  # the run itself may be gone
            stored = await store.read_inbox(RUN)
            assert stored[: len(acked)] == acked, crash_at
            for entry_id in IDS:  # the sender retries all: each ends up there once
                await post(store, entry_id)
            assert [e.entry_id for e in await store.read_inbox(RUN)] == list(IDS), crash_at


class CountingFS(OSFileSystem):
    """The operating system's files, counting the inbox entries read."""

    entries_read = 0

    def read(self, path: str) -> bytes:
        if path.endswith(ENTRY_SUFFIX):
            CountingFS.entries_read += 1
        return super().read(path)


async def test_posting_again_an_id_the_store_has_read_reads_one_entry_not_the_inbox(
    tmp_path: Path,
) -> None:
    store = FileStore(tmp_path / "store", fs=CountingFS())
    await store.create_run(manifest())
    for n in range(40):
        await post(store, f"m{n}")
    assert len(await store.read_inbox(RUN)) == 40
    CountingFS.entries_read = 0
    for n in range(40):  # as a recovery re-posts what it posted before
        again = await post(store, f"m{n}")
        assert (again.seq, again.entry_id) == (n, f"m{n}")
    assert CountingFS.entries_read == 40  # one each; a scan from the start read 820
