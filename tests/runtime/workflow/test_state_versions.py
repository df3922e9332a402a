"""State versions: an agent's stored state is upgraded to its class's current version.

The case of issue 11: a run whose writer keeps ``NotesV1(text="a,b")`` stops
(paused, crashed or snapshotted); the code changes to ``Notes`` (version 2, a
list, with ``upgrade_state``) under the same registry name; the run goes on and
appends ``c``. Its result must be ``"a,b,c"``: the version-1 state upgraded,
never silently dropped (``"c"``). A state stored by a newer version than the
code, or an older one the class cannot upgrade, is an ``IncompatibleStateError``
naming the class and both versions. Every stored state carries its class's
version (``StateRef.version``).

The workflow and its writer versions live in ``state_versions_flow.py``;
``state_versions_child.py`` is the process killed with SIGKILL.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from typing import IO, TYPE_CHECKING, Any

import anyio
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream

from actorflow import Runtime
from actorflow.errors import IncompatibleStateError, RunFailedError, RunPaused
from actorflow.storage import (
    FileStore,
    MemoryStore,
    RunStatus,
    StateRef,
    StepRecord,
    Store,
    read_full_snapshot,
)
from tests.runtime.workflow import state_versions_flow as flow
from tests.runtime.workflow.crash_parent import ROOT, child_env
from tests.runtime.workflow.state_versions_flow import (
    PAUSE,
    WRITER_NAME,
    Notes,
    NotesFlow,
    NotesNoUpgrade,
    NotesV1,
)

if TYPE_CHECKING:
    from pathlib import Path

CHILD_DEADLINE = 60.0
"""Longest the SIGKILL test waits for its child, in seconds."""


@pytest.fixture(autouse=True)
def _no_hook() -> Any:
    """Every test starts without an ``ON_APPEND`` hook and leaves none behind."""
    flow.ON_APPEND = None
    yield
    flow.ON_APPEND = None


async def pause_with(store: Store, state: type[Any], run_id: str) -> None:
    """Run the flow with the writer of ``state`` until it pauses with notes ``a,b``."""
    flow.define_writer(state)
    async with Runtime(store=store) as runtime:
        with pytest.raises(RunPaused):
            await runtime.run(NotesFlow, [["a", "b", PAUSE]], run_id=run_id)
    assert (await store.read_run(run_id)).status is RunStatus.PAUSED


async def interrupt_at_c(store: Store, state: type[Any], run_id: str) -> None:
    """Run the flow with the writer of ``state``; stop the run while it appends ``c``.

    The records of ``a`` and ``b`` are in the log, the step of ``c`` is not: the
    run is left interrupted for ``recover()``.
    """
    flow.define_writer(state)
    reached_c = anyio.Event()

    async def hold_at_c(item: str) -> None:
        if item == "c":
            reached_c.set()
            await anyio.sleep_forever()

    flow.ON_APPEND = hold_at_c
    try:
        # Leaving the runtime cancelled (as Ctrl-C does) marks its live runs interrupted;
        # shutdown_timeout=0: the held writer is cancelled at once.
        with anyio.CancelScope() as stop:
            async with Runtime(store=store, shutdown_timeout=0) as runtime:
                await runtime.start(NotesFlow, [["a", "b", "c"]], run_id=run_id)
                await reached_c.wait()
                stop.cancel()
                await anyio.sleep_forever()
    finally:
        flow.ON_APPEND = None
    assert (await store.read_run(run_id)).status is RunStatus.INTERRUPTED


def check_incompatible(error: BaseException, *, stored: int, current: int, cls: str) -> None:
    """``error`` is (or is a failed run caused by) an IncompatibleStateError naming all three."""
    assert isinstance(error, IncompatibleStateError | RunFailedError), repr(error)
    found = error if isinstance(error, IncompatibleStateError) else error.__cause__
    if isinstance(found, IncompatibleStateError):
        assert (found.version, found.current) == (stored, current), str(found)
    else:  # a failed run read back from the store carries the error's type and message
        assert isinstance(error, RunFailedError)
        assert error.error_type == "IncompatibleStateError", str(error)
    message = str(found if found is not None else error)
    assert cls in message or "Writer" in message, f"the class is not named: {message}"
    assert f"version {stored}" in message, f"the stored version is not named: {message}"
    assert f"version {current}" in message, f"the current version is not named: {message}"


async def go_on(store: Store, run_id: str, how: str) -> BaseException:
    """Resume or recover the run with the code defined now; what its user is told.

    The run must not finish: the error it fails with (raised by ``resume``, or
    by the handle of the run ``recover()`` could not finish) is returned.
    """
    outcome: Any = None
    async with Runtime(store=store) as runtime:
        try:
            if how == "resume":
                outcome = await runtime.resume(run_id, "c")
            else:
                outcome = await runtime.recover()
                if run_id not in outcome:
                    outcome = await runtime.handle(run_id).result()
        except (IncompatibleStateError, RunFailedError) as exc:
            return exc
    raise AssertionError(f"the run went on with a state it cannot read: {outcome!r}")


# --- the state of issue 11: version 1 upgraded to version 2 -----------------------------


@pytest.mark.parametrize("kind", ["memory", "file"])
async def test_a_paused_run_resumed_by_new_code_upgrades_its_agents_state(
    kind: str, tmp_path: Path
) -> None:
    store: Store = MemoryStore() if kind == "memory" else FileStore(tmp_path / "store")
    try:
        await pause_with(store, NotesV1, "paused-v1")
        flow.define_writer(Notes)
        async with Runtime(store=store) as runtime:
            result = await runtime.resume("paused-v1", "c")
    finally:
        await store.aclose()
    assert result == "a,b,c", "the version-1 notes were dropped, not upgraded"


async def test_a_run_recovered_by_new_code_upgrades_its_agents_state() -> None:
    store = MemoryStore()
    await interrupt_at_c(store, NotesV1, "interrupted-v1")
    flow.define_writer(Notes)
    async with Runtime(store=store) as runtime:
        results = await runtime.recover()
    assert results == {"interrupted-v1": "a,b,c"}


def _stderr_file(path: Path) -> IO[bytes]:
    return path.open("ab")


async def test_a_run_killed_with_sigkill_is_recovered_by_new_code_with_its_state_upgraded(
    tmp_path: Path, anyio_backend: str
) -> None:
    """The version-1 child is killed while its writer works on ``c``; version 2 recovers."""
    store_dir = tmp_path / "store"
    command = [
        sys.executable,
        "-m",
        "tests.runtime.workflow.state_versions_child",
        str(store_dir),
        "killed",
        anyio_backend,
    ]
    seen: list[str] = []
    with _stderr_file(tmp_path / "child.stderr") as stderr, anyio.fail_after(CHILD_DEADLINE):
        process = await anyio.open_process(
            command, cwd=ROOT, env=child_env(), stdout=subprocess.PIPE, stderr=stderr
        )
        try:
            assert process.stdout is not None
            lines = BufferedByteReceiveStream(process.stdout)
            while "X c" not in seen:
                try:
                    seen.append((await lines.receive_until(b"\n", 65536)).decode())
                except anyio.EndOfStream:
                    break
        finally:
            process.kill()  # SIGKILL
            await process.wait()
            await process.aclose()
    errors = (tmp_path / "child.stderr").read_text(errors="replace")[-3000:]
    assert "X c" in seen, f"the child never reached c: {seen}; stderr:\n{errors}"
    assert process.returncode == -signal.SIGKILL
    flow.define_writer(Notes)
    store = FileStore(store_dir)
    try:
        assert (await store.read_run("killed")).status is RunStatus.RUNNING
        async with Runtime(store=store) as runtime:
            results = await runtime.recover()
        assert results == {"killed": "a,b,c"}
        assert (await store.read_run("killed")).status is RunStatus.COMPLETED
    finally:
        await store.aclose()


async def test_a_fork_from_a_checkpoint_taken_by_old_code_upgrades_its_agents_state() -> None:
    store = MemoryStore()
    flow.define_writer(NotesV1)
    async with Runtime(store=store) as runtime:
        assert await runtime.run(NotesFlow, [["a", "b"], ["c"]], run_id="source") == "a,b,c"
    # the end of the first phase: the writer holds NotesV1(text="a,b")
    first_end = None
    for info in await store.list_snapshots("source"):
        snapshot = await read_full_snapshot(store, "source", info.snapshot_id)
        if info.trigger == "phase_end" and len(snapshot.phases) == 1:
            first_end = info
            break
    assert first_end is not None, "the first phase's end was checkpointed"
    flow.define_writer(Notes)
    async with Runtime(store=store) as runtime:
        handle = await runtime.fork("source", first_end.snapshot_id, new_run_id="forked")
        result = await handle.result()
    assert result == "a,b,c", "the version-1 notes of the checkpoint were dropped"


# --- states the code cannot read --------------------------------------------------------


@pytest.mark.parametrize("how", ["resume", "recover"])
async def test_a_state_stored_by_a_newer_version_is_an_incompatible_state_error(
    how: str,
) -> None:
    store = MemoryStore()
    if how == "resume":
        await pause_with(store, Notes, "newer")
    else:
        await interrupt_at_c(store, Notes, "newer")
    flow.define_writer(NotesV1)  # the code went back to version 1
    appended: list[str] = []

    async def record(item: str) -> None:
        appended.append(item)

    flow.ON_APPEND = record
    error = await go_on(store, "newer", how)
    check_incompatible(error, stored=2, current=1, cls="NotesV1")
    assert appended == [], "the writer worked on a state it could not read"
    assert (await store.read_run("newer")).status is not RunStatus.COMPLETED


@pytest.mark.parametrize("how", ["resume", "recover"])
async def test_an_older_state_without_an_upgrade_is_an_incompatible_state_error(
    how: str,
) -> None:
    store = MemoryStore()
    if how == "resume":
        await pause_with(store, NotesV1, "older")
    else:
        await interrupt_at_c(store, NotesV1, "older")
    flow.define_writer(NotesNoUpgrade)  # version 2, and no upgrade_state
    error = await go_on(store, "older", how)
    check_incompatible(error, stored=1, current=2, cls="NotesNoUpgrade")
    assert (await store.read_run("older")).status is not RunStatus.COMPLETED


# --- every stored state carries its class's version -------------------------------------


async def stored_state_refs(store: Store, run_id: str) -> list[StateRef]:
    """Every state reference of the run: in its log records and in its snapshots."""
    refs = [
        r.state
        for r in await store.read_log(run_id)
        if isinstance(r, StepRecord) and r.state is not None
    ]
    for info in await store.list_snapshots(run_id):
        snapshot = await store.read_snapshot(run_id, info.snapshot_id)
        refs.extend(a.state for a in snapshot.agents.values() if a.state is not None)
    return refs


@pytest.mark.parametrize(("state", "version"), [(NotesV1, 1), (Notes, 2)])
async def test_every_stored_state_carries_its_class_version(
    state: type[Any], version: int, tmp_path: Path
) -> None:
    flow.define_writer(state)
    big = "x" * 5000  # over the inline limit: this state goes to a blob
    store = FileStore(tmp_path / "store")
    try:
        async with Runtime(store=store) as runtime:
            await runtime.run(NotesFlow, [["a"], [big]], run_id="versions")
        refs = await stored_state_refs(store, "versions")
    finally:
        await store.aclose()
    writer_refs = [r for r in refs if r.type == WRITER_NAME]
    assert any(r.data is not None for r in writer_refs), "an inline state was stored"
    assert any(r.data is None and r.blob for r in writer_refs), "a blob state was stored"
    wrong = [(r.agent, r.blob or "inline", r.version) for r in writer_refs if r.version != version]
    assert not wrong, f"states of a version-{version} class stored as: {wrong}"
