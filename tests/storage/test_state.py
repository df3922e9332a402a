"""State versioning, and golden files written by version 1 that today's code must read."""

from __future__ import annotations

import pathlib
from typing import Any, ClassVar

import msgspec
import pytest

from actorflow.errors import EncodingError, IncompatibleStateError
from actorflow.storage._sealing import Codec
from actorflow.storage._state import decode_state, encode_state, state_version
from tests.storage.golden.make_golden import KEY, golden_snapshot

GOLDEN = pathlib.Path(__file__).parent / "golden" / "v1"


class Notes(msgspec.Struct):
    """Version 2 of the golden state: a list instead of a comma-separated string."""

    state_version: ClassVar[int] = 2
    items: list[str]
    count: int = 0
    tags: list[str] = []

    @classmethod
    def upgrade_state(cls, data: Any, from_version: int) -> Any:
        if from_version == 1:
            data["items"] = data.pop("text").split(",")
        return data


class NotesWithDefaults(msgspec.Struct):
    """Version 1 evolved only by adding defaulted fields: no upgrade needed."""

    text: str
    count: int = 0
    added: bool = True


class NotesNoUpgrade(msgspec.Struct):
    state_version: ClassVar[int] = 2
    items: list[str]


def test_state_round_trips_at_the_current_version() -> None:
    notes = Notes(items=["a"], count=1)
    assert decode_state(encode_state(notes), Notes, version=2) == notes
    assert state_version(Notes) == 2
    assert state_version(NotesWithDefaults) == 1


def test_golden_v1_state_upgrades_to_v2() -> None:
    data = (GOLDEN / "state_notes.msgpack").read_bytes()
    assert decode_state(data, Notes, version=1) == Notes(items=["a", "b", "c"], count=3)


def test_golden_v1_state_decodes_into_a_class_with_added_defaults() -> None:
    data = (GOLDEN / "state_notes.msgpack").read_bytes()
    assert decode_state(data, NotesWithDefaults) == NotesWithDefaults(text="a,b,c", count=3)


def test_an_old_state_without_upgrade_is_a_helpful_error() -> None:
    data = (GOLDEN / "state_notes.msgpack").read_bytes()
    with pytest.raises(IncompatibleStateError, match="upgrade_state"):
        decode_state(data, NotesNoUpgrade, version=1)


def test_a_state_from_a_newer_class_is_refused() -> None:
    with pytest.raises(IncompatibleStateError, match="newer version"):
        decode_state(encode_state(Notes(items=[])), NotesWithDefaults, version=2)


def test_non_encodable_state_is_an_encoding_error() -> None:
    with pytest.raises(EncodingError, match="state of type object"):
        encode_state(object())


@pytest.mark.parametrize("name", ["plain", "gzip", "zstd", "aes"])
def test_golden_v1_files_still_load(name: str) -> None:
    codec = Codec(keys={"k1": KEY}) if name == "aes" else Codec()
    address = (GOLDEN / f"blob_{name}.address").read_text()
    blob = codec.load_blob(
        (GOLDEN / f"blob_{name}.bin").read_bytes(),
        run_id="golden-run",
        address=address,
        location="b",
    )
    assert blob == (GOLDEN / "state_notes.msgpack").read_bytes()
    snap = codec.load_snapshot(
        (GOLDEN / f"snapshot_{name}.bin").read_bytes(),
        run_id="golden-run",
        snapshot_id="0001",
        location="s",
    )
    assert snap == golden_snapshot(address)
    ref = snap.agents["writer"].state
    assert ref is not None
    assert decode_state(blob, Notes, version=ref.version).items == ["a", "b", "c"]
    record = codec.load_record(
        (GOLDEN / f"record_{name}.bin").read_bytes(), run_id="golden-run", position=7, location="l"
    )
    assert record == golden_snapshot(address).steps[0]
