"""Where an inbox ends, and how a post takes the first free ``seq``: one algorithm for every store.

An inbox has no gaps (entries ``0 .. end - 1`` exist, none after), so its
end, the first free ``seq``, is found in O(log n) existence checks: an
exponential probe, then a binary search. A store remembers where it last
saw the end; others may have posted since, or the inbox may have been
deleted with its run and begun anew, so that hint is checked against the
entry before it. A post then creates its entry there with a conditional
create, and at the next ``seq`` when another poster took that one first.

The steps do no IO themselves: each is a generator that yields what it needs
to know (:class:`Exists` or :class:`Create`) and is sent the answer. The file
store answers with blocking calls in its worker threads (:func:`drive`), the
S3 store with awaited HEADs and PUTs (:func:`drive_async`).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, NamedTuple, TypeAlias, TypeVar

import msgspec

from actorflow.storage._inbox import InboxEntry

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Generator

__all__ = [
    "Create",
    "Exists",
    "Step",
    "append",
    "drive",
    "drive_async",
    "find_end",
    "find_start",
    "new_entry",
]

R = TypeVar("R")


class Exists(NamedTuple):
    """Does entry ``seq`` exist? Answered True if it does."""

    seq: int


class Create(NamedTuple):
    """Store ``entry`` at its ``seq`` unless that name is taken. Answered True if it was stored."""

    entry: InboxEntry


Step: TypeAlias = "Exists | Create"
"""What a search or an append asks of the store."""


def find_end() -> Generator[Exists, bool, int]:
    """The first ``seq`` with no entry, in O(log n) checks: entries have no gaps."""
    if not (yield Exists(0)):
        return 0
    low, high = 0, 1  # entry ``low`` exists; past ``high`` unknown
    while (yield Exists(high)):
        low, high = high, high * 2
    while high - low > 1:  # ``low`` exists, ``high`` does not
        middle = (low + high) // 2
        if (yield Exists(middle)):
            low = middle
        else:
            high = middle
    return high


def find_start(hint: int | None) -> Generator[Exists, bool, int]:
    """The first ``seq`` worth trying: never past the end, so the inbox has no gaps.

    Args:
        hint: where the store last saw the inbox end, or None.
    """
    # A hint is checked against the entry before it: the inbox may have been
    # deleted with the run and begun anew by another process since.
    if hint is not None and (hint == 0 or (yield Exists(hint - 1))):
        return hint
    return (yield from find_end())


def new_entry(
    entry_id: str, type_name: str, payload: bytes, sender: str | None, kind: str
) -> InboxEntry:
    """The entry a post appends, sent now; its ``seq`` is set by :func:`append`."""
    return InboxEntry(
        seq=0,
        entry_id=entry_id,
        type=type_name,
        payload=payload,
        sent=time.time(),
        sender=sender,
        kind=kind,
    )


def append(entry: InboxEntry, hint: int | None) -> Generator[Step, bool, InboxEntry]:
    """Store ``entry`` at the first free ``seq`` from :func:`find_start`; returns it as stored.

    Args:
        entry: what to post; its own ``seq`` is replaced by the one it lands at.
        hint: where the store last saw the inbox end, or None.
    """
    entry = msgspec.structs.replace(entry, seq=(yield from find_start(hint)))
    while not (yield Create(entry)):
        entry = msgspec.structs.replace(entry, seq=entry.seq + 1)  # another poster took it first
    return entry


def drive(steps: Generator[Step, bool, R], answer: Callable[[Step], bool]) -> R:
    """Run ``steps`` to their end, answering each with ``answer`` (blocking)."""
    try:
        step = next(steps)
        while True:
            step = steps.send(answer(step))
    except StopIteration as done:
        result: R = done.value
        return result


async def drive_async(
    steps: Generator[Step, bool, R], answer: Callable[[Step], Awaitable[bool]]
) -> R:
    """Run ``steps`` to their end, awaiting ``answer`` for each."""
    try:
        step = next(steps)
        while True:
            step = steps.send(await answer(step))
    except StopIteration as done:
        result: R = done.value
        return result
