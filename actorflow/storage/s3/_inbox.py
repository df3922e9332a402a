"""An S3 store's inboxes: one object per entry, named by its ``seq``, made by a conditional PUT.

Layout, under a run's prefix::

    inbox/{seq:020d}        entry ``seq``, sealed; created with ``If-None-Match: *``
    inbox-ids/{id key}      empty: that entry id was posted (or is being)

``{id key}`` is a hash of the entry id (:func:`~actorflow.storage._inbox.id_key`).
A post claims its id with an ``If-None-Match: *`` PUT of the empty
``inbox-ids`` object, then creates its entry at the first free ``seq``, the
next one when another writer got there first. A post whose claim exists looks
for the entry holding the id (reading the inbox from 0, the rare path) and
writes one only if it finds none: the first poster died between the claim and
its entry, or is still at work. S3 has no locks, so in that second case both
may store the id; readers leave out the later one (:class:`FirstSeqs`). In
one store, posts of one id take a lock, so they store it once.

Where an inbox ends is found without a LIST: a remembered end is checked by
a HEAD of the entry before it, else an exponential then binary search with
HEADs (entries have no gaps); the search and the PUT loop are
:mod:`actorflow.storage._inbox_slots`, shared with the file store. Reading
GETs entries from ``start`` until a 404.

A watch (:class:`InboxPoll`) polls: it finds the end once when it opens, then
every ``interval`` seconds HEADs the entry at the end, one request a poll,
and returns when it exists. The end moves on past what this store has read
since, so entries already read never wake it again. Posts through this very
store object wake its watches at once, without a request.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from functools import partial
from typing import TYPE_CHECKING

import anyio

from actorflow.storage._inbox import FirstSeqs, InboxEntry, id_key, seal_entry
from actorflow.storage._inbox_check import InboxCheck, open_or_skip
from actorflow.storage._inbox_slots import Exists, append, drive_async, find_start, new_entry
from actorflow.storage._inbox_watch import Wakeups
from actorflow.storage.s3._wire import PreconditionFailed, drop_idle_lock

if TYPE_CHECKING:
    from actorflow.storage._inbox_slots import Step
    from actorflow.storage._sealing import Codec
    from actorflow.storage.s3._objects import S3Objects

__all__ = ["INBOX", "INBOX_IDS", "InboxObjects", "InboxPoll"]

INBOX = "inbox"
"""The folder of a run's entries."""

INBOX_IDS = "inbox-ids"
"""The folder of a run's id claims."""

_BATCH = 8
"""Entries read concurrently: S3 latency, not bandwidth, bounds a read."""


