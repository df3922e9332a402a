"""``actorflow ui`` in a subprocess: started, its URL read from its one line, stopped."""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator

ROOT = Path(__file__).resolve().parents[2]
STARTUP = 60.0
"""Seconds the server may take to print its URL (a loaded CI machine imports slowly)."""


def ui_process(*args: str) -> subprocess.Popen[bytes]:
    """``python -m actorflow ui ARGS`` with this checkout first on the path."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-m", "actorflow", "ui", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=ROOT,
    )


def first_line(proc: subprocess.Popen[bytes], timeout: float = STARTUP) -> str:
    """The first line ``proc`` prints, waited for at most ``timeout`` seconds."""
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    buffer = b""
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        while b"\n" not in buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not selector.select(left):
                raise TimeoutError(f"actorflow ui printed nothing in {timeout} s")
            chunk = os.read(proc.stdout.fileno(), 4096)
            if not chunk:
                _, err = proc.communicate(timeout=10)
                raise RuntimeError(f"actorflow ui ended: {err.decode(errors='replace')}")
            buffer += chunk
    return buffer.split(b"\n", 1)[0].decode()


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Ctrl-C, then a kill if it has not ended within a few seconds."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()


@contextlib.contextmanager
def serving(*args: str) -> Iterator[str]:
    """The URL (with its token) of an ``actorflow ui ARGS`` running meanwhile."""
    proc = ui_process("--port", "0", *args)
    try:
        line = first_line(proc)
        assert line.startswith("actorflow ui: http://127.0.0.1:"), line
        yield line.removeprefix("actorflow ui: ")
    finally:
        stop(proc)
