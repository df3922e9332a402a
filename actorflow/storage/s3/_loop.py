"""An asyncio loop in a daemon thread, for aioboto3 under trio.

aioboto3 needs a running asyncio loop. Under trio, an ``S3Store`` runs one in a
helper thread and calls into it through an anyio :class:`BlockingPortal`.

Not anyio's ``start_blocking_portal``: that is a generator context manager,
and a store that is never closed leaves it to be finalised at interpreter
exit, where its ``finally`` waits for a loop thread that no longer runs, so
the process never exits. Here nothing waits at exit: the thread is a daemon
and only :meth:`LoopThread.stop` (from ``aclose``) joins it.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future

import anyio
from anyio.from_thread import BlockingPortal

__all__ = ["LoopThread"]


class LoopThread:
    """One asyncio event loop in a daemon thread, serving calls through a portal."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._thread: threading.Thread | None = None
        self._portal: BlockingPortal | None = None

    def start(self) -> BlockingPortal:
        """Start the thread and its loop; return the portal. Blocks until it serves.

        Raises:
            RuntimeError: already started.
        """
        if self._thread is not None:
            raise RuntimeError("the loop thread is already started")
        ready: Future[BlockingPortal] = Future()

        async def serve() -> None:
            async with BlockingPortal() as portal:
                ready.set_result(portal)
                await portal.sleep_until_stopped()

        def run() -> None:
            try:
                anyio.run(serve, backend="asyncio")
            except BaseException as exc:
                if not ready.done():
                    ready.set_exception(exc)

        self._thread = threading.Thread(target=run, name=self._name, daemon=True)
        self._thread.start()
        self._portal = ready.result()
        return self._portal

    def stop(self) -> None:
        """Stop the loop, once the calls still running on it end, and join the thread. Blocks."""
        portal, thread, self._portal, self._thread = self._portal, self._thread, None, None
        if portal is not None:
            try:
                portal.call(portal.stop)
            except RuntimeError:
                pass  # the loop already ended
        if thread is not None:
            thread.join()
