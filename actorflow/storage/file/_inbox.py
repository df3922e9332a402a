"""A file store's inboxes: one file per entry, named by its ``seq``, created by an exclusive link.

Layout, inside a run's folder (made on the run's first post, so runs
written before inboxes existed work unchanged)::

    inbox/00000000000000000042.msg   entry 42: temp file, fsync, link (fails if
                                     the name exists), folder fsync
    inbox/<id key>.id                empty: that entry id was posted (or is being)
    inbox/<id key>.lock              flock'ed while a post of that id runs, and
                                     removed by it before it lets go

``<id key>`` is a hash of the entry id (:func:`~actorflow.storage._inbox.id_key`).
A post takes its id's lock, so two posts of one id (threads or processes of
this machine) run one after the other. Under it, a post of a new id creates
the ``.id`` file, then links its entry at the first free ``seq`` (found in
O(log n) existence checks, the next one taken when another poster linked
first: :mod:`actorflow.storage._inbox_slots`, shared with the S3 store); a post
finding the ``.id`` file looks for the entry holding the id (reading the
inbox from 0: the rare path), and writes it only if the poster that created
the file died before writing it. The ``.id`` file is never fsynced: the entry's
folder fsync commits it with the entry, and without the entry it is only a
hint to look.

Every method blocks: the store calls them from worker threads.
"""

from __future__ import annotations

import os
import threading
from functools import partial
from typing import TYPE_CHECKING

from actorflow.errors import RunNotFoundError, UnreadableFileError
from actorflow.storage._inbox import FirstSeqs, InboxEntry, id_key, seal_entry
from actorflow.storage._inbox_check import InboxCheck, open_or_skip, skip_damaged
from actorflow.storage._inbox_slots import Exists, append, drive, new_entry
from actorflow.storage.file._fs import remake_folder, write_atomic

if TYPE_CHECKING:
    from collections.abc import Iterator

    from actorflow.storage._inbox_slots import Step
    from actorflow.storage._sealing import Codec
    from actorflow.storage.file._layout import RunFolders

__all__ = ["ENTRY_SUFFIX", "INBOX", "InboxFiles", "entry_path", "stored_entries"]

INBOX = "inbox"
"""The folder of a run's inbox (made on its first post)."""

ENTRY_SUFFIX = ".msg"
"""The suffix of entry files."""


def entry_path(folders: RunFolders, run_id: str, seq: int) -> str:
    """Where entry ``seq`` of the run lives."""
    return folders.run(run_id, INBOX, f"{seq:020d}{ENTRY_SUFFIX}")


def stored_entries(
    folders: RunFolders, run_id: str, start: int = 0, stop: int | None = None
) -> Iterator[tuple[int, str, bytes | UnreadableFileError]]:
    """``(seq, path, sealed bytes)`` of the run's entries from ``start``, in order, none opened.

    In place of the bytes, the error for an entry that is no file actorflow
    reads (a FIFO, a device): it counts as damaged, and the entries after it
    are read on.
    """
    seq = start
    while stop is None or seq < stop:
        path = entry_path(folders, run_id, seq)
        try:
            data: bytes | UnreadableFileError = folders.fs.read(path)
        except FileNotFoundError:  # the end (or no inbox yet)
            return
        except UnreadableFileError as exc:
            data = exc
        yield seq, path, data
        seq += 1


