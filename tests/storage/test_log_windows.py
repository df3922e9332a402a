"""Log windows: a snapshot names settled entries its run's log holds instead of copying them.

What a window stands for (the settled entries of its records, exactly what a
run's view journals), reading it back, damage (a pruned, short or different
log) as a damaged snapshot, retention keeping the records kept snapshots'
windows name, and runs whose snapshots name windows on every store kind.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec
import pytest
import structlog.testing

from actorflow import Runtime, _log
from actorflow.errors import CorruptedDataError, NewerFormatError
from actorflow.runtime.workflow._replay import RunView, load_view
from actorflow.storage import (
    FORMAT_VERSION,
    ChunkRef,
    DecisionRecord,
    EventRecord,
    FileStore,
    LogWindow,
    MemoryStore,
    PhaseEndRecord,
    RetentionPolicy,
    RunManifest,
    Snapshot,
    StepRecord,
    logged_entries,
    read_full_snapshot,
    read_window,
    settled_entries,
)
from actorflow.testing import crash_and_recover, run_in_memory
from tests.runtime.workflow.test_long_runs import Long
from tests.runtime.workflow.workflows import Lead

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from actorflow.storage import LogRecord

RUN = "win"


def snapshot_at(position: int, window: LogWindow | None, **fields: object) -> Snapshot:
    return Snapshot(
        run_id=RUN,
        snapshot_id=f"{position:04d}-p{position}",
        position=position,
        created=float(position),
        trigger="phase_end",
        window=window,
        **fields,  # type: ignore[arg-type]
    )


def records() -> list[LogRecord]:
    """A log with every kind of record, settled and not."""
    return [
        StepRecord(step_id="unit.0/ask.0", kind="ask", target="a", args_hash="h"),  # inside
        PhaseEndRecord(phase_id="unit.0", name="unit", result=b"0"),
        StepRecord(step_id="ask.1", kind="ask", target="a", args_hash="h"),  # top level
        DecisionRecord(step_id="unit.1/decide.0", agent="o", type="go"),  # always
        EventRecord(kind="note", step_id="unit.1/e"),  # inside
        EventRecord(kind="note", step_id="e.2"),  # top level
        PhaseEndRecord(phase_id="unit.1@1", name="unit", result=b"1"),  # a retry's: inside
    ]


async def new_store(tmp_path: Path) -> FileStore:
    store = FileStore(tmp_path)
    await store.create_run(RunManifest(run_id=RUN, workflow="W", input=b"\xc0", input_hash="h"))
    return store


def test_a_window_stands_for_what_the_run_journals_of_its_records() -> None:
    log = records()
    view = RunView(RUN)
    for record in log:
        view.apply(record)
    journaled = [
        (at, e)
        for e, at in zip(view.journal, view.journal_at, strict=True)
        if not isinstance(e, int)
    ]
    assert logged_entries(log, 0) == journaled
    assert [p for p, _ in logged_entries(log, 10)] == [11, 12, 13, 15]


async def test_a_snapshot_reads_back_whole_from_its_window(tmp_path: Path) -> None:
    store = await new_store(tmp_path)
    await store.append(RUN, records())
    await store.write_snapshot(snapshot_at(7, LogWindow(start=1, entries=4), inbox_taken=(3,)))
    whole = await read_full_snapshot(store, RUN, "0007-p7")
    assert whole.window is None
    assert list(whole.phases) == ["unit.0"]
    assert [s.step_id for s in whole.steps] == ["ask.1"]
    assert [d.type for d in whole.decisions] == ["go"]
    assert [e.step_id for e in whole.events] == ["e.2"]
    assert whole.inbox_taken == (3,)


@pytest.mark.parametrize(
    ("window", "position", "damage"),
    [
        (LogWindow(start=1, entries=3), 7, "does not hold the entries"),  # a different log
        (LogWindow(start=1, entries=4), 9, "ends before"),  # a log cut short
        (LogWindow(start=7, entries=0), 7, "not in the log before"),  # hostile values
        (LogWindow(start=-1, entries=4), 7, "not in the log before"),
        (LogWindow(start=1, entries=-4), 7, "not in the log before"),
    ],
)
async def test_a_window_the_log_does_not_match_is_a_damaged_snapshot(
    tmp_path: Path, window: LogWindow, position: int, damage: str
) -> None:
    store = await new_store(tmp_path)
    await store.append(RUN, records())
    await store.write_snapshot(snapshot_at(position, window))
    with pytest.raises(CorruptedDataError, match=damage):
        await read_full_snapshot(store, RUN, f"{position:04d}-p{position}")


async def test_a_window_whose_records_were_pruned_is_a_damaged_snapshot(tmp_path: Path) -> None:
    store = MemoryStore()
    await store.create_run(RunManifest(run_id=RUN, workflow="W", input=b"\xc0", input_hash="h"))
    await store.append(RUN, records())
    await store.truncate_log_before(RUN, 3)
    snapshot = snapshot_at(7, LogWindow(start=1, entries=4))
    with pytest.raises(CorruptedDataError, match="pruned"):
        await read_window(store, snapshot)


async def test_a_snapshot_failing_after_its_window_was_read_leaves_the_log_to_the_older_one(
    tmp_path: Path,
) -> None:
    """The newest names a window (read first, with the log after it) and a lost chunk: the
    one before it serves, with the log read from its own position, not the newest's."""
    store = await new_store(tmp_path)
    log = records()
    await store.append(RUN, log)
    older = snapshot_at(1, None, steps=(log[0],))
    await store.write_snapshot(older)
    lost = ChunkRef("0" * 64, 1, 1)
    await store.write_snapshot(snapshot_at(7, LogWindow(start=1, entries=4), history=lost))
    events: list[str] = []
    view, replayed = await load_view(store, RUN, lambda event, **_: events.append(event))
    assert events == ["checkpoint_corrupted", "checkpoint_restored"]
    assert (view.position, replayed) == (7, 6)
    assert list(view.phases) == ["unit.0", "unit.1@1"]


