"""LISTEN/NOTIFY: a listener thread per store that wakes inbox watches on both event loops.

A post commits ``pg_notify(channel, 'i:<run id>')`` in its own transaction;
the listener's connection (``LISTEN``) gets it from whichever process posted,
counts it for the run and writes a byte to the socket of every watch of that
run. A watch waits for its socket with ``anyio.wait_readable``, which works
on asyncio and trio alike, so no event loop's token is needed. Counts only
grow, so a post between two waits is never missed; after a lost listener
connection every watch is woken (a notification may have been missed).
"""

from __future__ import annotations

import socket
import threading
import uuid
from typing import TYPE_CHECKING

import anyio
import anyio.lowlevel
import psycopg

from actorflow._log import get_logger

if TYPE_CHECKING:
    from collections.abc import Callable

    from actorflow.storage.postgres._db import Database

__all__ = ["INBOX", "WORK", "WORK_KEY", "Listener", "SocketWatch", "Wakeups"]

_log = get_logger(__name__)

INBOX = "i"
"""The kind of notification a post sends: ``i:<run id>``."""
WORK = "w"
"""The kind of notification a run's submission or release sends, to idle workers: ``w:``."""
WORK_KEY = ""
"""What :class:`Wakeups` counts work notifications under (no run id is empty)."""


class Wakeups:
    """Posts counted per run, and the sockets of the watches waiting for them (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[str, int] = {}
        self._sockets: dict[str, set[socket.socket]] = {}

    def count(self, run_id: str) -> int:
        """How many posts the run has had since the store opened."""
        with self._lock:
            return self._counts.get(run_id, 0)

    def wake(self, run_id: str) -> None:
        """Count a post and poke every watch of the run. Never blocks."""
        with self._lock:
            self._counts[run_id] = self._counts.get(run_id, 0) + 1
            targets = list(self._sockets.get(run_id, ()))
        for sock in targets:
            try:
                sock.send(b"\0")
            except OSError:
                pass  # full (it is poked already) or closed (the watch left)

    def wake_all(self) -> None:
        """Wake every watch: notifications may have been missed."""
        with self._lock:
            runs = list(self._sockets)
        for run_id in runs:
            self.wake(run_id)

    def add(self, run_id: str, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.setdefault(run_id, set()).add(sock)

    def remove(self, run_id: str, sock: socket.socket) -> None:
        with self._lock:
            held = self._sockets.get(run_id)
            if held is not None:
                held.discard(sock)
                if not held:
                    del self._sockets[run_id]


class SocketWatch:
    """One open watch on a run's inbox; see :class:`~actorflow.storage.InboxWatch`."""

    def __init__(self, wakeups: Wakeups, run_id: str) -> None:
        self._wakeups = wakeups
        self._run_id = run_id
        self._read, self._write = socket.socketpair()
        self._read.setblocking(False)
        self._write.setblocking(False)
        wakeups.add(run_id, self._write)
        self._seen = wakeups.count(run_id)

    async def changed(self) -> None:
        """See :meth:`InboxWatch.changed`."""
        while (count := self._wakeups.count(self._run_id)) == self._seen:
            await anyio.wait_readable(self._read)
            try:
                while self._read.recv(4096):
                    pass
            except BlockingIOError:
                pass
        self._seen = count
        await anyio.lowlevel.checkpoint()

    def close(self) -> None:
        self._wakeups.remove(self._run_id, self._write)
        self._read.close()
        self._write.close()


class Listener:
    """The thread that LISTENs on the store's channel and feeds :class:`Wakeups`.

    Between notifications it calls ``tick`` every ``interval`` seconds (the
    store checks its lock connection there).
    """

    def __init__(
        self, db: Database, channel: str, wakeups: Wakeups, tick: Callable[[], None]
    ) -> None:
        self._db = db
        self.channel = channel
        self._wakeups = wakeups
        self._tick = tick
        self._stop_token = f"stop:{uuid.uuid4().hex}"
        self._stopping = False
        self.listening = threading.Event()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self.interval = 2.0

    def start(self) -> None:
        """Start the thread once (idempotent); :attr:`listening` is set once it listens."""
        with self._start_lock:
            if self._thread is None and not self._stopping:
                self._thread = threading.Thread(
                    target=self._run, name=f"actorflow-pg-listen-{self.channel}", daemon=True
                )
                self._thread.start()

    def _run(self) -> None:
        failures = 0
        while not self._stopping:
            try:
                conn = self._db.connect(purpose="listen")
            except Exception as exc:  # the store's calls say so; this waits and tries again
                failures += 1
                _log.warning("postgres_listener_down", error=str(exc))
                threading.Event().wait(min(0.1 * 2**failures, 2.0))
                continue
            try:
                conn.execute(f"LISTEN {self.channel}")
                failures = 0
                self._wakeups.wake_all()  # anything sent while nobody listened
                self.listening.set()
                while not self._stopping:
                    for note in conn.notifies(timeout=self.interval):
                        if note.payload == self._stop_token:
                            return
                        kind, _, run_id = note.payload.partition(":")
                        if kind == INBOX:
                            self._wakeups.wake(run_id)
                        elif kind == WORK:
                            self._wakeups.wake(WORK_KEY)
                    self._tick()
            except psycopg.Error as exc:
                if not self._stopping:
                    _log.warning("postgres_listener_lost", error=str(exc).strip())
            finally:
                self._db.discard(conn)

    def stop(self, notify: Callable[[str], None]) -> None:
        """Stop the thread (``notify`` sends the stop token on the channel) and wait for it."""
        self._stopping = True
        thread = self._thread
        if thread is None:
            return
        try:
            notify(self._stop_token)
        except Exception:  # the thread stops at its next tick anyway
            pass
        thread.join(timeout=self.interval + 1.0)
