"""With encryption on, snapshot file names carry no phase and no trigger text.

Phases and ``ctx.checkpoint(reason)`` texts are the user's words; a sealed
store seals them into the name's label, and still lists them exactly. Names
written before (the user's text in clear) still list, load and delete.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING
from urllib.parse import unquote

import msgspec
import pytest

from actorflow.storage import Codec, FileStore
from actorflow.storage._manifests import snapshot_info
from actorflow.storage._records import RunManifest, Snapshot
from actorflow.storage._snapshot_names import (
    SEALED,
    SnapshotNames,
    entry_name,
    snapshot_file_name,
)

if TYPE_CHECKING:
    from pathlib import Path

KEY = bytes(range(32))
SECRET_PHASE = "Nightingale_~%41/../draft#1"
SECRET_REASON = "manual:merger with ACME_Corp ~ 100%/..\n"
WORDS = ("nightingale", "acme")


def sealed_store(path: Path, **keys: bytes) -> FileStore:
    return FileStore(path, codec=Codec(keys=keys or {"k1": KEY}))


def manifest() -> RunManifest:
    return RunManifest(run_id="r1", workflow="wf", input=b"\x90", input_hash="h")


def snap(sid: str, position: int, **fields: object) -> Snapshot:
    values: dict[str, object] = {
        "created": 1769335300.123456,
        "trigger": SECRET_REASON,
        "phase": SECRET_PHASE,
    }
    values.update(fields)
    return Snapshot(run_id="r1", snapshot_id=sid, position=position, **values)  # type: ignore[arg-type]


def names_under(path: Path) -> list[str]:
    return [p.name for p in path.rglob("*")]


def assert_no_words(names: list[str]) -> None:
    for name in names:
        for text in (name, unquote(name)):
            assert not any(w in text.lower() for w in WORDS), name


@pytest.mark.parametrize(
    ("phase", "trigger"),
    [
        (SECRET_PHASE, SECRET_REASON),
        (None, "manual:acme"),
        ("", "manual:acme"),  # an empty phase, which a plain name cannot tell from none
        ("Nightingale" * 20, "phase_end"),  # too long for a name: the manifest lists it
    ],
)
async def test_sealed_names_hold_no_phase_or_trigger_and_list_back_exactly(
    tmp_path: Path, phase: str | None, trigger: str
) -> None:
    store = sealed_store(tmp_path)
    await store.create_run(manifest())
    s = snap("ck_1.a", 7, phase=phase, trigger=trigger)
    info = await store.write_snapshot(s)
    assert_no_words(names_under(tmp_path))
    assert (info.phase, info.trigger) == (phase, trigger)
    assert await sealed_store(tmp_path).list_snapshots("r1") == [info]
    assert await sealed_store(tmp_path).read_snapshot("r1", "ck_1.a") == s
    assert await store.delete_snapshot("r1", "ck_1.a") > 0
    assert await store.list_snapshots("r1") == []
    assert list((tmp_path / "runs/r1/snapshots").iterdir()) == []


async def test_a_sealed_name_reads_as_position_time_sealed_id(tmp_path: Path) -> None:
    store = sealed_store(tmp_path)
    await store.create_run(manifest())
    await store.write_snapshot(snap("ck-7", 42))
    (path,) = (tmp_path / "runs/r1/snapshots").iterdir()
    assert path.name.startswith("000000042_20260125T100140Z_sealed_ck-7~k1~")
    again = sealed_store(tmp_path / "again")
    await again.create_run(manifest())
    await again.write_snapshot(snap("ck-7", 42))
    # one snapshot is always one name: a rewrite after a lost answer finds it
    assert [p.name for p in (tmp_path / "again/runs/r1/snapshots").iterdir()] == [path.name]


async def test_after_rotation_old_labels_open_with_the_old_key(tmp_path: Path) -> None:
    old = sealed_store(tmp_path)
    await old.create_run(manifest())
    info = await old.write_snapshot(snap("a", 1))
    rotated = FileStore(tmp_path, codec=Codec(keys={"k1": KEY, "k2": KEY[::-1]}, key_id="k2"))
    later = await rotated.write_snapshot(snap("b", 2))
    assert await rotated.list_snapshots("r1") == [info, later]


def test_a_label_opens_only_for_its_run_and_snapshot_with_the_key() -> None:
    names = SnapshotNames(Codec(keys={"k1": KEY}))
    s = Snapshot(run_id="r1", snapshot_id="a", position=1, created=2.0, trigger="manual:x")
    entry = snapshot_info(s, stored_size=10, raw_size=20)
    name = names.entry("r1", entry)
    assert name is not None
    assert names.parse("r1", name) == entry
    hidden = (None, SEALED)
    moved = name.replace("_a~", "_b~")
    for run_id, text, reader in [
        ("r2", name, names),  # another run's label
        ("r1", moved, names),  # another snapshot's label
        ("r1", name, SnapshotNames(Codec())),  # no key
        ("r1", name, SnapshotNames(Codec(keys={"k1": KEY[::-1]}))),  # a wrong key
    ]:
        parsed = reader.parse(run_id, text)
        assert parsed is not None  # still a snapshot, listed without its label
        assert (parsed.phase, parsed.trigger) == hidden


async def test_names_written_before_still_list_load_and_delete(tmp_path: Path) -> None:
    """Encrypted snapshots whose names hold their phase in clear, as before."""
    store = sealed_store(tmp_path)
    await store.create_run(manifest())
    folder = tmp_path / "runs/r1/snapshots"
    named = await store.write_snapshot(snap("named", 1))
    (path,) = folder.iterdir()
    plain = entry_name(named)
    assert plain is not None
    os.rename(path, folder / plain)
    listed = await store.write_snapshot(snap("listed", 2, phase="p" * 250))  # manifest-listed
    (path,) = (p for p in folder.iterdir() if p.name != plain)
    assert path.name == snapshot_file_name(listed, sealed=True)
    os.rename(path, folder / snapshot_file_name(listed))
    fresh = sealed_store(tmp_path)
    # names written before carry no "~unsynced": they were synced when written
    assert not named.durable
    assert await fresh.list_snapshots("r1") == [
        msgspec.structs.replace(named, durable=True),
        listed,
    ]
    assert (await fresh.read_snapshot("r1", "named")).trigger == SECRET_REASON
    assert (await fresh.read_snapshot("r1", "listed")).position == 2
    assert await fresh.delete_snapshot("r1", "listed") == listed.stored_size
    assert await fresh.delete_snapshot("r1", "named") == named.stored_size
    assert list(folder.iterdir()) == []
