"""Object <-> bytes: the MessagePack of every stored record type.

Kept apart from bytes <-> bytes (the sealed envelope, :mod:`._envelope`): encoding
errors become ``EncodingError`` naming what failed to encode, decoding errors
``CorruptedDataError`` (``CheckpointCorruptedError`` for snapshots) naming where
the bytes came from.
"""

from __future__ import annotations

from typing import Any

import msgspec

from actorflow.errors import CheckpointCorruptedError, CorruptedDataError, EncodingError
from actorflow.errors._text import error_message
from actorflow.storage._protocol import Lease
from actorflow.storage._records import LogRecord, RunManifest, Snapshot

__all__ = [
    "decode_lease",
    "decode_manifest",
    "decode_plain_record",
    "decode_record",
    "decode_snapshot",
    "encode_lease",
    "encode_manifest",
    "encode_record",
    "encode_snapshot",
]

_encoder = msgspec.msgpack.Encoder()
_manifest_decoder = msgspec.msgpack.Decoder(RunManifest)
_record_decoder: msgspec.msgpack.Decoder[LogRecord] = msgspec.msgpack.Decoder(LogRecord)
_snapshot_decoder = msgspec.msgpack.Decoder(Snapshot)
_lease_decoder = msgspec.msgpack.Decoder(Lease)


def _encode(obj: object, what: str) -> bytes:
    try:
        return _encoder.encode(obj)
    except (TypeError, ValueError, OverflowError, RecursionError, msgspec.EncodeError) as exc:
        # a lone surrogate is a ValueError, nesting deeper than the stack a RecursionError
        raise EncodingError(what, error_message(exc)) from exc


def encode_manifest(manifest: RunManifest) -> bytes:
    """MessagePack of a manifest."""
    return _encode(manifest, f"manifest of run {manifest.run_id!r}")


def encode_record(record: LogRecord) -> bytes:
    """MessagePack of one log record."""
    return _encode(record, f"{type(record).__name__}")


def encode_snapshot(snapshot: Snapshot) -> bytes:
    """MessagePack of a snapshot."""
    return _encode(snapshot, f"checkpoint {snapshot.snapshot_id!r} of run {snapshot.run_id!r}")


def encode_lease(lease: Lease) -> bytes:
    """MessagePack of a lease."""
    return _encode(lease, f"lease of run {lease.run_id!r}")


def _decode(decoder: msgspec.msgpack.Decoder[Any], data: bytes, location: str) -> Any:
    try:
        return decoder.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise CorruptedDataError(location, f"does not decode: {exc}") from exc


def decode_manifest(data: bytes, location: str) -> RunManifest:
    """A manifest from MessagePack.

    Raises:
        CorruptedDataError: the bytes are not a manifest.
    """
    result: RunManifest = _decode(_manifest_decoder, data, location)
    return result


def decode_record(data: bytes, location: str) -> LogRecord:
    """One log record from MessagePack.

    Raises:
        CorruptedDataError: the bytes are not a log record.
    """
    result: LogRecord = _decode(_record_decoder, data, location)
    return result


def decode_plain_record(data: bytes | memoryview) -> LogRecord | None:
    """One log record from MessagePack, or None if the bytes are not one (a lean path)."""
    try:
        record: LogRecord = _record_decoder.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    return record


def decode_snapshot(data: bytes, location: str) -> Snapshot:
    """A snapshot from MessagePack.

    Raises:
        CheckpointCorruptedError: the bytes are not a snapshot.
    """
    try:
        return _snapshot_decoder.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise CheckpointCorruptedError(location, f"does not decode: {exc}") from exc


def decode_lease(data: bytes, location: str) -> Lease:
    """A lease from MessagePack.

    Raises:
        CorruptedDataError: the bytes are not a lease.
    """
    result: Lease = _decode(_lease_decoder, data, location)
    return result
