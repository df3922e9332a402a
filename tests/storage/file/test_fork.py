"""A run's owner forks a child, then dies: the child must not keep the run's lock.

A flock belongs to the open file description, which ``fork()`` shares with the
child; a child that kept its copy (``multiprocessing`` forks by default on
Linux) would make a dead owner look alive for as long as it lived. Real
processes: the owner is SIGKILLed while its forked child still runs.
"""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
from pathlib import Path

from actorflow.storage import FileStore, RunManifest
from actorflow.storage.file import OSFileSystem
from tests.lines import Lines

ROOT = Path(__file__).resolve().parents[3]
RUN = "forked-owner"


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def start_owner(folder: Path) -> tuple[subprocess.Popen[bytes], list[str]]:
    """The owner, once it holds the run and its child is alive; and what they said."""
    owner = subprocess.Popen(
        [sys.executable, "-m", "tests.storage.file.fork_owner", str(folder), RUN],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert owner.stdout is not None
    said: list[str] = []
    lines = Lines(owner.stdout)
    while not (said and said[-1].startswith("ready ")):
        try:
            line = lines.next(60)
        except TimeoutError:
            line = None
        if line is None:
            owner.kill()
            _, err = owner.communicate(timeout=30)
            raise AssertionError(f"the owner never got ready (said {said}): {err.decode()}")
        said.append(line.strip())
    return owner, said


async def test_a_forked_child_of_a_killed_owner_does_not_keep_its_run(tmp_path: Path) -> None:
    folder = tmp_path / "store"
    async with FileStore(folder) as store:
        await store.create_run(RunManifest(run_id=RUN, workflow="wf", input=b"", input_hash="h"))
    owner, said = start_owner(folder)
    child = int(said[-1].split()[1])
    try:
        assert said[0] == "child lost", "the child's store believes it owns the run"
        async with FileStore(folder) as store:
            assert await store.is_owned(RUN)
            owner.send_signal(signal.SIGKILL)
            assert owner.wait(timeout=30) == -signal.SIGKILL
            assert alive(child)
            assert not await store.is_owned(RUN), "the child holds the dead owner's lock"
            await store.claim(RUN, "survivor")
            manifest_lock = store.fs.try_lock(str(folder / "runs" / RUN / "manifest.lock"))
            assert manifest_lock is not None, "the child holds a manifest lock"
            store.fs.unlock(manifest_lock)
            assert alive(child)
    finally:
        owner.kill()
        owner.wait(timeout=30)
        for stream in (owner.stdin, owner.stdout, owner.stderr):
            if stream is not None:
                stream.close()  # stdin's end is the child's signal to exit
        if alive(child):
            os.kill(child, signal.SIGKILL)


def test_lock_descriptors_close_on_exec(tmp_path: Path) -> None:
    fs = OSFileSystem()
    handle = fs.lock(str(tmp_path / "lock"))
    try:
        assert fcntl.fcntl(handle, fcntl.F_GETFD) & fcntl.FD_CLOEXEC
    finally:
        fs.unlock(handle)
