"""Codec: how stored objects become sealed bytes and back, for one store.

A :class:`Codec` holds a store's choices (compression and its threshold and
levels, checksum, encryption keys and the key new data uses, size limits) and
applies them: ``seal``/``open``/``verify`` turn payloads into envelopes and back,
``blob_address`` names blobs, and the typed ``dump_*``/``load_*`` helpers pair
the MessagePack of :mod:`._codec` (object <-> bytes) with the envelope for
snapshots, manifests, log records and blobs, each bound to its place (run id
and slot). The envelope itself (layout, kinds, checksums, bounded compression,
key checks, decryption) is :mod:`._envelope`; the names that other modules
import from here (``Kind``, ``Compression``, ``MAGIC`` ...) are re-exported.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import threading
from typing import TYPE_CHECKING, Any, Literal

from actorflow._log import get_logger
from actorflow.errors import (
    CheckpointCorruptedError,
    CheckpointTooLargeError,
    ConfigurationError,
    CorruptedDataError,
    StorageError,
)
from actorflow.storage._codec import (
    decode_manifest,
    decode_plain_record,
    decode_record,
    decode_snapshot,
    encode_manifest,
    encode_record,
    encode_snapshot,
)
from actorflow.storage._envelope import (
    ENVELOPE_VERSION,
    FIXED,
    LOG_RECORD,
    MAGIC,
    NONCE,
    PLAIN,
    SHA256,
    Checksum,
    Compression,
    Kind,
    SealedHeader,
    blake,
    compress,
    context,
    decompress,
    decrypt,
    digest,
    load_keys,
    pick_compression,
    sealed_size,
    verify_envelope,
    zstd_available,
)
from actorflow.storage._keys import keys_from_env

if TYPE_CHECKING:
    from collections.abc import Mapping

    from actorflow.storage._records import LogRecord, RunManifest, Snapshot

__all__ = [
    "MAGIC",
    "Codec",
    "Compression",
    "Kind",
    "SealedHeader",
    "snapshot_id_taken",
    "zstd_available",
]

# Bound by assignment, not import: CPython 3.11 compiles ``imported.method()`` as an
# attribute load (a bound method per call) instead of a method call, and this
# struct is packed and unpacked for every record. Tests use this name too.
_FIXED = FIXED

_log = get_logger(__name__)


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
        self.compression = pick_compression(compression)
        self.compress_above = compress_above
        if not 1 <= gzip_level <= 9:
            raise ConfigurationError("gzip_level", gzip_level, "1 to 9")
        if not 1 <= zstd_level <= 22:
            raise ConfigurationError("zstd_level", zstd_level, "1 to 22")
        self.gzip_level = gzip_level
        self.zstd_level = zstd_level
        if checksum not in ("sha256", "blake2b"):
            raise ConfigurationError("checksum", checksum, "'sha256' or 'blake2b'")
        self._checksum = Checksum.SHA256 if checksum == "sha256" else Checksum.BLAKE2B
        if warn_snapshot_bytes > max_snapshot_bytes:
            warn_snapshot_bytes = max_snapshot_bytes
        self.max_snapshot_bytes = max_snapshot_bytes
        self.warn_snapshot_bytes = warn_snapshot_bytes
        self.max_decoded_bytes = max(max_decoded_bytes, max_snapshot_bytes)
        self._ciphers: dict[str, Any] = {}
        self.key_id: str | None = None
        self._address_key: bytes | None = None
        self._nonce_key: bytes | None = None
        if keys:
            self._ciphers, self.key_id, self._address_key = load_keys(keys, key_id)
            self._nonce_key = hmac.digest(self._address_key, b"actorflow label nonce", "sha256")
        elif key_id is not None:
            raise ConfigurationError("key_id", key_id, "a key id listed in keys=")
        # zstandard's (de)compressors are not thread-safe, and stores seal and
        # open in worker threads: one of each per thread.
        self._zstd = threading.local()

    @classmethod
    def from_env(
        cls,
        env: Mapping[str, str] | None = None,
        *,
        key_file: str | os.PathLike[str] | None = None,
        **options: Any,
    ) -> Codec:
        """A codec with the keys ``ACTORFLOW_KEYS`` or ``ACTORFLOW_KEY_FILE`` name (if any).

        ``ACTORFLOW_KEY_ID`` picks the key new data uses (default: the last
        listed); ``key_file`` replaces ``ACTORFLOW_KEY_FILE``; ``options`` are
        the other constructor arguments. :func:`~actorflow.storage.open_store`
        uses it for a store it opens without a ``codec``.

        Raises:
            ConfigurationError: a variable or the key file holds something unusable.

        .. versionadded:: 0.2
        """
        keys, key_id = keys_from_env(env, key_file=key_file)
        return cls(keys=keys or None, key_id=key_id, **options)

    # --- configuration ----------------------------------------------------------

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

    # --- labels: short texts sealed into names ----------------------------------

    def seal_label(self, text: bytes, *, run_id: str, slot: str) -> tuple[str, bytes] | None:
        """``text`` encrypted for a name; ``(key id, nonce + ciphertext + tag)``.

        None with encryption off. The nonce is a keyed hash of the place and the
        text (a synthetic IV), so one label always seals to the same bytes: a
        name written twice is one name, and a nonce repeats only with its text.
        """
        if self.key_id is None or self._nonce_key is None:
            return None
        place = context(run_id, slot)
        nonce = hmac.digest(self._nonce_key, place + b"\x00" + text, "sha256")[:NONCE]
        return self.key_id, nonce + self._ciphers[self.key_id].encrypt(nonce, text, place)

    def open_label(self, key_id: str, sealed: bytes, *, run_id: str, slot: str) -> bytes | None:
        """The text :meth:`seal_label` sealed; None without that key or if it does not verify."""
        cipher = self._ciphers.get(key_id)
        if cipher is None or len(sealed) < NONCE + 16:
            return None
        from cryptography.exceptions import InvalidTag  # installed: the cipher exists

        try:
            text: bytes = cipher.decrypt(sealed[:NONCE], sealed[NONCE:], context(run_id, slot))
        except InvalidTag:
            return None
        return text

    # --- sealing ----------------------------------------------------------------

    def seal(self, payload: bytes, *, kind: Kind, run_id: str, slot: str) -> bytes:
        """Compress, encrypt and checksum ``payload`` for the place ``(run_id, slot)``."""
        if self.key_id is None and (
            len(payload) < self.compress_above or self.compression is Compression.NONE
        ):
            # the common case (every small log record), lean: the same bytes
            # as the general path below with nothing to compress or encrypt
            n = len(payload)
            fixed = _FIXED.pack(MAGIC, ENVELOPE_VERSION, kind, PLAIN, 0, self._checksum, 0, 0, n, n)
            h = hashlib.sha256(fixed) if self._checksum is Checksum.SHA256 else blake(fixed)
            h.update(payload)
            return b"".join((fixed, h.digest(), payload))
        compression = Compression.NONE
        body = payload
        if self.compression is not Compression.NONE and len(payload) >= self.compress_above:
            compressed = compress(
                payload, self.compression, self.gzip_level, self.zstd_level, self._zstd
            )
            if len(compressed) < len(payload):
                compression, body = self.compression, compressed
        key_id = self.key_id.encode() if self.key_id is not None else b""
        encrypted = self.key_id is not None
        body_length = len(body) + (NONCE + 16 if encrypted else 0)
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
            nonce = os.urandom(NONCE)
            aad = fixed + key_id + context(run_id, slot)
            body = nonce + self._ciphers[self.key_id].encrypt(nonce, body, aad)  # type: ignore[index]
        return b"".join((fixed, key_id, digest(self._checksum, fixed, key_id, body), body))

    def open(self, data: bytes, *, kind: Kind, run_id: str, slot: str, location: str) -> bytes:
        """Verify, decrypt and decompress an envelope written by :meth:`seal`.

        Raises:
            CorruptedDataError: bad magic, lengths, checksum, kind or compressed data.
            EncryptionKeyError: encrypted with a key this codec lacks, or the wrong
                key, or moved from another run or slot.
        """
        header, body = verify_envelope(data, location, self.max_decoded_bytes)
        if header.kind != kind:
            raise CorruptedDataError(location, f"holds a {header.kind.name}, not a {kind.name}")
        if header.encrypted:
            body = decrypt(self._ciphers, data, header, body, run_id, slot)
        if header.compression is Compression.NONE:
            if len(body) != header.raw_length:
                raise CorruptedDataError(location, "raw length does not match the header")
            return bytes(body)
        return decompress(header, body, location, self._zstd)

    def verify(self, data: bytes, *, location: str) -> tuple[SealedHeader, memoryview]:
        """Check magic, lengths and checksum without decrypting or decoding anything.

        Returns:
            The header and the (still compressed and encrypted) body.

        Raises:
            CorruptedDataError: the envelope is damaged or truncated.
        """
        return verify_envelope(data, location, self.max_decoded_bytes)

    def measure(self, data: memoryview) -> int | None:
        """The length of the sound envelope ``data`` starts with, or ``None``.

        Sound means its checksum verifies over exactly that length (nothing is
        decrypted or decoded). The file store uses it to find where a log
        record ends when the frame around it is damaged.
        """
        size = sealed_size(data)
        if size is None or size > len(data):
            return None
        try:
            verify_envelope(data[:size], "", self.max_decoded_bytes)
        except CorruptedDataError:
            return None
        return size

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

    def holds_snapshot(self, data: bytes, snapshot: Snapshot, *, location: str) -> bool:
        """Whether ``data`` (sealed, stored at ``location``) is ``snapshot``.

        False also when it cannot be opened: a damaged one holds no snapshot.
        Sealed bytes are compared opened, as encryption makes each sealing differ.
        """
        try:
            return snapshot == self.load_snapshot(
                data, run_id=snapshot.run_id, snapshot_id=snapshot.snapshot_id, location=location
            )
        except CorruptedDataError:
            return False

    def require_same_snapshot(self, data: bytes, snapshot: Snapshot, *, location: str) -> None:
        """A snapshot id is written once: ``data``, stored under it, must be ``snapshot``.

        Raises:
            StorageError: it holds a different snapshot.
        """
        if not self.holds_snapshot(data, snapshot, location=location):
            raise snapshot_id_taken(location, snapshot.snapshot_id)

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
        """Verify, open and decode the manifest of run ``run_id``.

        Raises:
            CorruptedDataError: damaged, or another run's manifest (one copied
                from another run's folder or key); a sealed one is bound to its
                run by its envelope, a plain one by the run id it holds.
        """
        raw = self.open(data, kind=Kind.MANIFEST, run_id=run_id, slot="manifest", location=location)
        manifest = decode_manifest(raw, location)
        if manifest.run_id != run_id:
            raise CorruptedDataError(
                location, f"holds the manifest of run {manifest.run_id!r}, not of {run_id!r}"
            )
        return manifest

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
            or kind != LOG_RECORD
            or comp != PLAIN
            or enc
            or alg != SHA256
            or kid_len
            or raw_len != body_len
            or raw_len > self.max_decoded_bytes
            or len(view) != size + 32 + body_len
        ):
            return None
        body = view[size + 32 :]
        h = hashlib.sha256(view[:size])
        h.update(body)
        if not hmac.compare_digest(h.digest(), view[size : size + 32]):
            return None
        return decode_plain_record(body)

    def dump_blob(self, data: bytes, *, run_id: str) -> tuple[str, bytes]:
        """Address and seal a blob; return ``(address, sealed bytes)``."""
        address = self.blob_address(data)
        return address, self.seal_blob(data, run_id=run_id, address=address)

    def seal_blob(self, data: bytes, *, run_id: str, address: str) -> bytes:
        """Seal a blob already addressed (``blob_address(data)``)."""
        return self.seal(data, kind=Kind.BLOB, run_id=run_id, slot=f"blob/{address}")

    def load_blob(self, data: bytes, *, run_id: str, address: str, location: str) -> bytes:
        """Verify and open a blob; with plain addresses its content hash is checked too."""
        raw = self.open(
            data, kind=Kind.BLOB, run_id=run_id, slot=f"blob/{address}", location=location
        )
        if "." not in address and hashlib.sha256(raw).hexdigest() != address:
            raise CorruptedDataError(location, "content does not match its address")
        return raw


def snapshot_id_taken(location: str, snapshot_id: str) -> StorageError:
    """The error of a write of a snapshot id that holds a different snapshot."""
    return StorageError(
        "write checkpoint",
        f"{location} already holds a different checkpoint with id {snapshot_id!r}; "
        "checkpoint ids must be unique within a run",
    )
