"""Leaving ``async with Runtime()`` is bounded, and a run it stops is interrupted, never failed.

Whatever is queued (snapshots waiting for the checkpoint actor, a final
snapshot waiting behind them, agents still busy), leaving the block by an
error, a cancellation, Ctrl-C or SIGTERM stops every live run within
``shutdown_timeout`` (plus the store's own I/O); each is stored
``interrupted`` (or ``completed``, if it got there first), and ``recover()``
finishes them all.
"""

from __future__ import annotations

import os
import random
import select
import signal
import subprocess
import sys
import time
from typing import TYPE_CHECKING, Any

import anyio
import pytest

from actorflow import Orchestrator, RunContext, Runtime, RuntimeConfig
from actorflow.errors import RunFailedError
from actorflow.storage import FileStore, MemoryStore, RunStatus
from tests import forkserver
from tests.runtime.workflow import interrupt_child
from tests.runtime.workflow.crash_parent import ROOT, child_env
from tests.runtime.workflow.interrupt_child import RUNS, STEPS, BigStates, run_ids

if TYPE_CHECKING:
    from pathlib import Path

    from actorflow.storage import Snapshot, SnapshotInfo

EVERY_STEP = RuntimeConfig.from_env({"ACTORFLOW_CHECKPOINT_EVERY_STEPS": "1"})
CHILD_DEADLINE = 60.0
"""Longest a child may take to report, and to exit once signalled, in seconds."""

FINISHED = {str(RunStatus.INTERRUPTED), str(RunStatus.COMPLETED)}
TOTAL = 3 * STEPS * interrupt_child.STATE_BYTES
"""What a ``BigStates`` run returns."""


class GatedSnapshots(MemoryStore):
    """Snapshots of the runs in ``hold`` are never written: their writes wait forever."""

    def __init__(self, hold: set[str]) -> None:
        super().__init__()
        self.hold = hold
        self.blocked = anyio.Event()

    async def write_snapshot(self, snapshot: Snapshot, *, update: Any = None) -> SnapshotInfo:
        if snapshot.run_id in self.hold:
            self.blocked.set()
            await anyio.sleep_forever()
        return await super().write_snapshot(snapshot, update=update)


class Stuck(Orchestrator):
    """Asks for a snapshot, then never ends."""

    __actorflow_name__ = "tests.shutdown.Stuck"

    async def run(self, ctx: RunContext, _: None) -> None:
        await ctx.now()
        ctx.checkpoint("stuck")
        await anyio.sleep_forever()


class FailsLate(Orchestrator):
    """Asks for a snapshot, then fails, while the checkpoint actor is stuck on another run's."""

    __actorflow_name__ = "tests.shutdown.FailsLate"

    async def run(self, ctx: RunContext, _: None) -> None:
        await ctx.now()
        ctx.checkpoint("before failing")
        raise ValueError("failed on its own")


async def statuses(store: MemoryStore) -> dict[str, RunStatus]:
    return {m.run_id: m.status for m in await store.list_runs()}


async def _fail_while_the_checkpoint_actor_is_stuck(store: GatedSnapshots) -> None:
    async with Runtime(store=store, shutdown_timeout=0.2) as runtime:
        await runtime.start(Stuck, None, run_id="stuck")
        await store.blocked.wait()
        late = await runtime.start(FailsLate, None, run_id="late")
        with anyio.fail_after(10), pytest.raises(RunFailedError, match="ValueError"):
            # it used to wait behind the stuck snapshot for its final one
            await late.result()
        raise KeyError("the body failed")


@pytest.mark.timeout(60)
async def test_a_run_ends_without_waiting_for_a_stuck_checkpoint_actor() -> None:
    # "stuck"'s snapshot write holds the checkpoint actor for good; "late"
    # fails meanwhile, writes its own final snapshot and ends; then the body
    # raises, and leaving the block with the actor still stuck does not hang
    store = GatedSnapshots(hold={"stuck"})
    with pytest.raises(KeyError, match="the body failed"):
        await _fail_while_the_checkpoint_actor_is_stuck(store)
    assert await statuses(store) == {"stuck": RunStatus.INTERRUPTED, "late": RunStatus.FAILED}
    manifest = await store.read_run("late")
    assert manifest.error is not None
    assert manifest.error.type == "ValueError"


