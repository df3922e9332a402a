"""Waiting for a Ray ``ObjectRef`` from asyncio or trio, without a thread per call.

On asyncio an ``ObjectRef`` is awaitable (Ray's own integration). On trio,
the ref's ``concurrent.futures.Future`` wakes the waiting task through its
event loop token: Ray's thread only queues a callback, it never blocks on the
loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import anyio.lowlevel
import sniffio

if TYPE_CHECKING:
    from collections.abc import Callable
    from concurrent.futures import Future

    from ray import ObjectRef

__all__ = ["on_done", "wait_ref"]

T = TypeVar("T")


async def wait_ref(ref: ObjectRef[T]) -> T:
    """The value of ``ref`` once Ray has it; a cancellation point.

    Raises:
        ray.exceptions.RayError: what Ray raises for the call (an actor died, say).
    """
    if sniffio.current_async_library() == "asyncio":
        return await ref
    done = anyio.Event()
    future: Future[T] = ref.future()
    on_done(future, lambda _: done.set())
    await done.wait()
    return future.result()


def on_done(future: Future[Any], callback: Callable[[Future[Any]], object]) -> None:
    """Call ``callback(future)`` in this event loop's thread once ``future`` is done.

    Ray completes futures in a thread of its own; the callback is queued on
    the loop (never run in Ray's thread, which never waits for the loop).
    Once the loop has ended, it is dropped.
    """
    token = anyio.lowlevel.current_token()
    # EventLoopToken's backend class is anyio's only non-blocking way in from a thread
    backend = token.backend_class

    def queue(done: Future[Any]) -> None:
        try:
            backend.run_sync_soon(callback, (done,), token.native_token)
        except anyio.RunFinishedError:
            pass  # the loop has ended: nobody waits any more

    future.add_done_callback(queue)
