"""Worker threads for blocking file work, cheaper to reach than ``anyio.to_thread``.

Every FileStore operation, and so every durable log append, is one trip to a
worker thread and back; in a ``sync`` run that trip is on the path of every
step. ``anyio.to_thread.run_sync`` pays for a scheduler pass before it starts,
a capacity limiter, a cancel scope, a copied context and a future. This pool
hands the call to an idle thread through a queue and waits for one byte on a
socket pair that the thread writes when done (``anyio.wait_readable``, so on
both event loops). A no-op round trip costs 20-45 % less on trio and 5-45 %
less on asyncio, from run to run on this machine (benchmarks/storage.py,
"Worker thread round trip").

Each call in flight holds one socket pair, so the pool caps the calls in
flight (and its threads) at ``MAX_IN_FLIGHT``; past that, calls go through
``anyio.to_thread`` as before. A call, once handed over, always runs to the
end and its caller waits for it even when cancelled (like
``anyio.to_thread.run_sync``): a durable write must not be abandoned halfway
by the task that asked for it.
"""

from __future__ import annotations

import os
import queue
import socket
import threading
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import anyio
import anyio.to_thread
import sniffio

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["MAX_IN_FLIGHT", "run_in_thread"]

T = TypeVar("T")

#: calls in flight through the pool (each holds a socket pair: two descriptors)
MAX_IN_FLIGHT = 32
#: a thread with nothing to do for this long exits
IDLE_SECONDS = 10.0


class _Call(Generic[T]):
    """One call in flight: the function, its outcome and the socket pair that signals it."""

    __slots__ = ("args", "error", "fn", "result", "signal", "wait_on")

    def __init__(self) -> None:
        self.wait_on, self.signal = socket.socketpair()
        self.wait_on.setblocking(False)
        self.fn: Callable[..., T] | None = None
        self.args: tuple[Any, ...] = ()
        self.result: T | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        """In a worker thread: run the call, keep its outcome, wake the caller."""
        assert self.fn is not None
        try:
            self.result = self.fn(*self.args)
        except BaseException as exc:  # handed to the caller, who re-raises it
            self.error = exc
        try:
            self.signal.send(b"\0")
        except OSError:
            pass  # the caller's side was closed: nobody waits any more

    def close(self) -> None:
        self.wait_on.close()
        self.signal.close()


class _Pool:
    """Threads that take calls from one queue; more start while all are busy."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[_Call[Any]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        self._waiting = 0  # threads blocked on the queue
        self._pending = 0  # calls put on the queue and not yet taken
        self._spare: list[_Call[Any]] = []  # socket pairs free for the next calls
        self._made = 0  # socket pairs in existence

    def take(self) -> _Call[Any] | None:
        """A free call slot, or None when ``MAX_IN_FLIGHT`` are in flight."""
        try:
            return self._spare.pop()
        except IndexError:
            pass
        with self._lock:
            if self._made >= MAX_IN_FLIGHT:
                return None
            self._made += 1
        return _Call()

    def give_back(self, call: _Call[Any]) -> None:
        call.fn, call.args, call.result, call.error = None, (), None, None
        self._spare.append(call)

    def discard(self, call: _Call[Any]) -> None:
        call.close()
        with self._lock:
            self._made -= 1

    def close_spares(self) -> None:
        """Close the free socket pairs (a forked child's copies, or a pool being replaced)."""
        spare, self._spare = self._spare, []
        for call in spare:
            call.close()

    def submit(self, call: _Call[Any]) -> None:
        with self._lock:
            self._pending += 1
            start = self._waiting < self._pending
            if start:
                self._threads += 1
        if start:
            threading.Thread(target=self._work, name="actorflow-io", daemon=True).start()
        self._queue.put(call)

    def _work(self) -> None:
        while True:
            with self._lock:
                self._waiting += 1
            try:
                call = self._queue.get(timeout=IDLE_SECONDS)
            except queue.Empty:
                with self._lock:
                    self._waiting -= 1
                    if self._pending <= self._waiting:  # nothing is on its way to us
                        self._threads -= 1
                        return
                continue
            with self._lock:
                self._waiting -= 1
                self._pending -= 1
            call.run()


_pool = _Pool()


def _after_fork() -> None:
    # a forked child has none of the parent's threads; its calls start afresh
    global _pool
    _pool.close_spares()
    _pool = _Pool()


os.register_at_fork(after_in_child=_after_fork)


async def run_in_thread(fn: Callable[..., T], *args: Any) -> T:
    """Run ``fn(*args)`` in a worker thread and return its result (or raise its error).

    The call is not abandoned if the caller is cancelled: the caller waits
    for it to finish, then the cancellation takes effect at its next checkpoint.
    """
    pool = _pool
    call = pool.take()
    if call is None:  # many calls in flight: the loop is busy, the trip matters less
        return await anyio.to_thread.run_sync(fn, *args)
    call.fn, call.args = fn, args
    pool.submit(call)
    try:
        if sniffio.current_async_library() == "trio":
            await _wait_through_cancellation(call)
        else:
            with anyio.CancelScope(shield=True):
                await anyio.wait_readable(call.wait_on)
        call.wait_on.recv(1)
    except BaseException:
        pool.discard(call)  # its thread may still write to it: never reuse it
        raise
    result, error = call.result, call.error
    pool.give_back(call)
    if error is not None:
        raise error
    return result  # type: ignore[return-value]


async def _wait_through_cancellation(call: _Call[Any]) -> None:
    """Wait for ``call`` to finish, whether or not the caller is cancelled meanwhile.

    What a shielded wait does, for trio, where entering a shield costs about
    20 µs on every call: this pays for one only when the caller was cancelled.
    The cancellation is not lost: trio raises it again at the caller's next
    checkpoint, as it would after a shield.
    """
    try:
        await anyio.wait_readable(call.wait_on)
    except anyio.get_cancelled_exc_class():
        with anyio.CancelScope(shield=True):
            await anyio.wait_readable(call.wait_on)
