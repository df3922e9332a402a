"""``LogWriter``: one run's log appends, buffered, with group commit.

``add`` is synchronous and cheap: it checks that a record encodes, buffers it
and returns its absolute position. ``flush`` makes the log durable through a
position. At most one store append is in flight; it carries everything
buffered when it starts, and records added meanwhile ride on the next one, so
any number of concurrent flushers share appends (one fsync on the file store).
A failed append raises ``StorageError`` to every flusher waiting on it and
puts its records back at the front of the buffer, in order: nothing is lost,
and the next flush tries them again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import sniffio

from actorflow.errors import StorageError
from actorflow.storage._codec import encode_record

if TYPE_CHECKING:
    from collections.abc import Callable

    from actorflow.storage._protocol import Store
    from actorflow.storage._records import LogRecord

__all__ = ["LogWriter"]


F = TypeVar("F", bound="Callable[..., Any]")

_MARK = "__actorflow_finishes_when_cancelled__"


def finishes_when_cancelled(append: F) -> F:
    """Mark a store's ``append`` that, once it took the records, finishes even if cancelled.

    Cancelled before it took them, it must raise having appended nothing.
    ``LogWriter`` then skips the shield it otherwise puts around each append
    (about 20 µs on trio); the mark is not inherited by an ``append`` that
    overrides it.
    """
    setattr(append, _MARK, True)
    return append


def _needs_shield(store: Store) -> bool:
    # An append's outcome must be known even when its caller is cancelled.
    # On asyncio a cancellation must still be raised where it lands, so the
    # shield stays; on trio it comes back at the caller's next checkpoint.
    # (a wrapper that delegates through __getattr__ has no class attribute `append`)
    marked = getattr(getattr(type(store), "append", None), _MARK, False)
    return not (marked and sniffio.current_async_library() == "trio")


class _Append:
    """One store append in flight, and its outcome."""

    __slots__ = ("_done", "end", "error", "finished")

    def __init__(self, end: int) -> None:
        self.end = end
        self.finished = False
        # made only when a second flusher waits: most appends have one
        self._done: anyio.Event | None = None
        self.error: BaseException | None = None

    async def wait(self) -> None:
        if not self.finished:
            if self._done is None:
                self._done = anyio.Event()
            await self._done.wait()

    def finish(self) -> None:
        self.finished = True
        if self._done is not None:
            self._done.set()


class LogWriter:
    """Buffers a run's records and appends them to the store in groups.

    The owner of a run creates one per run, after claiming the run, with
    ``start`` = ``await store.log_length(run_id)``. Use from one event loop.

    Args:
        store: where the log lives.
        run_id: the run whose log this is.
        start: the log's current length (the position of the next record).
    """

    def __init__(self, store: Store, run_id: str, *, start: int) -> None:
        self.store = store
        self.run_id = run_id
        self._buffer: list[LogRecord] = []
        self._next = start
        self._durable = start
        self._in_flight: _Append | None = None
        # made only while a follower waits in wait_durable
        self._changed: anyio.Event | None = None
        self.appends = 0
        """How many store appends this writer made (for metrics and tests)."""
        self._shield: bool | None = None  # decided on the first append, inside the loop

    @property
    def durable(self) -> int:
        """Every record below this position is durable."""
        return self._durable

    @property
    def position(self) -> int:
        """The position the next added record will get."""
        return self._next

    def add(self, record: LogRecord) -> int:
        """Buffer ``record`` and return its position. Never blocks; not yet durable.

        Raises:
            EncodingError: the record cannot be encoded (nothing is buffered).
        """
        encode_record(record)  # a bad record fails here, not later inside everyone's flush
        self._buffer.append(record)
        position = self._next
        self._next = position + 1
        return position

    async def flush(self, through: int | None = None) -> int:
        """Wait until every record below ``through`` (default: all added) is durable.

        Concurrent callers share appends. Cancelling a caller never cancels an
        append in flight: its outcome must be known, so it is shielded, or left
        to a store whose appends finish by themselves once they have begun
        (``finishes_when_cancelled``).

        Returns:
            The durable position (at least ``through``).

        Raises:
            StorageError: the append carrying these records failed; they stay
                buffered for the next flush.
        """
        target = self._next if through is None else min(through, self._next)
        while self._durable < target:
            attempt = self._in_flight
            if attempt is None:
                attempt = self._in_flight = _Append(self._next)
                await self._carry(attempt)
            else:
                await attempt.wait()
            if attempt.error is not None:
                raise StorageError(
                    "append log", f"run {self.run_id!r}: {attempt.error}; records kept for retry"
                ) from attempt.error
        return self._durable

    async def _carry(self, attempt: _Append) -> None:
        batch, self._buffer = self._buffer, []
        try:
            self.appends += 1
            if self._shield is None:
                self._shield = _needs_shield(self.store)
            if self._shield:
                with anyio.CancelScope(shield=True):
                    length = await self.store.append(self.run_id, batch)
            else:
                length = await self.store.append(self.run_id, batch)
            if length != self._durable + len(batch):
                raise StorageError(
                    "append log",
                    f"log of run {self.run_id!r} has {length} records, expected "
                    f"{self._durable + len(batch)}: another process wrote to it",
                )
            self._durable = length
            changed, self._changed = self._changed, None
            if changed is not None:
                changed.set()
        except Exception as exc:
            self._buffer[:0] = batch
            attempt.error = exc
        except anyio.get_cancelled_exc_class():
            # Unshielded, a cancellation comes out of the store only before it
            # took the records: keep them for the next flush (the other
            # flushers see no error and carry them themselves).
            if not self._shield:
                self._buffer[:0] = batch
            raise
        finally:
            self._in_flight = None
            attempt.finish()

    async def wait_durable(self, position: int) -> None:
        """Wait, without flushing, until every record below ``position`` is durable.

        For followers such as the checkpoint actor: a snapshot at ``p`` is
        written only after the log is durable through ``p``.
        """
        while self._durable < position:
            if self._changed is None:
                self._changed = anyio.Event()
            await self._changed.wait()