class InboxObjects:
    """The runs' inboxes under ``objects``, sealed by ``codec``; callers check the run exists."""

    def __init__(self, objects: S3Objects, codec: Codec) -> None:
        self._objects = objects
        self._codec = codec
        # Where each inbox ended when this store last wrote or found its end: only
        # a place to start looking (others may have posted since), checked before use.
        self._ends: dict[str, int] = {}
        self._seen: dict[str, tuple[anyio.Lock, FirstSeqs]] = {}
        self._posting: defaultdict[str, anyio.Lock] = defaultdict(anyio.Lock)
        self._read_to: dict[str, int] = {}  # where this store's last read of each inbox ended
        self._wakeups = Wakeups()  # this store's posts, for its own watches

    def key(self, run_id: str, seq: int) -> str:
        """The key of entry ``seq`` of the run."""
        return self._objects.key(run_id, INBOX, f"{seq:020d}")

    def forget(self, run_id: str) -> None:
        """Drop what this store remembers of the run's inbox (the run was deleted)."""
        self._ends.pop(run_id, None)
        self._seen.pop(run_id, None)
        self._read_to.pop(run_id, None)

    # --- posting ---------------------------------------------------------------------

    async def post(
        self,
        run_id: str,
        entry_id: str,
        type_name: str,
        payload: bytes,
        sender: str | None,
        kind: str = "",
    ) -> InboxEntry:
        """Append the entry unless its id was posted; see the module docstring."""
        name = id_key(self._codec, entry_id)
        claim = self._objects.key(run_id, INBOX_IDS, name)
        lock_name = f"{run_id}/{name}"
        try:
            async with self._posting[lock_name]:
                try:
                    await self._objects.put("post message", claim, b"", token=uuid.uuid4().hex)
                except PreconditionFailed:
                    found = await self._find(run_id, entry_id)
                    if found is not None:
                        return found
                    # else its poster died before its entry, or is still at work: post it
                return await self._append(run_id, entry_id, type_name, payload, sender, kind)
        finally:
            drop_idle_lock(self._posting, lock_name)

    async def _append(
        self,
        run_id: str,
        entry_id: str,
        type_name: str,
        payload: bytes,
        sender: str | None,
        kind: str,
    ) -> InboxEntry:
        entry = new_entry(entry_id, type_name, payload, sender, kind)
        steps = append(entry, self._ends.get(run_id))
        entry = await drive_async(steps, partial(self._answer, run_id))
        self._ends[run_id] = max(self._ends.get(run_id, 0), entry.seq + 1)
        self._wakeups.wake(run_id)
        return entry

    async def _answer(self, run_id: str, step: Step) -> bool:
        """Answer a step of the search or the append: a HEAD, or the entry's conditional PUT."""
        if isinstance(step, Exists):
            return await self._exists(run_id, step.seq)
        sealed = seal_entry(self._codec, step.entry, run_id=run_id)
        try:
            # a fresh token per seq: a 412 carrying it means this very PUT landed earlier
            key = self.key(run_id, step.entry.seq)
            await self._objects.put("post message", key, sealed, token=uuid.uuid4().hex)
        except PreconditionFailed:
            return False  # another writer took it first
        return True

    async def _exists(self, run_id: str, seq: int, operation: str = "post message") -> bool:
        return await self._objects.head(operation, self.key(run_id, seq)) is not None

    async def _start(self, run_id: str) -> int:
        """The first ``seq`` worth trying: never past the end, so the inbox has no gaps."""
        return await drive_async(find_start(self._ends.get(run_id)), partial(self._answer, run_id))

    async def _find(self, run_id: str, entry_id: str) -> InboxEntry | None:
        """The first entry holding ``entry_id``, or None."""
        lock, firsts = self._firsts(run_id)
        async with lock:
            known = firsts.first.get(entry_id)
            if known is None:
                for seq, entry in await self._read(run_id, firsts.end, warned=firsts.damaged):
                    firsts.note(seq, entry)
                known = firsts.first.get(entry_id)
            self._ends[run_id] = max(self._ends.get(run_id, 0), firsts.end)
        if known is None:
            return None
        found = [e for _, e in await self._read(run_id, known, known + 1, warned=set())]
        if not found or found[0] is None or found[0].entry_id != entry_id:
            self.forget(run_id)  # deleted and posted anew meanwhile: what we knew is stale
            return None
        return found[0]

    # --- watching --------------------------------------------------------------------

    async def watch(self, run_id: str, interval: float) -> InboxPoll:
        """A watch on the run's inbox from its current end (a few HEADs to find it)."""
        return InboxPoll(self, self._wakeups, run_id, await self._start(run_id), interval)

    def read_to(self, run_id: str) -> int:
        """Where this store's reads of the inbox ended (0 if it has read none)."""
        return self._read_to.get(run_id, 0)

    async def has_entry(self, run_id: str, seq: int) -> bool:
        """Whether entry ``seq`` exists: one HEAD."""
        return await self._exists(run_id, seq, "watch inbox")

    # --- reading ---------------------------------------------------------------------

    def _firsts(self, run_id: str) -> tuple[anyio.Lock, FirstSeqs]:
        return self._seen.setdefault(run_id, (anyio.Lock(), FirstSeqs()))

    async def read(self, run_id: str, start: int, stop: int | None = None) -> list[InboxEntry]:
        """Entries from ``start`` on (before ``stop``), each id's first only; damaged skipped."""
        start = max(start, 0)
        lock, firsts = self._firsts(run_id)
        async with lock:
            # the ids before ``start``, read once per store, so duplicates there are known
            if firsts.end < start:
                for seq, entry in await self._read(
                    run_id, firsts.end, start, warned=firsts.damaged
                ):
                    firsts.note(seq, entry)
            slots = await self._read(run_id, start, stop, warned=firsts.damaged)
            if slots and firsts.end < start:  # posted meanwhile: the ones before are there now
                for seq, entry in await self._read(
                    run_id, firsts.end, start, warned=firsts.damaged
                ):
                    firsts.note(seq, entry)
            for seq, entry in slots:
                firsts.note(seq, entry)
            self._ends[run_id] = max(self._ends.get(run_id, 0), firsts.end)
            self._read_to[run_id] = max(self._read_to.get(run_id, 0), firsts.end)
            return firsts.keep(entry for _, entry in slots if entry is not None)

    async def check(self, run_id: str) -> InboxCheck:
        """Open every entry of the run's inbox, naming the damaged ones."""
        check = InboxCheck()
        for seq, location, body in await self._stored(run_id, 0):
            check.open(self._codec, body, run_id=run_id, seq=seq, location=location)
        return check

    async def _read(
        self, run_id: str, start: int, stop: int | None = None, *, warned: set[int]
    ) -> list[tuple[int, InboxEntry | None]]:
        """``(seq, entry)`` for ``start`` .. ``stop - 1`` or to the end; None where damaged."""
        return [
            (
                seq,
                open_or_skip(self._codec, body, run_id=run_id, seq=seq, location=at, warned=warned),
            )
            for seq, at, body in await self._stored(run_id, start, stop)
        ]

    async def _stored(
        self, run_id: str, start: int, stop: int | None = None
    ) -> list[tuple[int, str, bytes]]:
        """``(seq, location, body)`` of entries ``start`` .. ``stop - 1``, or to the end.

        Read in batches of concurrent GETs. To the end, batches grow 1, 2, 4 ...
        up to ``_BATCH``: most reads (an empty inbox, a follower with nothing
        new) cost one GET.
        """
        found: list[tuple[int, str, bytes]] = []
        seq = start
        grow = 1
        while stop is None or seq < stop:
            count = min(grow, _BATCH) if stop is None else min(_BATCH, stop - seq)
            grow *= 2
            keys = [self.key(run_id, s) for s in range(seq, seq + count)]
            bodies = await self._objects.gather(
                [partial(self._objects.get_or_none, "read inbox", k) for k in keys]
            )
            for key, body in zip(keys, bodies, strict=True):
                if body is None:  # the end
                    return found
                found.append((seq, self._objects.location(key), body))
                seq += 1
        return found


class InboxPoll:
    """An S3 store's inbox watch: a HEAD of the next entry every ``interval`` seconds."""

    def __init__(
        self, inbox: InboxObjects, wakeups: Wakeups, run_id: str, end: int, interval: float
    ) -> None:
        self._inbox = inbox
        self._wakeups = wakeups
        self._run_id = run_id
        self._end = end  # entries before it existed when the watch opened or last returned
        self._posts = wakeups.count(run_id)  # this store's posts seen
        self._interval = interval

    async def changed(self) -> None:
        """See :meth:`InboxWatch.changed`: within ``interval`` of a post, at once for our own.

        Raises:
            StorageError: the bucket could not be reached (after the store's retries).
        """
        while True:
            with anyio.move_on_after(self._interval):
                self._posts = await self._wakeups.wait_past(self._run_id, self._posts)
                return
            # past what this store has read since: those need no wake-up
            end = max(self._end, self._inbox.read_to(self._run_id))
            if await self._inbox.has_entry(self._run_id, end):
                self._end = end + 1
                return
            self._end = end