async def test_retention_keeps_the_records_kept_windows_name(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    async with Runtime(store=store) as runtime:
        await runtime.run(Long, 14, run_id="long")
    infos = await store.list_snapshots("long")
    newest = await store.read_snapshot("long", infos[-1].snapshot_id)
    assert newest.window is not None
    assert newest.window.start < newest.position
    before = await read_full_snapshot(store, "long", infos[-1].snapshot_id)
    report = await store.prune(RetentionPolicy(keep_last=1, keep_phase_ends=False))
    assert report.snapshots_deleted == len(infos) - 1
    # the log below the window went; the window's records stayed
    assert report.log_records_deleted == newest.window.start
    assert await read_full_snapshot(store, "long", infos[-1].snapshot_id) == before


@pytest.fixture
def info_events() -> Iterator[None]:
    """actorflow's info events logged (``checkpoint_restored`` names the snapshot used)."""
    previous = _log.level()
    _log.configure_logging("info")
    try:
        yield
    finally:
        _log.configure_logging(previous)


@pytest.mark.usefixtures("info_events")
@pytest.mark.parametrize("kind", ["memory", "file"])
async def test_runs_recover_from_snapshots_naming_windows(kind: str, tmp_path: Path) -> None:
    """With the default bounds: crashes at every point, each recovery checked."""
    expected = await run_in_memory(Lead, "a;b;c", run_id="lead")
    crash_after, windowed = 1, 0
    while True:
        store = MemoryStore() if kind == "memory" else FileStore(tmp_path / str(crash_after))
        with structlog.testing.capture_logs() as logs:
            outcome = await crash_and_recover(
                Lead, "a;b;c", crash_after=crash_after, store=store, run_id="lead"
            )
        if not outcome.crashed:
            break
        assert outcome.recovered == expected, f"crash after {crash_after} records"
        assert not [e for e in logs if e["event"] == "checkpoint_corrupted"]
        for event in logs:
            if event["event"] == "checkpoint_restored":
                stored = await store.read_snapshot("lead", event["snapshot_id"])
                windowed += stored.window is not None
        crash_after += 1
    assert windowed, "no recovery started from a snapshot naming a window"


async def test_a_snapshot_from_before_windows_still_carries_its_entries_inline() -> None:
    old = snapshot_at(
        3, None, phases={"unit.0": PhaseEndRecord(phase_id="unit.0", name="unit", result=b"0")}
    )
    assert [type(e).__name__ for e in settled_entries(old)] == ["PhaseEndRecord"]
    assert await read_window(MemoryStore(), old) == []


def newer(snapshot: Snapshot) -> Snapshot:
    return msgspec.structs.replace(snapshot, format_version=FORMAT_VERSION + 1)


async def test_a_snapshot_of_a_newer_format_is_refused_by_name_not_read_as_far_as_it_goes(
    tmp_path: Path,
) -> None:
    """A format this code would misread (a field it lacks may hold part of the run)."""
    store = await new_store(tmp_path)
    await store.append(RUN, records())
    await store.write_snapshot(newer(snapshot_at(7, LogWindow(start=1, entries=4))))
    with pytest.raises(NewerFormatError, match=f"snapshot format {FORMAT_VERSION + 1}"):
        await store.read_snapshot(RUN, "0007-p7")


async def test_recovery_leaves_a_run_with_a_newer_snapshot_for_a_newer_actorflow(
    tmp_path: Path,
) -> None:
    """Not the older snapshot and a replay: the newer one may hold what the older lacks."""
    store = await new_store(tmp_path)
    await store.append(RUN, records())
    await store.write_snapshot(snapshot_at(1, None))
    await store.write_snapshot(newer(snapshot_at(7, LogWindow(start=1, entries=4))))
    with pytest.raises(NewerFormatError):
        await load_view(store, RUN, lambda event, **_: None)


async def test_retention_leaves_a_run_with_a_newer_snapshot_as_it_is(tmp_path: Path) -> None:
    store = await new_store(tmp_path)
    await store.append(RUN, records())
    for position in (1, 2, 3):
        await store.write_snapshot(snapshot_at(position, None))
    await store.write_snapshot(newer(snapshot_at(7, LogWindow(start=1, entries=4))))
    with structlog.testing.capture_logs() as logs:
        report = await store.prune(RetentionPolicy(keep_last=1, keep_phase_ends=False))
    assert (report.snapshots_deleted, report.log_records_deleted) == (0, 0)
    assert len(await store.list_snapshots(RUN)) == 4
    assert len(await store.read_log(RUN)) == len(records())
    assert [e["event"] for e in logs if e["event"] == "run_not_pruned"] == ["run_not_pruned"]
