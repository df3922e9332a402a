"""A run's inbox: messages posted to a run from any process, kept until the run takes them.

This is the store's side of signals. An inbox is a sequence: entry ``seq``
is stored under a name made of ``seq`` alone (``inbox/00000000000000000003.msg``
in a file store), created with a conditional create
that fails if the name exists. A poster tries the next free ``seq`` and, when
someone else got it first, the one after; so posts are ordered, concurrent
posters (tasks or processes) never share a ``seq``, and a reader walks the
entries from any ``seq`` without listing anything, stopping at the first
name that does not exist.

An entry id makes a post idempotent: posting an id the inbox holds returns
the entry that holds it and adds nothing. Two posts of one id racing each
other (or a retry racing a poster that is still at work) may both land; a
reader then sees only the first (:class:`FirstSeqs`), which every store
applies in ``read_inbox``. The file store's posts take a lock per id, so
there only a key rotation (which renames ids, see :func:`id_key`) can
store one twice; the S3 store's locks are per store object, so posts from
two processes can.

The typed ``InboxEntry`` is sealed like every stored object (checksum,
compression, encryption bound to the run and ``inbox/<seq>``), so an entry
moved to another place, or damaged, never reads as a sound one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

import msgspec

from actorflow.errors import CorruptedDataError, InboxCorruptedError, InboxUnsupportedError
from actorflow.storage._codec import decode_value, encode_value
from actorflow.storage._envelope import Kind

if TYPE_CHECKING:
    from collections.abc import Iterable

    from actorflow.storage._protocol import Store
    from actorflow.storage._sealing import Codec

__all__ = [
    "FirstSeqs",
    "InboxEntry",
    "SupportsInbox",
    "id_key",
    "open_entry",
    "post_message",
    "read_messages",
    "seal_entry",
]


class InboxEntry(msgspec.Struct, frozen=True, kw_only=True):
    """One message posted to a run's inbox.

    Attributes:
        seq: its place in the inbox: 0, 1, 2, ... in the order posts were accepted.
        entry_id: the sender's id for it; posting the same id again adds nothing.
        type: the registered type name of the message.
        payload: the message's MessagePack bytes.
        sent: when it was posted (``time.time()`` of the poster).
        sender: who posted it, if the poster said.
        kind: what kind of entry it is (a user's signal, an update, a cancel
            request, ...), set by the runtime's inbox module, never by a
            user; empty in entries posted by actorflow 0.3 and before.

    .. versionadded:: 0.2
    .. versionchanged:: 0.4
       ``kind``.
    """

    seq: int
    entry_id: str
    type: str
    payload: bytes
    sent: float
    sender: str | None = None
    kind: str = ""


@runtime_checkable
class SupportsInbox(Protocol):
    """A store that keeps a durable, ordered inbox of messages for each run.

    Call it through :func:`post_message` and :func:`read_messages`, which
    accept any store and say clearly when it has no inbox. The memory, file
    and S3 stores have one.

    .. versionadded:: 0.2
    """

    async def post(
        self,
        run_id: str,
        *,
        entry_id: str,
        type: str,
        payload: bytes,
        sender: str | None = None,
        kind: str = "",
    ) -> InboxEntry:
        """Append a message to the run's inbox, durably, unless ``entry_id`` is there already.

        Durable when it returns. Posting an ``entry_id`` that the inbox holds
        returns the entry holding it and adds nothing, so a retried post is
        harmless. Two posts of one id at the same moment may both be
        stored; ``read_inbox`` then returns only the first.

        Raises:
            RunNotFoundError: no such run.
            InvalidRunIdError: ``run_id`` is not a valid run id.
            EncodingError: the entry cannot be encoded (an id with a lone surrogate).
        """
        ...

    async def read_inbox(
        self, run_id: str, start: int = 0, stop: int | None = None
    ) -> list[InboxEntry]:
        """The run's entries from ``seq`` ``start`` on (before ``stop``), in ``seq`` order.

        Entries are read one by one until the first ``seq`` not stored (never
        by listing). An entry whose ``entry_id`` appears at a lower ``seq``
        (a duplicate of a racing retry) is left out. A damaged entry (it fails
        its checksum, does not decode, or is not the entry of its ``seq``) is
        left out too, with an ``inbox_entry_damaged`` warning: its ``seq``
        stays taken, so the entries after it are returned; a store that is an
        :class:`~actorflow.storage.InboxChecker` names it for ``actorflow validate``.

        Raises:
            RunNotFoundError: no such run.
            InvalidRunIdError: ``run_id`` is not a valid run id.
            EncryptionKeyError: an entry is encrypted with a key the store was not given.

        .. versionchanged:: 0.4
           A damaged entry is skipped instead of raising ``InboxCorruptedError``.
        """
        ...


async def post_message(
    store: Store,
    run_id: str,
    *,
    entry_id: str,
    type: str,
    payload: bytes,
    sender: str | None = None,
    kind: str = "",
) -> InboxEntry:
    """``store.post(...)`` (see :meth:`SupportsInbox.post`) for a store with an inbox.

    Raises:
        InboxUnsupportedError: the store keeps no inbox.

    .. versionadded:: 0.2
    """
    if not isinstance(store, SupportsInbox):
        raise InboxUnsupportedError("post message", type_name(store))
    return await store.post(
        run_id, entry_id=entry_id, type=type, payload=payload, sender=sender, kind=kind
    )


async def read_messages(
    store: Store, run_id: str, start: int = 0, stop: int | None = None
) -> list[InboxEntry]:
    """``store.read_inbox(...)`` (see :meth:`SupportsInbox.read_inbox`) for a store with an inbox.

    Raises:
        InboxUnsupportedError: the store keeps no inbox.

    .. versionadded:: 0.2
    """
    if not isinstance(store, SupportsInbox):
        raise InboxUnsupportedError("read inbox", type_name(store))
    return await store.read_inbox(run_id, start, stop)


def type_name(store: object) -> str:
    """The store's class, as an error names it."""
    kind = type(store)
    return f"{kind.__module__}.{kind.__qualname__}"