class InboxFiles:
    """The runs' inboxes under ``folders``, sealed by ``codec``."""

    def __init__(self, folders: RunFolders, codec: Codec) -> None:
        self._folders = folders
        self._fs = folders.fs
        self._codec = codec
        self._guard = threading.Lock()
        # Where each inbox ended when this store last wrote or found its end: only
        # a place to start looking (others may have posted since), checked before use.
        self._ends: dict[str, int] = {}
        self._seen: dict[str, tuple[threading.Lock, FirstSeqs]] = {}

    def path(self, run_id: str, seq: int) -> str:
        """Where entry ``seq`` of the run lives."""
        return entry_path(self._folders, run_id, seq)

    def forget(self, run_id: str) -> None:
        """Drop what this store remembers of the run's inbox (it was deleted or made anew)."""
        with self._guard:
            self._ends.pop(run_id, None)
            self._seen.pop(run_id, None)

    # --- posting ---------------------------------------------------------------------

    def post(
        self,
        run_id: str,
        entry_id: str,
        type_name: str,
        payload: bytes,
        sender: str | None,
        kind: str = "",
    ) -> InboxEntry:
        """Append the entry unless its id was posted; see the module docstring.

        Raises:
            RunNotFoundError: no such run.
        """
        self._folders.require(run_id)
        folder = self._open_folder(run_id)
        key = id_key(self._codec, entry_id)
        lock_path = os.path.join(folder, f"{key}.lock")
        lock = self._fs.lock(lock_path)
        try:
            if not self._claim(os.path.join(folder, f"{key}.id")):
                found = self._find(run_id, entry_id)
                if found is not None:
                    return found
                # else its poster died between the claim and the entry: finish its post
            return self._append(run_id, entry_id, type_name, payload, sender, kind)
        finally:
            # needed only while held: the .id file is what lasts (see the module docstring)
            self._fs.unlock_and_remove(lock, lock_path)

    def _open_folder(self, run_id: str) -> str:
        folder = self._folders.run(run_id, INBOX)
        if not self._fs.is_dir(folder):
            try:
                remake_folder(self._fs, folder)
            except FileNotFoundError:  # the run's folder went: deleted meanwhile
                raise RunNotFoundError(run_id) from None
            self.forget(run_id)  # a new inbox: nothing remembered of an older one holds
        return folder

    def _claim(self, path: str) -> bool:
        try:
            handle = self._fs.open(path, "create")
        except FileExistsError:
            return False
        self._fs.close(handle)
        return True

    def _append(
        self,
        run_id: str,
        entry_id: str,
        type_name: str,
        payload: bytes,
        sender: str | None,
        kind: str,
    ) -> InboxEntry:
        entry = new_entry(entry_id, type_name, payload, sender, kind)
        with self._guard:
            hint = self._ends.get(run_id)
        entry = drive(append(entry, hint), partial(self._answer, run_id))
        with self._guard:
            self._ends[run_id] = max(self._ends.get(run_id, 0), entry.seq + 1)
        return entry

    def _answer(self, run_id: str, step: Step) -> bool:
        """Answer a step of the search or the append: an existence check, or the entry's link."""
        if isinstance(step, Exists):
            return self._fs.exists(self.path(run_id, step.seq))
        sealed = seal_entry(self._codec, step.entry, run_id=run_id)
        return write_atomic(self._fs, self.path(run_id, step.entry.seq), sealed, exclusive=True)

    def _find(self, run_id: str, entry_id: str) -> InboxEntry | None:
        # what this store read of the inbox already says where ids are: only the
        # entries past it are looked through, so re-posting known ids stays cheap
        start, known = self._known(run_id, entry_id)
        if known is not None:
            for _, entry in self._entries(run_id, known, known + 1, warned=set()):
                if entry is not None and entry.entry_id == entry_id:
                    return entry
            start = 0  # not where it was: the inbox was made anew meanwhile
        end = start
        for seq, entry in self._entries(run_id, start, warned=set()):
            end = seq + 1
            if entry is not None and entry.entry_id == entry_id:
                return entry
        with self._guard:
            self._ends[run_id] = max(self._ends.get(run_id, 0), end)
        return None

    def _known(self, run_id: str, entry_id: str) -> tuple[int, int | None]:
        """How far this store has read the inbox, and where ``entry_id`` first is in that part."""
        with self._guard:
            seen = self._seen.get(run_id)
        if seen is None:
            return 0, None
        lock, firsts = seen
        with lock:
            return firsts.end, firsts.first.get(entry_id)

    # --- reading ---------------------------------------------------------------------

    def read(self, run_id: str, start: int, stop: int | None = None) -> list[InboxEntry]:
        """Entries from ``start`` on (before ``stop``), each id's first only; damaged ones skipped.

        Raises:
            RunNotFoundError: no such run.
        """
        self._folders.require(run_id)
        start = max(start, 0)
        with self._guard:
            lock, firsts = self._seen.setdefault(run_id, (threading.Lock(), FirstSeqs()))
        with lock:
            # the ids before ``start``, read once per store, so duplicates there are known
            for seq, entry in self._entries(run_id, firsts.end, stop=start, warned=firsts.damaged):
                firsts.note(seq, entry)
            entries = []
            for seq, entry in self._entries(run_id, start, stop, warned=firsts.damaged):
                firsts.note(seq, entry)
                if entry is not None:
                    entries.append(entry)
            return firsts.keep(entries)

    def check(self, run_id: str) -> InboxCheck:
        """Open every entry of the run's inbox, naming the damaged ones.

        Raises:
            RunNotFoundError: no such run.
        """
        self._folders.require(run_id)
        check = InboxCheck()
        for seq, path, data in stored_entries(self._folders, run_id):
            if isinstance(data, UnreadableFileError):
                check.entries += 1
                check.damaged.append((path, data.cause_text))
            else:
                check.open(self._codec, data, run_id=run_id, seq=seq, location=path)
        return check

    def _entries(
        self, run_id: str, start: int, stop: int | None = None, *, warned: set[int]
    ) -> Iterator[tuple[int, InboxEntry | None]]:
        """``(seq, entry)`` from ``start``; the entry None where it is damaged."""
        for seq, path, data in stored_entries(self._folders, run_id, start, stop):
            if isinstance(data, UnreadableFileError):
                skip_damaged(data, run_id=run_id, seq=seq, warned=warned)
                yield seq, None
                continue
            opened = open_or_skip(
                self._codec, data, run_id=run_id, seq=seq, location=path, warned=warned
            )
            yield seq, opened
