"""A run's owner that forks a child which outlives it, as ``multiprocessing`` does on Linux.

Run as ``python -m tests.storage.file.fork_owner <folder> <run id>``: it claims
the run in the file store at ``folder``, takes the run's manifest lock as a
manifest change in a worker thread would be holding it, and forks a child with
``multiprocessing``'s ``fork`` start method. The child prints ``child lost``
if its copy of the store no longer holds the owner's claim (``child kept``
otherwise); then the owner prints ``ready <child pid>`` and waits to be killed.
The child lives until this process's stdin closes, at most two minutes.
"""

from __future__ import annotations

import multiprocessing
import os
import select
import sys
from typing import TYPE_CHECKING

import anyio

from actorflow.errors import LeaseLostError
from actorflow.storage import FileStore

if TYPE_CHECKING:
    from multiprocessing.synchronize import Event

    from actorflow.storage import Lease

LIFETIME = 120.0  # seconds: a child the test failed to stop goes on its own


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def linger(store: FileStore, lease: Lease, stdin: int, told: Event) -> None:
    """The child: say whether it holds the claim, then wait for the end of the test's pipe."""
    try:
        anyio.run(store.renew, lease)
        say("child kept")
    except LeaseLostError:
        say("child lost")
    told.set()
    select.select([stdin], [], [], LIFETIME)


def main(folder: str, run_id: str) -> None:
    store = FileStore(folder)
    lease = anyio.run(store.claim, run_id, "forking-owner")
    store.fs.lock(os.path.join(folder, "runs", run_id, "manifest.lock"))
    stdin = os.dup(sys.stdin.fileno())  # multiprocessing gives its child /dev/null as stdin
    context = multiprocessing.get_context("fork")
    told = context.Event()
    child = context.Process(target=linger, args=(store, lease, stdin, told))
    child.start()
    told.wait(LIFETIME)
    say(f"ready {child.pid}")
    select.select([stdin], [], [], LIFETIME)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
