"""SqliteStore across real processes: SIGKILL mid-commit, claims raced, posts that wake.

A child killed at a random moment (most often inside a commit: it commits
all the time) leaves everything it reported durable in the file, every
record once at its place, every post once, and its claim gone with it. Of
several processes claiming one run at the same moment, exactly one wins. A
post from another process wakes a watcher at once (no polling).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import pytest

from actorflow.storage import RunManifest, SqliteStore
from actorflow.storage._inbox_watch import PollingWatch
from tests import forkserver
from tests.lines import Lines
from tests.storage.file.crash_child import RUN, blob_data, record

KILLS = 15
ROOT = Path(__file__).resolve().parents[3]
CHILD = "tests.storage.sqlite.crash_child"


@dataclass
class Reported:
    length: int = 0
    snapshots: set[str] = field(default_factory=set)
    blobs: set[str] = field(default_factory=set)
    posts: set[str] = field(default_factory=set)


def run_child_until_killed(path: Path, backend: str, lines: int, seen: Reported) -> None:
    child = forkserver.popen(
        [sys.executable, "-m", CHILD, str(path), backend, "write"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert child.stdout is not None
        said = Lines(child.stdout)
        for _ in range(lines):
            line = said.next(30)
            assert line, f"the child died: {child.stderr.read().decode() if child.stderr else ''}"
            kind, value = line.split()
            if kind == "L":
                seen.length = max(seen.length, int(value))
            elif kind == "S":
                seen.snapshots.add(value)
            elif kind == "P":
                seen.posts.add(value)
            else:
                seen.blobs.add(value)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
        for stream in (child.stdout, child.stderr):
            if stream is not None:
                stream.close()
    assert child.returncode == -signal.SIGKILL


async def check(path: Path, seen: Reported) -> None:
    store = SqliteStore(path)
    try:
        lease = await store.claim(RUN, "checker")  # the dead child's flock went with it
        log = await store.read_log(RUN)
        assert len(log) >= seen.length
        assert log == [record(position) for position in range(len(log))]  # each once, in place
        listed = {s.snapshot_id for s in await store.list_snapshots(RUN)}
        assert seen.snapshots <= listed
        for sid in listed:
            snap = await store.read_snapshot(RUN, sid)
            state = snap.agents["a"].state
            assert state is not None
            assert await store.get_blob(RUN, state.blob) == blob_data(snap.position)
        for ref in seen.blobs:
            assert await store.has_blob(RUN, ref)
        entries = await store.read_inbox(RUN)
        ids = [e.entry_id for e in entries]
        assert len(ids) == len(set(ids))  # no post stored twice
        assert [e.seq for e in entries] == list(range(len(entries)))
        assert seen.posts <= set(ids)
        check_sealed = await store.check_sealed(RUN)
        assert check_sealed.problems == []
        await store.release(lease)
    finally:
        await store.aclose()


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_sigkill_mid_commit_loses_nothing_reported_and_records_nothing_twice(
    tmp_path: Path, anyio_backend: str
) -> None:
    seed = int.from_bytes(os.urandom(4), "big")
    print(f"crash test seed: {seed}")
    rng = random.Random(seed)
    seen = Reported()
    path = tmp_path / "store.db"
    for _ in range(KILLS):
        run_child_until_killed(path, anyio_backend, rng.randint(1, 12), seen)
        anyio.run(check, path, seen, backend=anyio_backend)
    assert seen.length > KILLS  # the children made progress across the kills


@pytest.mark.timeout(60)
def test_of_processes_claiming_one_run_at_once_exactly_one_wins(
    tmp_path: Path, anyio_backend: str
) -> None:
    path = tmp_path / "store.db"

    async def create() -> None:
        async with SqliteStore(path) as store:
            await store.create_run(RunManifest(run_id=RUN, workflow="w", input=b"", input_hash=""))

    anyio.run(create, backend=anyio_backend)
    children = [
        forkserver.popen(
            [sys.executable, "-m", CHILD, str(path), anyio_backend, "claim", f"owner-{n}"],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for n in range(4)
    ]
    said = [Lines(child.stdout) for child in children if child.stdout is not None]
    try:
        assert _lines(said) == [["READY"]] * len(children)
        for child in children:
            assert child.stdin is not None
            child.stdin.write(b"go\n")
            child.stdin.flush()
        outcomes = _lines(said)
    finally:
        for child in children:
            assert child.stdin is not None
            child.stdin.close()
            child.wait(timeout=30)
            for stream in (child.stdout, child.stderr):
                if stream is not None:
                    stream.close()
    assert sorted(o[0] for o in outcomes) == ["LOST", "LOST", "LOST", "WON"]
    assert [o for o in outcomes if o[0] == "WON"] == [["WON", "1"]]


def _lines(children: list[Lines]) -> list[list[str]]:
    """The next line of each child, split (within 30 s each)."""
    lines = []
    for said in children:
        line = said.next(30)
        assert line is not None, "a child ended without a line"
        lines.append(line.split())
    return lines


async def test_a_post_from_another_process_wakes_the_watcher(
    tmp_path: Path, anyio_backend: str
) -> None:
    path = tmp_path / "store.db"
    async with SqliteStore(path) as store:
        await store.create_run(RunManifest(run_id=RUN, workflow="w", input=b"", input_hash=""))
        async with store.watch_inbox(RUN) as watch:
            assert not isinstance(watch, PollingWatch)  # a FIFO: woken, never polling
            with anyio.fail_after(60):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(watch.changed)  # waits; the group ends when it returns
                    command = [sys.executable, "-m", CHILD, str(path), anyio_backend]
                    await anyio.run_process([*command, "post", "afar"], cwd=ROOT)
        assert [e.entry_id for e in await store.read_inbox(RUN)] == ["afar"]
