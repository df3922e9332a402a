"""Object <-> bytes: MessagePack through one encoder and one decoder cache.

Every value the package stores (records, manifests, snapshots, leases, agents'
states) and every user value the runtime records goes through
:func:`encode_value` / :func:`decode_value` or the typed helpers below, which
share :data:`encoder` and :func:`decoder_for` (msgspec decoders are built once
per type). Kept apart from bytes <-> bytes (the sealed envelope,
:mod:`._envelope`): encoding errors become ``EncodingError`` naming what failed
to encode, decoding errors ``CorruptedDataError`` (``CheckpointCorruptedError``
for snapshots) naming where the bytes came from.
"""

from __future__ import annotations

from typing import Any

import msgspec

from actorflow._text import error_message
from actorflow.errors import (
    CheckpointCorruptedError,
    CorruptedDataError,
    EncodingError,
    NewerFormatError,
)
from actorflow.storage._protocol import Lease
from actorflow.storage._records import FORMAT_VERSION, LogRecord, RunManifest, Snapshot

__all__ = [
    "ENCODE_ERRORS",
    "decode_lease",
    "decode_manifest",
    "decode_plain_record",
    "decode_record",
    "decode_snapshot",
    "decode_value",
    "decoder_for",
    "encode_lease",
    "encode_manifest",
    "encode_record",
    "encode_snapshot",
    "encode_value",
    "encoder",
]

encoder = msgspec.msgpack.Encoder()
"""The package's one MessagePack encoder."""

ENCODE_ERRORS = (TypeError, ValueError, OverflowError, RecursionError, msgspec.EncodeError)
"""What msgspec raises for a value it cannot encode (a lone surrogate is a ValueError,
nesting deeper than the stack a RecursionError, a huge int an OverflowError)."""
_DECODE_ERRORS = (msgspec.DecodeError, msgspec.ValidationError)
_decoders: dict[Any, msgspec.msgpack.Decoder[Any]] = {}


def decoder_for(type_: Any) -> msgspec.msgpack.Decoder[Any] | None:
    """The cached decoder for ``type_``; None for an unhashable type (no cache then)."""
    try:
        decoder = _decoders.get(type_)
    except TypeError:  # an unhashable annotation, e.g. Annotated[..., Meta(...)] with a list
        return None
    if decoder is None:
        decoder = _decoders[type_] = msgspec.msgpack.Decoder(type_)
    return decoder


def _label(what: str, detail: str | None) -> str:
    return what if detail is None else f"{what} {detail}"


def encode_value(value: object, what: str, detail: str | None = None) -> bytes:
    """MessagePack bytes of ``value``.

    ``what`` (and ``detail``, appended to it) name the value in an error; the
    message is only built when one is raised.

    Raises:
        EncodingError: the value holds something msgspec cannot encode.
    """
    try:
        return encoder.encode(value)
    except ENCODE_ERRORS as exc:
        raise EncodingError(_label(what, detail), error_message(exc)) from exc


def decode_value(data: bytes, type_: Any, what: str, detail: str | None = None) -> Any:
    """A value of type ``type_`` from MessagePack bytes (decoders cached per type).

    ``what`` (and ``detail``, appended to it) name the value in an error; the
    message is only built when one is raised.

    Raises:
        CorruptedDataError: the bytes do not decode as ``type_``.
    """
    try:
        decoder = decoder_for(type_)
        if decoder is None:
            return msgspec.msgpack.decode(data, type=type_)
        return decoder.decode(data)
    except _DECODE_ERRORS as exc:
        label = _label(what, detail)
        raise CorruptedDataError(label, f"does not decode as {type_!r}: {exc}") from exc


# --- the package's own records ------------------------------------------------------

_manifest_decoder = msgspec.msgpack.Decoder(RunManifest)
_snapshot_decoder = msgspec.msgpack.Decoder(Snapshot)
_lease_decoder = msgspec.msgpack.Decoder(Lease)
# Read back for every record of every log: bound once, taken from the one cache.
_record_decoder: msgspec.msgpack.Decoder[LogRecord] = msgspec.msgpack.Decoder(LogRecord)
_decoders.update(
    {
        RunManifest: _manifest_decoder,
        Snapshot: _snapshot_decoder,
        Lease: _lease_decoder,
        LogRecord: _record_decoder,
    }
)


def encode_manifest(manifest: RunManifest) -> bytes:
    """MessagePack of a manifest."""
    return encode_value(manifest, "manifest of run", repr(manifest.run_id))


def encode_record(record: LogRecord) -> bytes:
    """MessagePack of one log record (on every append's path: no label unless it fails)."""
    try:
        return encoder.encode(record)
    except ENCODE_ERRORS as exc:
        raise EncodingError(type(record).__name__, error_message(exc)) from exc


def encode_snapshot(snapshot: Snapshot) -> bytes:
    """MessagePack of a snapshot."""
    try:
        return encoder.encode(snapshot)
    except ENCODE_ERRORS as exc:
        what = f"checkpoint {snapshot.snapshot_id!r} of run {snapshot.run_id!r}"
        raise EncodingError(what, error_message(exc)) from exc


def encode_lease(lease: Lease) -> bytes:
    """MessagePack of a lease."""
    return encode_value(lease, "lease of run", repr(lease.run_id))


def _decode(decoder: msgspec.msgpack.Decoder[Any], data: bytes, location: str) -> Any:
    try:
        return decoder.decode(data)
    except msgspec.ValidationError as exc:
        # the envelope's checksum verified, so these are the bytes a writer
        # meant: well-formed but unknown here (a new record type or status)
        raise NewerFormatError(location, f"does not decode here: {exc}") from exc
    except _DECODE_ERRORS as exc:
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
    except _DECODE_ERRORS:
        return None
    return record


def decode_snapshot(data: bytes, location: str) -> Snapshot:
    """A snapshot from MessagePack.

    Raises:
        CheckpointCorruptedError: the bytes are not a snapshot.
        NewerFormatError: a newer actorflow wrote it, in a format this one
            would misread (it might lack a field that holds part of the run).
    """
    try:
        snapshot = _snapshot_decoder.decode(data)
    except _DECODE_ERRORS as exc:
        raise CheckpointCorruptedError(location, f"does not decode: {exc}") from exc
    if snapshot.format_version > FORMAT_VERSION:
        raise NewerFormatError(
            location,
            f"snapshot format {snapshot.format_version}; this actorflow reads up to "
            f"{FORMAT_VERSION}",
        )
    return snapshot


def decode_lease(data: bytes, location: str) -> Lease:
    """A lease from MessagePack.

    Raises:
        CorruptedDataError: the bytes are not a lease.
    """
    result: Lease = _decode(_lease_decoder, data, location)
    return result
