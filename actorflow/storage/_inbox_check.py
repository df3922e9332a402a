"""Damaged inbox entries: skipped by readers, named by ``actorflow validate``.

An entry that fails its checksum, does not decode, or sits at a ``seq`` it
was not written for (moved or copied there) is **damaged**. Its ``seq`` stays
taken (no post ever reuses it), so the entries after it keep their places:
``read_inbox`` skips it, with an ``inbox_entry_damaged`` warning the first
time a store meets it, and returns the others. A message is never held
behind a damaged one, and a wait the damaged one would have answered waits
on (for its deadline, or a message posted again), exactly as if it had never
been posted. :meth:`InboxChecker.check_inbox`, which ``actorflow validate``
calls, names each damaged entry.

An entry encrypted with a key the store was not given is not damaged: it
raises :class:`~actorflow.errors.EncryptionKeyError`, as every read does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

import msgspec

from actorflow._log import get_logger
from actorflow.errors import CorruptedDataError, InboxCorruptedError
from actorflow.storage._inbox import open_entry

if TYPE_CHECKING:
    from actorflow.storage._inbox import InboxEntry
    from actorflow.storage._sealing import Codec

__all__ = ["InboxCheck", "InboxChecker", "open_or_skip", "skip_damaged"]

_log = get_logger(__name__)


def open_or_skip(
    codec: Codec, data: bytes, *, run_id: str, seq: int, location: str, warned: set[int]
) -> InboxEntry | None:
    """The entry stored at ``seq``, or None if it is damaged (see the module docstring).

    A damaged entry is logged (``inbox_entry_damaged``) the first time, that
    is, unless its ``seq`` is in ``warned`` (which it is added to).

    Raises:
        EncryptionKeyError: encrypted with a key the codec lacks.
    """
    try:
        return open_entry(codec, data, run_id=run_id, seq=seq, location=location)
    except InboxCorruptedError as exc:
        skip_damaged(exc, run_id=run_id, seq=seq, warned=warned)
        return None


def skip_damaged(damage: CorruptedDataError, *, run_id: str, seq: int, warned: set[int]) -> None:
    """Skip the damaged entry at ``seq``: logged unless ``seq`` is in ``warned``, then added."""
    if seq not in warned:
        warned.add(seq)
        _log.warning(
            "inbox_entry_damaged",
            run_id=run_id,
            seq=seq,
            location=damage.location,
            cause=damage.cause_text,
            problem="skipped: the messages after it are read; restore the file from a "
            "backup, or post the message again",
        )


class InboxCheck(msgspec.Struct, kw_only=True):
    """What :meth:`InboxChecker.check_inbox` read of one run's inbox.

    Attributes:
        entries: entries read, damaged ones included.
        damaged: ``(location, what is wrong)`` for each damaged entry (which
            ``read_inbox`` skips).

    .. versionadded:: 0.4
    """

    entries: int = 0
    damaged: list[tuple[str, str]] = []

    def open(self, codec: Codec, data: bytes, *, run_id: str, seq: int, location: str) -> None:
        """Open one stored entry as a reader would; count it, and note it if damaged.

        Raises:
            EncryptionKeyError: encrypted with a key the codec lacks.
        """
        self.entries += 1
        try:
            open_entry(codec, data, run_id=run_id, seq=seq, location=location)
        except InboxCorruptedError as exc:
            self.damaged.append((exc.location, exc.cause_text))


@runtime_checkable
class InboxChecker(Protocol):
    """A store that can name the damaged entries of a run's inbox (``actorflow validate``).

    The memory, file and S3 stores are. Their ``read_inbox`` skips a damaged
    entry (it is never waited on); this names it.

    .. versionadded:: 0.4
    """

    async def check_inbox(self, run_id: str) -> InboxCheck:
        """Open every entry of the run's inbox, from ``seq`` 0 to its end.

        Raises:
            RunNotFoundError: no such run.
            EncryptionKeyError: an entry is encrypted with a key the store was not given.
        """
        ...