async def _interrupted_mid_run(leave: str) -> MemoryStore:
    """Start RUNS big runs, leave the block (``leave``) once some steps ran; the store."""
    store = MemoryStore()
    steps_seen = 0
    enough = anyio.Event()

    def step_done(_: str) -> None:
        nonlocal steps_seen
        steps_seen += 1
        if steps_seen == RUNS:
            enough.set()

    interrupt_child.ON_STEP = step_done
    try:
        with anyio.CancelScope() as outer:
            async with Runtime(store=store, config=EVERY_STEP, shutdown_timeout=0.5) as runtime:
                for rid in run_ids():
                    await runtime.start(BigStates, rid, run_id=rid)
                await enough.wait()
                if leave == "error":
                    raise KeyError("the body failed")
                if leave == "cancel":
                    outer.cancel()
                    await anyio.sleep_forever()
    except KeyError:
        assert leave == "error"
    finally:
        interrupt_child.ON_STEP = None
    return store


@pytest.mark.timeout(120)
@pytest.mark.parametrize("leave", ["error", "cancel", "return"])
async def test_leaving_the_block_mid_run_interrupts_every_run_and_recover_finishes_them(
    leave: str,
) -> None:
    store = await _interrupted_mid_run(leave)
    found = await statuses(store)
    assert set(found) == set(run_ids())
    assert {str(s) for s in found.values()} <= FINISHED, found
    async with Runtime(store=store) as runtime:
        await runtime.recover()
        for rid in run_ids():
            assert await runtime.result(rid) == TOTAL


# --- a real process, signalled mid-run ------------------------------------


def _start_child(store: Path, backend: str, mode: str) -> forkserver.Child:
    env = child_env(ACTORFLOW_CHECKPOINT_EVERY_STEPS="1")
    errors = store.parent / f"{store.name}.{mode}.stderr"
    with errors.open("ab") as stderr:
        return forkserver.popen(
            [
                sys.executable,
                "-m",
                "tests.runtime.workflow.interrupt_child",
                str(store),
                backend,
                mode,
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=stderr,
        )


def _read_until(child: forkserver.Child, steps: int) -> None:
    """Read the child's lines until it started its runs and reported ``steps`` steps."""
    assert child.stdout is not None
    fd = child.stdout.fileno()
    deadline = time.monotonic() + CHILD_DEADLINE
    buffer, started, seen = b"", False, 0
    while not (started and seen >= steps):
        left = deadline - time.monotonic()
        assert left > 0, f"the child reported {seen} steps in {CHILD_DEADLINE} s"
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            continue
        chunk = os.read(fd, 65536)
        assert chunk, "the child ended before it was signalled"
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        started = started or b"STARTED" in lines
        seen += sum(line.startswith(b"P ") for line in lines)


def _wait(child: forkserver.Child) -> int:
    try:
        return child.wait(timeout=CHILD_DEADLINE)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()
        raise AssertionError(
            f"the child did not exit {CHILD_DEADLINE} s after its signal"
        ) from None
    finally:
        assert child.stdout is not None
        child.stdout.close()


async def _stored(store: Path) -> dict[str, str]:
    files = FileStore(store)
    try:
        return {m.run_id: str(m.status) for m in await files.list_runs()}
    finally:
        await files.aclose()


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_signalled_process_exits_in_time_with_every_run_interrupted_or_completed(
    tmp_path: Path, backend: str, signum: signal.Signals
) -> None:
    seed = int(os.environ.get("INTERRUPT_TEST_SEED") or int.from_bytes(os.urandom(4), "big"))
    print(f"interrupt test seed: {seed} (INTERRUPT_TEST_SEED={seed} replays it)")
    # signalled after 1 to most of the steps of all runs, while snapshots queue up
    steps = random.Random(seed).randint(1, RUNS * 3 * STEPS * 2 // 3)
    store = tmp_path / "store"
    child = _start_child(store, backend, "start")
    try:
        _read_until(child, steps)
    except BaseException:
        child.kill()
        _wait(child)
        raise
    child.send_signal(signum)
    _wait(child)
    found = anyio.run(_stored, store)
    assert set(found) == set(run_ids())
    assert set(found.values()) <= FINISHED, found
    recovering = _start_child(store, backend, "recover")
    assert _wait(recovering) == 0, (store.parent / "store.recover.stderr").read_text()[-3000:]
    assert set(anyio.run(_stored, store).values()) == {str(RunStatus.COMPLETED)}
