"""The sealed envelope: bytes <-> bytes (layout, checksum, compression, encryption).

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
and to a context (:func:`context`: run id and slot), so it cannot be moved to
another run or slot.

This module holds the layout and its enums, the checksums, bounded
compression, and the keys' validation and AES-GCM decryption; it knows nothing
of the objects inside. :class:`~actorflow.storage._sealing.Codec` holds one
store's choices and seals with them. Any change here can change bytes on disk:
the golden stores in ``tests/storage/golden`` and ``tests/workflow/golden``
must still load.
"""

from __future__ import annotations

import enum
import gzip
import hashlib
import hmac
import re
import struct
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from actorflow.errors import (
    ConfigurationError,
    CorruptedDataError,
    EncryptionKeyError,
    EncryptionKeyMissingError,
)

if TYPE_CHECKING:
    import threading
    from collections.abc import Mapping

__all__ = [
    "ENVELOPE_VERSION",
    "FIXED",
    "LOG_RECORD",
    "MAGIC",
    "NONCE",
    "PLAIN",
    "SHA256",
    "Checksum",
    "Compression",
    "Kind",
    "SealedHeader",
    "blake",
    "compress",
    "context",
    "decompress",
    "decrypt",
    "digest",
    "load_keys",
    "pick_compression",
    "sealed_size",
    "verify_envelope",
    "zstd_available",
]

MAGIC: Final = b"AFLW"
ENVELOPE_VERSION: Final = 1
FIXED = struct.Struct(">4sBBBBBBHQQ")
NONCE = 12
_KEY_ID = re.compile(r"[A-Za-z0-9_.\-]{1,64}")


class Kind(enum.IntEnum):
    """What an envelope holds; a file of one kind never decodes as another."""

    MANIFEST = 1
    LOG_RECORD = 2
    BLOB = 3
    SNAPSHOT = 4
    LEASE = 5
    INBOX_ENTRY = 6
    EVENTS = 7  # a batch of a run's streamed events (not durable)


_KINDS = {member.value: member for member in Kind}
LOG_RECORD: Final = int(Kind.LOG_RECORD)


class Compression(enum.IntEnum):
    """Compression of an envelope's body."""

    NONE = 0
    GZIP = 1
    ZSTD = 2


_COMPRESSIONS = {member.value: member for member in Compression}
PLAIN: Final = int(Compression.NONE)


class Checksum(enum.IntEnum):
    """The checksum algorithm an envelope names in its header."""

    SHA256 = 1
    BLAKE2B = 2


_DIGEST_SIZE = {Checksum.SHA256: 32, Checksum.BLAKE2B: 32}


_CHECKSUMS = {member.value: member for member in Checksum}


def blake(data: bytes) -> Any:
    """A blake2b hash object (32-byte digest) started with ``data``."""
    return hashlib.blake2b(data, digest_size=32)


SHA256: Final = int(Checksum.SHA256)


def digest(checksum: Checksum, *parts: bytes | memoryview) -> bytes:
    """The ``checksum`` digest of ``parts`` taken in order."""
    h = hashlib.sha256() if checksum is Checksum.SHA256 else hashlib.blake2b(digest_size=32)
    for part in parts:
        h.update(part)
    return h.digest()


def zstd_available() -> bool:
    """Whether the ``zstd`` extra (the ``zstandard`` package) is installed."""
    try:
        import zstandard  # noqa: F401
    except ImportError:
        return False
    return True


def pick_compression(compression: str | None) -> Compression:
    """The :class:`Compression` a codec option names (``"auto"`` picks zstd if installed).

    Raises:
        ConfigurationError: an unknown name, or ``"zstd"`` without the ``zstd`` extra.
    """
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


@dataclass(frozen=True, slots=True)
class SealedHeader:
    """The parsed fixed header of an envelope (after its checksum verified)."""

    kind: Kind
    compression: Compression
    encrypted: bool
    key_id: str | None
    raw_length: int
    body_length: int


def context(run_id: str, slot: str) -> bytes:
    """The place ``(run_id, slot)`` that AES-GCM binds a ciphertext to."""
    return f"{run_id}\x00{slot}".encode()


def load_keys(keys: Mapping[str, bytes], key_id: str | None) -> tuple[dict[str, Any], str, bytes]:
    """Check ``keys`` and pick the one new data is encrypted with.

    Returns:
        AES-GCM ciphers by key id, the id of the key to encrypt with, and the
        key that makes blob addresses.

    Raises:
        ConfigurationError: a bad key id or key size, ``key_id`` missing or not
            among ``keys``, or the ``crypto`` extra is not installed.
    """
    try:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    except ImportError:  # pragma: no cover - the dev environment has it
        raise ConfigurationError(
            "keys", "...", "the crypto extra: pip install 'actorflow[crypto]'"
        ) from None
    ciphers: dict[str, Any] = {}
    for kid, key in keys.items():
        if not _KEY_ID.fullmatch(kid):
            raise ConfigurationError("key id", kid, "1-64 characters of [A-Za-z0-9_.-]")
        if not isinstance(key, bytes) or len(key) not in (16, 24, 32):
            raise ConfigurationError(f"key {kid!r}", "<redacted>", "16, 24 or 32 bytes")
        ciphers[kid] = AESGCM(key)
    if key_id is None:
        if len(keys) != 1:
            raise ConfigurationError("key_id", None, "the id of the key to encrypt with")
        key_id = next(iter(keys))
    if key_id not in keys:
        raise ConfigurationError("key_id", key_id, f"one of {sorted(keys)}")
    # A separate key for blob addresses, derived so equal plaintexts do not show.
    address_key = hmac.digest(keys[key_id], b"actorflow blob address", "sha256")
    return ciphers, key_id, address_key