# --- for stores ---------------------------------------------------------------------


def id_key(codec: Codec, entry_id: str) -> str:
    """A name for ``entry_id`` that is safe in a path or a key: a hash of it.

    Ids are any strings (slashes, ``..``, NUL, megabytes), so they never go
    into a name themselves. With encryption on the hash is keyed (like a blob
    address), so names do not show which ids were posted. A key rotation
    changes it: a retry after one may store its entry again, which readers
    leave out.
    """
    # surrogatepass: a lone surrogate still gets a name; encoding the entry rejects it
    return codec.blob_address(b"inbox-id\x00" + entry_id.encode("utf-8", "surrogatepass"))


def _slot(seq: int) -> str:
    return f"inbox/{seq}"


def seal_entry(codec: Codec, entry: InboxEntry, *, run_id: str) -> bytes:
    """Encode and seal ``entry``, bound to its run and ``seq``.

    Raises:
        EncodingError: it holds something that cannot be encoded.
    """
    raw = encode_value(entry, "inbox entry", repr(entry.entry_id[:80]))
    return codec.seal(raw, kind=Kind.INBOX_ENTRY, run_id=run_id, slot=_slot(entry.seq))


def open_entry(codec: Codec, data: bytes, *, run_id: str, seq: int, location: str) -> InboxEntry:
    """Verify, open and decode the entry stored at ``seq``.

    Raises:
        InboxCorruptedError: damaged, truncated, or not the entry of this run and ``seq``.
        EncryptionKeyError: encrypted with a key the codec lacks, or moved from elsewhere.
    """
    try:
        raw = codec.open(
            data, kind=Kind.INBOX_ENTRY, run_id=run_id, slot=_slot(seq), location=location
        )
        entry: InboxEntry = decode_value(raw, InboxEntry, location)
    except InboxCorruptedError:
        raise
    except CorruptedDataError as exc:
        raise InboxCorruptedError(location, exc.cause_text) from exc
    if entry.seq != seq:
        raise InboxCorruptedError(location, f"holds entry {entry.seq}, not {seq}")
    return entry


class FirstSeqs:
    """Where each entry id first appears in an inbox's entries ``0 .. end - 1``.

    A store keeps one per run it has read, so that reading from ``start``
    can leave out duplicates of ids seen before ``start`` without reading
    those entries again: entries are written once and never change (until
    the run is deleted, when the store drops it).
    """

    def __init__(self) -> None:
        self.end = 0
        self.first: dict[str, int] = {}
        self.damaged: set[int] = set()  # seqs of damaged entries, warned of once

    def add(self, entry: InboxEntry) -> None:
        """Note ``entry``, the one at ``end`` (others are ignored)."""
        if entry.seq == self.end:
            self.first.setdefault(entry.entry_id, entry.seq)
            self.end += 1

    def skip(self, seq: int) -> None:
        """Note that the entry at ``seq`` is damaged: it holds no id, and its seq is taken."""
        if seq == self.end:
            self.end += 1

    def note(self, seq: int, entry: InboxEntry | None) -> None:
        """:meth:`add` ``entry``, or :meth:`skip` ``seq`` where it is damaged (None)."""
        if entry is None:
            self.skip(seq)
        else:
            self.add(entry)

    def keep(self, entries: Iterable[InboxEntry]) -> list[InboxEntry]:
        """Those of ``entries`` (each noted already) that are their id's first."""
        return [e for e in entries if self.first.get(e.entry_id) == e.seq]
