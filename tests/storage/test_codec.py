"""The sealed envelope: checksums first, bounded decompression, encryption bound to its place."""

from __future__ import annotations

import gzip
import os
import struct

import msgspec
import pytest

from actorflow.errors import (
    CheckpointCorruptedError,
    CheckpointTooLargeError,
    ConfigurationError,
    CorruptedDataError,
    EncodingError,
    EncryptionKeyError,
    EncryptionKeyMissingError,
)
from actorflow.storage._envelope import digest
from actorflow.storage._records import EventRecord, RunManifest, Snapshot, StepRecord
from actorflow.storage._sealing import _FIXED, Codec, Compression, Kind

KEY = bytes(range(32))

CODECS = {
    "plain": lambda: Codec(compression=None),
    "gzip": lambda: Codec(compression="gzip"),
    "zstd": lambda: Codec(compression="zstd"),
    "aes": lambda: Codec(keys={"k1": KEY}),
    "blake2b": lambda: Codec(checksum="blake2b"),
}


@pytest.fixture(params=sorted(CODECS))
def codec(request: pytest.FixtureRequest) -> Codec:
    return CODECS[request.param]()


def big_snapshot(size: int = 50_000) -> Snapshot:
    steps = tuple(
        StepRecord(step_id=f"p/{i}", kind="ask", result=b"result %d " % i * 8)
        for i in range(size // 100)
    )
    return Snapshot(
        run_id="r1", snapshot_id="s1", position=9, created=1.0, trigger="t", steps=steps
    )


def test_snapshot_round_trips(codec: Codec) -> None:
    snap = big_snapshot()
    sealed, raw = codec.dump_snapshot(snap)
    assert raw == len(msgspec.msgpack.encode(snap))
    loaded = codec.load_snapshot(sealed, run_id="r1", snapshot_id="s1", location="x")
    assert loaded == snap


def test_compression_applies_above_the_threshold_only() -> None:
    codec = Codec(compression="gzip", compress_above=1000)
    small = codec.seal(b"a" * 999, kind=Kind.BLOB, run_id="r", slot="s")
    large = codec.seal(b"a" * 1000, kind=Kind.BLOB, run_id="r", slot="s")
    assert codec.verify(small, location="x")[0].compression is Compression.NONE
    assert codec.verify(large, location="x")[0].compression is Compression.GZIP
    assert len(large) < 200


def test_compression_off_by_flag() -> None:
    sealed = Codec(compression=None).seal(b"a" * 10_000, kind=Kind.BLOB, run_id="r", slot="s")
    assert len(sealed) > 10_000


def test_every_record_family_round_trips(codec: Codec) -> None:
    manifest = RunManifest(run_id="r1", workflow="wf", input=b"\x01", input_hash="h")
    assert codec.load_manifest(codec.dump_manifest(manifest), run_id="r1", location="m") == manifest
    record = EventRecord(kind="paused", data=b"x")
    sealed = codec.dump_record(record, run_id="r1", position=4)
    assert codec.load_record(sealed, run_id="r1", position=4, location="l") == record
    address, blob = codec.dump_blob(b"state" * 2000, run_id="r1")
    assert codec.load_blob(blob, run_id="r1", address=address, location="b") == b"state" * 2000


def test_a_file_of_one_kind_never_decodes_as_another(codec: Codec) -> None:
    sealed = codec.dump_record(EventRecord(kind="x"), run_id="r1", position=0)
    with pytest.raises(CorruptedDataError, match="holds a LOG_RECORD, not a MANIFEST"):
        codec.load_manifest(sealed, run_id="r1", location="m")


@pytest.mark.parametrize("region", ["magic", "header", "checksum", "body", "last"])
def test_a_flipped_byte_anywhere_is_caught_before_decoding(codec: Codec, region: str) -> None:
    sealed = bytearray(codec.dump_snapshot(big_snapshot())[0])
    kid = len(codec.key_id or "")
    at = {
        "magic": 1,
        "header": 20,
        "checksum": _FIXED.size + kid + 5,
        "body": _FIXED.size + kid + 40,
        "last": len(sealed) - 1,
    }[region]
    sealed[at] ^= 0x40
    with pytest.raises(CheckpointCorruptedError, match="snapshots/s1"):
        codec.load_snapshot(bytes(sealed), run_id="r1", snapshot_id="s1", location="snapshots/s1")


@pytest.mark.parametrize("keep", [0, 10, _FIXED.size, _FIXED.size + 40, -1])
def test_a_truncated_envelope_is_caught(codec: Codec, keep: int) -> None:
    sealed = codec.dump_snapshot(big_snapshot())[0]
    with pytest.raises(CheckpointCorruptedError, match="corrupt"):
        codec.load_snapshot(sealed[:keep], run_id="r1", snapshot_id="s1", location="s")


def test_decompression_is_bounded_by_the_header() -> None:
    """A bomb with a valid checksum but a small raw length in its header never inflates."""
    codec = Codec(compression="gzip")
    bomb = gzip.compress(b"\0" * 5_000_000)
    fixed = _FIXED.pack(b"AFLW", 1, Kind.BLOB, Compression.GZIP, 0, 1, 0, 0, 100, len(bomb))
    checksum = digest(codec._checksum, fixed, b"", bomb)
    with pytest.raises(CorruptedDataError, match="gzip stream"):
        codec.open(fixed + checksum + bomb, kind=Kind.BLOB, run_id="r", slot="s", location="b")


def test_a_huge_claimed_size_is_refused_before_decompressing() -> None:
    codec = Codec(max_snapshot_bytes=1000, max_decoded_bytes=1000)
    body = b"x" * 10
    fixed = _FIXED.pack(b"AFLW", 1, Kind.BLOB, Compression.GZIP, 0, 1, 0, 0, 10**12, len(body))
    checksum = digest(codec._checksum, fixed, b"", body)
    with pytest.raises(CorruptedDataError, match="max_decoded_bytes"):
        codec.open(fixed + checksum + body, kind=Kind.BLOB, run_id="r", slot="s", location="b")


def test_oversize_snapshot_is_a_clear_error() -> None:
    codec = Codec(max_snapshot_bytes=10_000)
    with pytest.raises(CheckpointTooLargeError, match="over the limit of 10000"):
        codec.dump_snapshot(big_snapshot())


def test_a_large_snapshot_logs_a_warning() -> None:
    from structlog.testing import capture_logs

    codec = Codec(warn_snapshot_bytes=1000)
    with capture_logs() as logs:
        codec.dump_snapshot(big_snapshot())
    assert [e["event"] for e in logs] == ["checkpoint_large"]


def test_non_encodable_values_are_an_encoding_error() -> None:
    class Weird:
        pass

    bad = EventRecord(kind="x", data=Weird())  # type: ignore[arg-type]
    with pytest.raises(EncodingError, match="cannot be encoded"):
        Codec().dump_record(bad, run_id="r", position=0)


def test_ciphertext_is_bound_to_run_and_slot() -> None:
    codec = Codec(keys={"k1": KEY})
    sealed = codec.dump_record(EventRecord(kind="x"), run_id="r1", position=3)
    with pytest.raises(EncryptionKeyError, match="moved from another run or slot"):
        codec.load_record(sealed, run_id="r1", position=4, location="l")
    with pytest.raises(EncryptionKeyError, match="moved"):
        codec.load_record(sealed, run_id="r2", position=3, location="l")


def test_wrong_or_missing_key_is_an_encryption_key_error() -> None:
    sealed = Codec(keys={"k1": KEY}).dump_record(EventRecord(kind="x"), run_id="r", position=0)
    with pytest.raises(EncryptionKeyError, match="key is wrong"):
        Codec(keys={"k1": os.urandom(32)}).load_record(sealed, run_id="r", position=0, location="l")
    with pytest.raises(EncryptionKeyMissingError, match="was not given that key"):
        Codec(keys={"k2": KEY}).load_record(sealed, run_id="r", position=0, location="l")


def test_keys_rotate_and_old_data_still_opens() -> None:
    old = Codec(keys={"k1": KEY})
    sealed = old.dump_record(EventRecord(kind="x"), run_id="r", position=0)
    new = Codec(keys={"k1": KEY, "k2": os.urandom(32)}, key_id="k2")
    assert new.load_record(sealed, run_id="r", position=0, location="l") == EventRecord(kind="x")
    assert (
        new.verify(new.dump_record(EventRecord(kind="x"), run_id="r", position=0), location="l")[
            0
        ].key_id
        == "k2"
    )


def test_encrypted_blob_addresses_are_keyed() -> None:
    plain, a, b = Codec(), Codec(keys={"k1": KEY}), Codec(keys={"k1": os.urandom(32)})
    assert a.blob_address(b"x") != plain.blob_address(b"x")
    assert a.blob_address(b"x") != b.blob_address(b"x")
    assert a.blob_address(b"x").startswith("k1.")


def test_encrypted_envelopes_do_not_show_the_plaintext() -> None:
    sealed = Codec(keys={"k1": KEY}, compression=None).seal(
        b"secret-plan" * 10, kind=Kind.BLOB, run_id="r", slot="s"
    )
    assert b"secret-plan" not in sealed


def test_a_blob_whose_content_does_not_match_its_address_is_corrupt() -> None:
    codec = Codec()
    _, sealed = codec.dump_blob(b"one", run_id="r")
    with pytest.raises(CorruptedDataError, match="does not match its address"):
        codec.load_blob(sealed, run_id="r", address=codec.blob_address(b"two"), location="b")


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"gzip_level": 0}, "gzip_level"),
        ({"zstd_level": 30}, "zstd_level"),
        ({"compression": "lz4"}, "compression"),
        ({"checksum": "md5"}, "checksum"),
        ({"keys": {"k1": b"short"}}, "16, 24 or 32 bytes"),
        ({"keys": {"a/b": KEY}}, "key id"),
        ({"keys": {"a": KEY, "b": KEY}}, "key_id"),
        ({"key_id": "k9"}, "key_id"),
    ],
)
def test_bad_options_are_configuration_errors(options: dict[str, object], match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        Codec(**options)  # type: ignore[arg-type]


def test_a_wrong_envelope_version_says_so() -> None:
    codec = Codec()
    sealed = bytearray(codec.seal(b"x", kind=Kind.BLOB, run_id="r", slot="s"))
    struct.pack_into(">B", sealed, 4, 9)
    with pytest.raises(CorruptedDataError, match="envelope version 9"):
        codec.verify(bytes(sealed), location="b")


@pytest.mark.parametrize("compression", ["zstd", "gzip"])
def test_one_codec_seals_and_opens_from_many_threads_at_once(compression: str) -> None:
    """Stores seal and open in worker threads: no (de)compressor state is shared."""
    import threading

    from actorflow.storage._sealing import Kind

    codec = Codec(compression=compression)  # type: ignore[arg-type]
    payloads = [os.urandom(64) * (500 + i) for i in range(8)]
    sealed = [
        codec.seal(p, kind=Kind.SNAPSHOT, run_id="r", slot=f"s{i}") for i, p in enumerate(payloads)
    ]
    wrong: list[int] = []
    start = threading.Barrier(8)

    def work(i: int) -> None:
        start.wait()
        for _ in range(150):
            again = codec.seal(payloads[i], kind=Kind.SNAPSHOT, run_id="r", slot=f"s{i}")
            opened = codec.open(again, kind=Kind.SNAPSHOT, run_id="r", slot=f"s{i}", location="x")
            old = codec.open(sealed[i], kind=Kind.SNAPSHOT, run_id="r", slot=f"s{i}", location="x")
            if opened != payloads[i] or old != payloads[i]:
                wrong.append(i)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not wrong


def test_the_lean_record_path_agrees_with_the_full_one_or_steps_aside() -> None:
    """Reading a log back takes a lean path for plain records; it never accepts more."""
    record = StepRecord(step_id="0", kind="ask", target="a", result=b"\x01" * 100)
    plain = Codec(compression=None).dump_record(record, run_id="r", position=3)
    assert Codec().load_plain_record(plain) == record
    assert Codec().load_record(plain, run_id="r", position=3, location="l") == record
    # other options: the full path decides
    big = StepRecord(step_id="0", kind="ask", result=b"x" * 10_000)
    assert Codec().load_plain_record(Codec().dump_record(big, run_id="r", position=0)) is None
    secret = Codec(keys={"k1": KEY}).dump_record(record, run_id="r", position=0)
    assert Codec(keys={"k1": KEY}).load_plain_record(secret) is None
    # any damaged byte: never a record from the lean path
    for i in range(len(plain)):
        damaged = bytearray(plain)
        damaged[i] ^= 0x01
        assert Codec().load_plain_record(bytes(damaged)) is None, i
    assert Codec().load_plain_record(plain[:-1]) is None