def sealed_size(data: memoryview) -> int | None:
    """How long the envelope ``data`` starts with says it is; ``None`` without a known header.

    Nothing is verified: check the envelope of that length before trusting it.
    """
    if len(data) < FIXED.size:
        return None
    magic, version, _, _, _, alg, kid_len, _, _, body_len = FIXED.unpack_from(data)
    checksum = _CHECKSUMS.get(alg)
    if magic != MAGIC or version != ENVELOPE_VERSION or checksum is None:
        return None
    size: int = FIXED.size + kid_len + _DIGEST_SIZE[checksum] + body_len
    return size


def verify_envelope(
    data: bytes | memoryview, location: str, max_decoded_bytes: int
) -> tuple[SealedHeader, memoryview]:
    """Check magic, lengths and checksum without decrypting or decoding anything.

    Returns:
        The header and the (still compressed and encrypted) body.

    Raises:
        CorruptedDataError: the envelope is damaged or truncated, or claims to
            decode to more than ``max_decoded_bytes``.
    """
    view = memoryview(data)
    if len(view) < FIXED.size:
        raise CorruptedDataError(location, f"truncated: {len(view)} bytes, no full header")
    magic, version, kind, comp, enc, alg, kid_len, _, raw_len, body_len = FIXED.unpack_from(view)
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
    start = FIXED.size + kid_len
    body_at = start + _DIGEST_SIZE[checksum]
    if len(view) != body_at + body_len:
        raise CorruptedDataError(
            location, f"length {len(view)} does not match the header's {body_at + body_len}"
        )
    body = view[body_at:]
    expected = digest(checksum, view[: FIXED.size], view[FIXED.size : start], body)
    if not hmac.compare_digest(expected, view[start:body_at]):
        raise CorruptedDataError(location, f"{checksum.name.lower()} checksum mismatch")
    if enc not in (0, 1) or raw_len > max_decoded_bytes:
        raise CorruptedDataError(
            location, f"claims {raw_len} bytes, over max_decoded_bytes {max_decoded_bytes}"
        )
    key_id = bytes(view[FIXED.size : start]).decode("ascii", "replace") if kid_len else None
    header = SealedHeader(kind_member, compression, enc == 1, key_id, raw_len, body_len)
    return header, body


def decrypt(
    ciphers: Mapping[str, Any],
    data: bytes,
    header: SealedHeader,
    body: memoryview,
    run_id: str,
    slot: str,
) -> memoryview:
    """The plaintext of an encrypted ``body``, checked against its header and place.

    Raises:
        EncryptionKeyMissingError: ``ciphers`` lacks the header's key.
        EncryptionKeyError: the key is wrong,
            or the envelope was moved from another run or slot.
    """
    from cryptography.exceptions import InvalidTag

    key_id = header.key_id or ""
    cipher = ciphers.get(key_id)
    if cipher is None:
        raise EncryptionKeyMissingError(key_id)
    prefix = memoryview(data)[: FIXED.size + len(key_id)]
    aad = bytes(prefix) + context(run_id, slot)
    try:
        return memoryview(cipher.decrypt(bytes(body[:NONCE]), bytes(body[NONCE:]), aad))
    except InvalidTag:
        raise EncryptionKeyError(
            key_id,
            "decryption failed: the key is wrong, or the data was moved from another "
            f"run or slot (expected {run_id!r} {slot!r})",
        ) from None


# zstandard's (de)compressors are not thread-safe, and stores seal and open in
# worker threads: callers pass a threading.local that caches one of each per thread.


def compress(
    payload: bytes,
    compression: Compression,
    gzip_level: int,
    zstd_level: int,
    cache: threading.local,
) -> bytes:
    """``payload`` compressed with ``compression`` (GZIP or ZSTD) at its level."""
    if compression is Compression.GZIP:
        return gzip.compress(payload, compresslevel=gzip_level, mtime=0)
    compressor = getattr(cache, "compressor", None)
    if compressor is None:
        import zstandard

        compressor = cache.compressor = zstandard.ZstdCompressor(level=zstd_level)
    return bytes(compressor.compress(payload))


def decompress(
    header: SealedHeader, body: memoryview, location: str, cache: threading.local
) -> bytes:
    """The body decompressed to exactly the header's raw length, never more.

    Raises:
        CorruptedDataError: the body does not decompress to the header's raw length,
            or it is zstd and the ``zstd`` extra is not installed.
    """
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
        out = _unzstd(body, limit, location, cache)
    if len(out) != limit:
        raise CorruptedDataError(location, "decompressed length does not match the header")
    return out


def _unzstd(body: memoryview, limit: int, location: str, cache: threading.local) -> bytes:
    try:
        import zstandard
    except ImportError:
        raise CorruptedDataError(
            location, "compressed with zstd; install the extra: pip install 'actorflow[zstd]'"
        ) from None
    decompressor = getattr(cache, "decompressor", None)
    if decompressor is None:
        decompressor = cache.decompressor = zstandard.ZstdDecompressor()
    try:
        # The frame states its size; checked first so nothing inflates past the limit.
        if zstandard.frame_content_size(body) != limit:
            raise CorruptedDataError(location, "zstd frame size does not match the header")
        return bytes(decompressor.decompress(body, max_output_size=limit))
    except zstandard.ZstdError as exc:
        raise CorruptedDataError(location, f"does not decompress: {exc}") from exc
