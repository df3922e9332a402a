"""Reading a child process's output a line at a time, with a deadline.

``select`` on a pipe and then ``readline`` on its buffered file object is a
trap: the buffer may take two lines at once, and the next ``select`` then
waits for a line that was already read. :class:`Lines` reads the descriptor
itself and keeps what follows the line for the next call.
"""

from __future__ import annotations

import os
import select
import time
from typing import IO, Any


class Lines:
    """The lines of ``stream`` (a pipe from a child), each within a deadline."""

    def __init__(self, stream: IO[Any]) -> None:
        self._fd = stream.fileno()
        self._buffer = b""

    def next(self, timeout: float) -> str | None:
        """The next line without its newline; ``None`` at the end of the output.

        Raises:
            TimeoutError: no whole line came within ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self._fd], [], [], max(left, 0.0))
            if not ready:
                raise TimeoutError(f"no line for {timeout} s; had {self._buffer!r}")
            chunk = os.read(self._fd, 4096)
            if not chunk:
                return None
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode()
