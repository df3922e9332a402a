"""The child of the state-version SIGKILL test: version 1 of the code, killed mid-run.

Run as ``python -m tests.runtime.workflow.state_versions_child <store_dir> <run_id> <backend>``.
It runs ``NotesFlow`` on ``[["a", "b", "c"]]`` with the version-1 writer on a
FileStore, prints ``READY`` once its runtime is open and ``X <item>`` as the
writer starts on each item; the writer never finishes ``HOLD``, so the parent
kills the process with SIGKILL while the run is in the middle of that step.
"""

from __future__ import annotations

import sys

import anyio

from actorflow import Runtime
from actorflow.storage import FileStore
from tests.runtime.workflow import state_versions_flow as flow

HOLD = "c"
CHILD_TIMEOUT = 30.0
"""The child gives up on its own after this long (the parent kills it long before)."""


def emit(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


async def before_append(item: str) -> None:
    emit(f"X {item}")
    if item == HOLD:
        await anyio.sleep_forever()


async def main(store_dir: str, run_id: str) -> None:
    flow.define_writer(flow.NotesV1)
    flow.ON_APPEND = before_append
    with anyio.fail_after(CHILD_TIMEOUT):
        async with Runtime(store=FileStore(store_dir)) as runtime:
            emit("READY")
            await runtime.run(flow.NotesFlow, [["a", "b", HOLD]], run_id=run_id)


if __name__ == "__main__":
    _, folder, run, backend = sys.argv
    anyio.run(main, folder, run, backend=backend)
