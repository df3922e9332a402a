"""Object <-> bytes (MessagePack) kept apart from bytes <-> bytes (the sealed envelope).

Every stored object is MessagePack sealed in an envelope::

    fixed header (32 bytes, big endian)
        magic b"AFLW" | format version u8 | kind u8 | compression u8 |
        encryption u8 | checksum algorithm u8 | key id length u8 | reserved u16 |
        raw length u64 | body length u64
    key id (key id length bytes, ASCII)
    checksum of (fixed header + key id + body)
    body: the payload, compressed, then encrypted (nonce + ciphertext + tag)

Reading verifies the checksum before anything is decrypted, decompressed or
decoded, and decompresses at most ``raw length`` bytes, which itself is bounded
by ``max_decoded_bytes``: a damaged or hostile file can neither be loaded nor
inflate into memory. With encryption, AES-GCM binds the ciphertext to its header
and to a context (run id and slot), so it cannot be moved to another run or slot.
"""

from __future__ import annotations

import enum
import gzip
import hashlib
import hmac
import os
import re
import struct
import threading
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal

from actorflow._log import get_logger
from actorflow.errors import (
    CheckpointCorruptedError,
    CheckpointTooLargeError,
    ConfigurationError,
    CorruptedDataError,
    EncryptionKeyError,
)
from actorflow.storage._msgpack import (
    decode_manifest,
    decode_plain_record,
    decode_record,
    decode_snapshot,
    encode_manifest,
    encode_record,
    encode_snapshot,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

    from actorflow.storage._records import LogRecord, RunManifest, Snapshot

__all__ = [
    "MAGIC",
    "Codec",
    "Compression",
    "Kind",
    "SealedHeader",
    "zstd_available",
]

_log = get_logger(__name__)

MAGIC: Final = b"AFLW"
ENVELOPE_VERSION: Final = 1
_FIXED = struct.Struct(">4sBBBBBBHQQ")
_NONCE = 12
_KEY_ID = re.compile(r"[A-Za-z0-9_.\-]{1,64}")


class Kind(enum.IntEnum):
    """What an envelope holds; a file of one kind never decodes as another."""

    MANIFEST = 1
    LOG_RECORD = 2
    BLOB = 3
    SNAPSHOT = 4
    LEASE = 5


_KINDS = {member.value: member for member in Kind}
_LOG_RECORD: Final = int(Kind.LOG_RECORD)


class Compression(enum.IntEnum):
    """Compression of an envelope's body."""

    NONE = 0
    GZIP = 1
    ZSTD = 2


_COMPRESSIONS = {member.value: member for member in Compression}
_PLAIN: Final = int(Compression.NONE)


class _Checksum(enum.IntEnum):
    SHA256 = 1
    BLAKE2B = 2


_DIGEST_SIZE = {_Checksum.SHA256: 32, _Checksum.BLAKE2B: 32}


_CHECKSUMS = {member.value: member for member in _Checksum}


def _blake(data: bytes) -> Any:
    return hashlib.blake2b(data, digest_size=32)


_SHA256: Final = int(_Checksum.SHA256)


def zstd_available() -> bool:
    """Whether the ``zstd`` extra (the ``zstandard`` package) is installed."""
    try:
        import zstandard  # noqa: F401
    except ImportError:
        return False
    return True


# --- bytes <-> bytes ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SealedHeader:
    """The parsed fixed header of an envelope (after its checksum verified)."""

    kind: Kind
    compression: Compression
    encrypted: bool
    key_id: str | None
    raw_length: int
    body_length: int


def _context(run_id: str, slot: str) -> bytes:
    return f"{run_id}\x00{slot}".encode()


class Codec:
    """How bytes are sealed for storage: compression, checksum, encryption, limits.

    Args:
        compression: ``"auto"`` (zstd if the ``zstd`` extra is installed, else
            gzip), ``"zstd"``, ``"gzip"`` or ``None`` for none.
        compress_above: payloads of at least this many bytes are compressed.
        gzip_level: gzip level (1-9).
        zstd_level: zstd level (1-22).
        checksum: ``"sha256"`` (hardware accelerated on most CPUs) or ``"blake2b"``.
        keys: encryption keys by key id (16, 24 or 32 bytes each; extra ``crypto``).
            Old keys stay here after rotation so older data still opens.
        key_id: the key new data is encrypted with; defaults to the only key.
        max_snapshot_bytes: a snapshot's encoded size limit.
        warn_snapshot_bytes: above this size a ``checkpoint_large`` warning is logged.
        max_decoded_bytes: the most any envelope may claim to decompress to.

    Raises:
        ConfigurationError: an option is out of range, a key has a bad size, a
            needed extra is not installed.
    """

    def __init__(
        self,
        *,
        compression: Literal["auto", "zstd", "gzip"] | None = "auto",
        compress_above: int = 4096,
        gzip_level: int = 6,
        zstd_level: int = 3,
        checksum: Literal["sha256", "blake2b"] = "sha256",
        keys: Mapping[str, bytes] | None = None,
        key_id: str | None = None,
        max_snapshot_bytes: int = 256 * 1024 * 1024,
        warn_snapshot_bytes: int = 16 * 1024 * 1024,
        max_decoded_bytes: int = 1024 * 1024 * 1024,
    ) -> None:
        self.compression = self._pick_compression(compression)
        self.compress_above = compress_above
        if not 1 <= gzip_level <= 9:
            raise ConfigurationError("gzip_level", gzip_level, "1 to 9")
        if not 1 <= zstd_level <= 22:
            raise ConfigurationError("zstd_level", zstd_level, "1 to 22")
        self.gzip_level = gzip_level
        self.zstd_level = zstd_level
        if checksum not in ("sha256", "blake2b"):
            raise ConfigurationError("checksum", checksum, "'sha256' or 'blake2b'")
        self._checksum = _Checksum.SHA256 if checksum == "sha256" else _Checksum.BLAKE2B
        if warn_snapshot_bytes > max_snapshot_bytes:
            warn_snapshot_bytes = max_snapshot_bytes
        self.max_snapshot_bytes = max_snapshot_bytes
        self.warn_snapshot_bytes = warn_snapshot_bytes
        self.max_decoded_bytes = max(max_decoded_bytes, max_snapshot_bytes)
        self._ciphers: dict[str, Any] = {}
        self.key_id: str | None = None
        self._address_key: bytes | None = None
        if keys:
            self._set_keys(keys, key_id)
        elif key_id is not None:
            raise ConfigurationError("key_id", key_id, "a key id listed in keys=")
        # zstandard's (de)compressors are not thread-safe, and stores seal and
        # open in worker threads: one of each per thread.
        self._zstd = threading.local()

    # --- configuration ----------------------------------------------------------

    @staticmethod
    def _pick_compression(compression: str | None) -> Compression:
        if compression is None or compression == "none":
            return Compression.NONE
        if compression == "gzip":
            return Compression.GZIP
        if compression == "auto":
            return Compression.ZSTD if zstd_available() else Compression.GZIP
        if compression == "zstd":
            if not zstd_available():
                raise ConfigurationError(
                    "compression", compression, "an installed extra: pip install 'actorflow[zstd]'"
                )
            return Compression.ZSTD
        raise ConfigurationError("compression", compression, "'auto', 'zstd', 'gzip' or None")

    def _set_keys(self, keys: Mapping[str, bytes], key_id: str | None) -> None:
        try:
            from cryptography.hazmat.primitives.ciphers.aead import AESGCM
        except ImportError:  # pragma: no cover - the dev environment has it
            raise ConfigurationError(
                "keys", "...", "the crypto extra: pip install 'actorflow[crypto]'"
            ) from None
        for kid, key in keys.items():
            if not _KEY_ID.fullmatch(kid):
                raise ConfigurationError("key id", kid, "1-64 characters of [A-Za-z0-9_.-]")
            if not isinstance(key, bytes) or len(key) not in (16, 24, 32):
                raise ConfigurationError(f"key {kid!r}", "<redacted>", "16, 24 or 32 bytes")
            self._ciphers[kid] = AESGCM(key)
        if key_id is None:
            if len(keys) != 1:
                raise ConfigurationError("key_id", None, "the id of the key to encrypt with")
            key_id = next(iter(keys))
        if key_id not in keys:
            raise ConfigurationError("key_id", key_id, f"one of {sorted(keys)}")
        self.key_id = key_id
        # A separate key for blob addresses, derived so equal plaintexts do not show.
        self._address_key = hmac.digest(keys[key_id], b"actorflow blob address", "sha256")

    @property
    def encrypted(self) -> bool:
        """Whether new data is encrypted."""
        return self.key_id is not None

    def describe(self) -> str:
        """A short label such as ``zstd-3+aes`` for logs and benchmarks."""
        label = {
            Compression.NONE: "none",
            Compression.GZIP: f"gzip-{self.gzip_level}",
            Compression.ZSTD: f"zstd-{self.zstd_level}",
        }[self.compression]
        return label + ("+aes" if self.encrypted else "")

    # --- addresses --------------------------------------------------------------

    def blob_address(self, data: bytes) -> str:
        """The content address of ``data``: sha256, or a keyed hash with encryption on."""
        if self._address_key is None:
            return hashlib.sha256(data).hexdigest()
        digest = hmac.digest(self._address_key, data, "sha256").hex()
        return f"{self.key_id}.{digest}"

    # --- sealing ----------------------------------------------------------------

    def seal(self, payload: bytes, *, kind: Kind, run_id: str, slot: str) -> bytes:
        """Compress, encrypt and checksum ``payload`` for the place ``(run_id, slot)``."""
        if self.key_id is None and (
            len(payload) < self.compress_above or self.compression is Compression.NONE
        ):
            # the common case (every small log record), lean: the same bytes
            # as the general path below with nothing to compress or encrypt
            n = len(payload)
            fixed = _FIXED.pack(
                MAGIC, ENVELOPE_VERSION, kind, _PLAIN, 0, self._checksum, 0, 0, n, n
            )
            h = hashlib.sha256(fixed) if self._checksum is _Checksum.SHA256 else _blake(fixed)
            h.update(payload)
            return b"".join((fixed, h.digest(), payload))
        compression = Compression.NONE
        body = payload
        if self.compression is not Compression.NONE and len(payload) >= self.compress_above:
            compressed = self._compress(payload)
            if len(compressed) < len(payload):
                compression, body = self.compression, compressed
        key_id = self.key_id.encode() if self.key_id is not None else b""
        encrypted = self.key_id is not None
        body_length = len(body) + (_NONCE + 16 if encrypted else 0)
        fixed = _FIXED.pack(
            MAGIC,
            ENVELOPE_VERSION,
            kind,
            compression,
            1 if encrypted else 0,
            self._checksum,
            len(key_id),
            0,
            len(payload),
            body_length,
        )
        if encrypted:
            nonce = os.urandom(_NONCE)
            aad = fixed + key_id + _context(run_id, slot)
            body = nonce + self._ciphers[self.key_id].encrypt(nonce, body, aad)  # type: ignore[index]
        digest = self._digest(self._checksum, fixed, key_id, body)
        return b"".join((fixed, key_id, digest, body))

    def open(self, data: bytes, *, kind: Kind, run_id: str, slot: str, location: str) -> bytes:
        """Verify, decrypt and decompress an envelope written by :meth:`seal`.

        Raises:
            CorruptedDataError: bad magic, lengths, checksum, kind or compressed data.
            EncryptionKeyError: encrypted with a key this codec lacks, or the wrong
                key, or moved from another run or slot.
        """
        header, body = self.verify(data, location=location)
        if header.kind != kind:
            raise CorruptedDataError(location, f"holds a {header.kind.name}, not a {kind.name}")
        if header.encrypted:
            body = self._decrypt(data, header, body, run_id, slot)
        if header.compression is Compression.NONE:
            if len(body) != header.raw_length:
                raise CorruptedDataError(location, "raw length does not match the header")
            return bytes(body)
        return self._decompress(header, body, location)

    def verify(self, data: bytes, *, location: str) -> tuple[SealedHeader, memoryview]:
        """Check magic, lengths and checksum without decrypting or decoding anything.

        Returns:
            The header and the (still compressed and encrypted) body.

        Raises:
            CorruptedDataError: the envelope is damaged or truncated.
        """
        view = memoryview(data)
        if len(view) < _FIXED.size:
            raise CorruptedDataError(location, f"truncated: {len(view)} bytes, no full header")
        magic, version, kind, comp, enc, alg, kid_len, _, raw_len, body_len = _FIXED.unpack_from(
            view
        )
        if magic != MAGIC:
            raise CorruptedDataError(location, "bad magic: not an actorflow file")
        if version != ENVELOPE_VERSION:
            raise CorruptedDataError(
                location, f"envelope version {version}; this actorflow reads {ENVELOPE_VERSION}"
            )
        # dict lookups, not Enum(...) calls: this runs for every log record read
        checksum = _CHECKSUMS.get(alg)
        kind_member = _KINDS.get(kind)
        compression = _COMPRESSIONS.get(comp)
        if checksum is None or kind_member is None or compression is None:
            raise CorruptedDataError(location, "unknown kind, compression or checksum")
        start = _FIXED.size + kid_len
        body_at = start + _DIGEST_SIZE[checksum]
        if len(view) != body_at + body_len:
            raise CorruptedDataError(
                location, f"length {len(view)} does not match the header's {body_at + body_len}"
            )
        body = view[body_at:]
        expected = self._digest(checksum, view[: _FIXED.size], view[_FIXED.size : start], body)
        if not hmac.compare_digest(expected, view[start:body_at]):
            raise CorruptedDataError(location, f"{checksum.name.lower()} checksum mismatch")
        if enc not in (0, 1) or raw_len > self.max_decoded_bytes:
            raise CorruptedDataError(
                location, f"claims {raw_len} bytes, over max_decoded_bytes {self.max_decoded_bytes}"
            )
        key_id = bytes(view[_FIXED.size : start]).decode("ascii", "replace") if kid_len else None
        header = SealedHeader(kind_member, compression, enc == 1, key_id, raw_len, body_len)
        return header, body

    @staticmethod
    def _digest(checksum: _Checksum, *parts: bytes | memoryview) -> bytes:
        h = hashlib.sha256() if checksum is _Checksum.SHA256 else hashlib.blake2b(digest_size=32)
        for part in parts:
            h.update(part)
        return h.digest()

    def _decrypt(
        self, data: bytes, header: SealedHeader, body: memoryview, run_id: str, slot: str
    ) -> memoryview:
        from cryptography.exceptions import InvalidTag

        key_id = header.key_id or ""
        cipher = self._ciphers.get(key_id)
        if cipher is None:
            raise EncryptionKeyError(
                key_id, "this store has no such key; pass it in Codec(keys={...}) to read old data"
            )
        prefix = memoryview(data)[: _FIXED.size + len(key_id)]
        aad = bytes(prefix) + _context(run_id, slot)
        try:
            return memoryview(cipher.decrypt(bytes(body[:_NONCE]), bytes(body[_NONCE:]), aad))
        except InvalidTag:
            raise EncryptionKeyError(
                key_id,
                "decryption failed: the key is wrong, or the data was moved from another "
                f"run or slot (expected {run_id!r} {slot!r})",
            ) from None

    def _compress(self, payload: bytes) -> bytes:
        if self.compression is Compression.GZIP:
            return gzip.compress(payload, compresslevel=self.gzip_level, mtime=0)
        compressor = getattr(self._zstd, "compressor", None)
        if compressor is None:
            import zstandard

            compressor = self._zstd.compressor = zstandard.ZstdCompressor(level=self.zstd_level)
        return bytes(compressor.compress(payload))

    def _decompress(self, header: SealedHeader, body: memoryview, location: str) -> bytes:
        limit = header.raw_length
        if header.compression is Compression.GZIP:
            try:
                d = zlib.decompressobj(wbits=31)
                out = d.decompress(body, limit + 1)
            except zlib.error as exc:
                raise CorruptedDataError(location, f"does not decompress: {exc}") from exc
            if not d.eof:
                raise CorruptedDataError(location, "gzip stream longer or shorter than its header")
        else:
            out = self._unzstd(body, limit, location)
        if len(out) != limit:
            raise CorruptedDataError(location, "decompressed length does not match the header")
        return out

    def _unzstd(self, body: memoryview, limit: int, location: str) -> bytes:
        try:
            import zstandard
        except ImportError:
            raise CorruptedDataError(
                location, "compressed with zstd; install the extra: pip install 'actorflow[zstd]'"
            ) from None
        decompressor = getattr(self._zstd, "decompressor", None)
        if decompressor is None:
            decompressor = self._zstd.decompressor = zstandard.ZstdDecompressor()
        try:
            # The frame states its size; checked first so nothing inflates past the limit.
            if zstandard.frame_content_size(body) != limit:
                raise CorruptedDataError(location, "zstd frame size does not match the header")
            return bytes(decompressor.decompress(body, max_output_size=limit))
        except zstandard.ZstdError as exc:
            raise CorruptedDataError(location, f"does not decompress: {exc}") from exc

    # --- whole objects ------------------------------------------------------------

    def dump_snapshot(self, snapshot: Snapshot) -> tuple[bytes, int]:
        """Encode, size-check and seal a snapshot; return the sealed bytes and raw size.

        Raises:
            EncodingError: something in it cannot be encoded.
            CheckpointTooLargeError: its encoded size is over ``max_snapshot_bytes``.
        """
        raw = encode_snapshot(snapshot)
        if len(raw) > self.max_snapshot_bytes:
            raise CheckpointTooLargeError(snapshot.run_id, len(raw), self.max_snapshot_bytes)
        if len(raw) > self.warn_snapshot_bytes:
            _log.warning(
                "checkpoint_large",
                run_id=snapshot.run_id,
                checkpoint=snapshot.snapshot_id,
                size=len(raw),
                warn_above=self.warn_snapshot_bytes,
            )
        sealed = self.seal(
            raw, kind=Kind.SNAPSHOT, run_id=snapshot.run_id, slot=f"snapshot/{snapshot.snapshot_id}"
        )
        return sealed, len(raw)

    def load_snapshot(
        self, data: bytes, *, run_id: str, snapshot_id: str, location: str
    ) -> Snapshot:
        """Verify, open and decode a snapshot.

        Raises:
            CheckpointCorruptedError: damaged, truncated, or not a snapshot of this run.
            EncryptionKeyError: see :meth:`open`.
        """
        try:
            raw = self.open(
                data,
                kind=Kind.SNAPSHOT,
                run_id=run_id,
                slot=f"snapshot/{snapshot_id}",
                location=location,
            )
        except CheckpointCorruptedError:
            raise
        except CorruptedDataError as exc:
            raise CheckpointCorruptedError(location, exc.cause_text) from exc
        snapshot = decode_snapshot(raw, location)
        if snapshot.run_id != run_id or snapshot.snapshot_id != snapshot_id:
            raise CheckpointCorruptedError(
                location,
                f"holds {snapshot.run_id}/{snapshot.snapshot_id}, not {run_id}/{snapshot_id}",
            )
        return snapshot

    def dump_manifest(self, manifest: RunManifest) -> bytes:
        """Encode and seal a manifest."""
        return self.seal(
            encode_manifest(manifest), kind=Kind.MANIFEST, run_id=manifest.run_id, slot="manifest"
        )

    def load_manifest(self, data: bytes, *, run_id: str, location: str) -> RunManifest:
        """Verify, open and decode a manifest."""
        raw = self.open(data, kind=Kind.MANIFEST, run_id=run_id, slot="manifest", location=location)
        return decode_manifest(raw, location)

    def dump_record(self, record: LogRecord, *, run_id: str, position: int) -> bytes:
        """Encode and seal one log record bound to its position."""
        return self.seal(
            encode_record(record), kind=Kind.LOG_RECORD, run_id=run_id, slot=f"log/{position}"
        )

    def load_record(self, data: bytes, *, run_id: str, position: int, location: str) -> LogRecord:
        """Verify, open and decode one log record at ``position``."""
        raw = self.open(
            data, kind=Kind.LOG_RECORD, run_id=run_id, slot=f"log/{position}", location=location
        )
        return decode_record(raw, location)

    def load_plain_record(self, data: bytes | memoryview) -> LogRecord | None:
        """The record in ``data`` if it is a plain, sound one, else None.

        The common case of reading a log back, kept lean: an envelope that is
        not encrypted, not compressed and checksummed with sha256. It checks
        exactly what :meth:`open` checks and decodes only after the checksum
        verified; anything else (other options, or any damage) returns None,
        and :meth:`load_record` then gives the full answer and the error.
        """
        view = memoryview(data)
        size = _FIXED.size
        if len(view) < size + 32:
            return None
        magic, version, kind, comp, enc, alg, kid_len, _, raw_len, body_len = _FIXED.unpack_from(
            view
        )
        if (
            magic != MAGIC
            or version != ENVELOPE_VERSION
            or kind != _LOG_RECORD
            or comp != _PLAIN
            or enc
            or alg != _SHA256
            or kid_len
            or raw_len != body_len
            or raw_len > self.max_decoded_bytes
            or len(view) != size + 32 + body_len
        ):
            return None
        body = view[size + 32 :]
        digest = hashlib.sha256(view[:size])
        digest.update(body)
        if not hmac.compare_digest(digest.digest(), view[size : size + 32]):
            return None
        return decode_plain_record(body)

    def dump_blob(self, data: bytes, *, run_id: str) -> tuple[str, bytes]:
        """Address and seal a blob; return ``(address, sealed bytes)``."""
        address = self.blob_address(data)
        return address, self.seal(data, kind=Kind.BLOB, run_id=run_id, slot=f"blob/{address}")

    def load_blob(self, data: bytes, *, run_id: str, address: str, location: str) -> bytes:
        """Verify and open a blob; with plain addresses its content hash is checked too."""
        raw = self.open(
            data, kind=Kind.BLOB, run_id=run_id, slot=f"blob/{address}", location=location
        )
        if "." not in address and hashlib.sha256(raw).hexdigest() != address:
            raise CorruptedDataError(location, "content does not match its address")
        return raw
