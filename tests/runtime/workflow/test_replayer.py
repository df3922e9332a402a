"""The replayer: stored runs checked against the code now imported, without running agents."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Literal

import msgspec
import pytest

from actorflow import Orchestrator, Request, RunContext, Runtime, Specialist, handler, phase
from actorflow.errors import (
    HistoryFileCorruptedError,
    HistoryFileNewerError,
    HistoryFileTruncatedError,
    NonDeterminismError,
    RunFailedError,
)
from actorflow.runtime.replaying import (
    FORMAT_VERSION,
    HistoryFile,
    read_history_file,
    read_run_history,
    redact,
    replay_history,
    replay_run,
    write_history_file,
)
from actorflow.storage import MemoryStore
from actorflow.testing import replay
from tests.runtime.workflow.test_runs import crash_then

if TYPE_CHECKING:
    from pathlib import Path


class Note(Request[int], frozen=True):
    text: str


class Notes(msgspec.Struct):
    items: list[str] = []


class Counted(Specialist):
    __actorflow_name__ = "tests.replayer.Counted"
    state: Notes
    started = 0

    async def on_start(self) -> None:
        Counted.started += 1

    @handler
    async def write(self, note: Note) -> int:
        self.state.items.append(note.text)
        return len(self.state.items)


def define_flow(version: int) -> type[Orchestrator]:
    class ReplayedFlow(Orchestrator):
        @phase
        async def intro(self, ctx: RunContext, text: str) -> int:
            scribe = await ctx.spawn(Counted, name="scribe")
            n: int = await ctx.ask(scribe, Note(text))
            return n

        async def run(self, ctx: RunContext, _: None) -> list[int]:
            scribe = await ctx.spawn(Counted, name="scribe")
            out = [await self.intro(ctx, "intro")]
            out.append(await ctx.ask(scribe, Note("one")))
            if version == 2:
                out.append(await ctx.ask(scribe, Note("inserted")))
            if version == 3 and ctx.patched("insert-note"):
                out.append(await ctx.ask(scribe, Note("inserted")))
            out.append(await ctx.ask(scribe, Note("two")))
            out.append(await ctx.ask(scribe, Note("three")))
            return out

    return ReplayedFlow


async def test_a_finished_run_replays_ok_without_starting_its_agents() -> None:
    store = MemoryStore()
    flow = define_flow(1)
    async with Runtime(store=store) as runtime:
        await runtime.run(flow, None, run_id="done")
    before = Counted.started
    report = await replay_run(store, "done", flow)
    assert report.ok, report.describe()
    assert report.finished
    assert report.stopped_at is None
    assert Counted.started == before


async def test_a_change_that_breaks_determinism_is_the_first_divergence() -> None:
    store = MemoryStore()
    async with Runtime(store=store) as runtime:
        await runtime.run(define_flow(1), None, run_id="old")
    report = await replay_run(store, "old", define_flow(2))
    assert not report.ok
    d = report.divergence
    assert d is not None
    assert d.step_id == "2"
    assert "ask scribe" in d.recorded
    assert "test_replayer.py" in d.where
    assert "DIVERGED" in report.describe()


async def test_patched_replays_old_histories_and_new_ones() -> None:
    store = MemoryStore()
    async with Runtime(store=store) as runtime:
        await runtime.run(define_flow(1), None, run_id="old")
        await runtime.run(define_flow(3), None, run_id="new")
    assert (await replay_run(store, "old", define_flow(3))).ok
    assert (await replay_run(store, "new", define_flow(3))).ok
    # the new history, replayed by the code from before the patch, diverges
    assert not (await replay_run(store, "new", define_flow(1))).ok


async def test_a_crashed_run_replays_ok_up_to_its_end() -> None:
    store = MemoryStore()
    await crash_then(store, define_flow(1), None, "half", after=4)
    before = Counted.started
    report = await replay_run(store, "half", define_flow(1))
    assert report.ok, report.describe()
    assert not report.finished
    assert report.stopped_at is not None
    assert "recovery would go on live" in report.describe()
    assert Counted.started == before


async def test_a_history_replays_the_same_as_its_store() -> None:
    store = MemoryStore()
    async with Runtime(store=store) as runtime:
        await runtime.run(define_flow(1), None, run_id="old")
    history = await read_run_history(store, "old")
    assert (await replay_history(history, define_flow(1))).ok
    assert not (await replay_history(history, define_flow(2))).ok


async def test_code_from_before_a_patch_replaying_a_patched_run_is_a_divergence() -> None:
    store = MemoryStore()
    async with Runtime(store=store) as runtime:
        await runtime.run(define_flow(3), None, run_id="new")
    report = await replay_run(store, "new", define_flow(1))
    d = report.divergence
    assert d is not None
    assert d.step_id == "2"
    assert "ctx.patched('insert-note')" in d.recorded
    assert "test_replayer.py" in d.where


async def test_recovering_a_patched_run_with_code_from_before_the_patch_blocks_it() -> None:
    # rolling a deploy back: the old code must not take the marker's place
    store = MemoryStore()
    await crash_then(store, define_flow(3), None, "rolled-back", after=6)
    define_flow(1)  # what the registry gives recovery now
    async with Runtime(store=store) as runtime:
        assert await runtime.recover() == {}
        with pytest.raises(RunFailedError) as info:
            await runtime.handle("rolled-back").result()
    assert isinstance(info.value.__cause__, NonDeterminismError)
    assert "ctx.patched('insert-note')" in str(info.value.__cause__)


# --- exported histories ----------------------------------------------------------------


async def exported(
    tmp_path: Path, run_id: str, *, version: int = 1, redacted: bool = False
) -> Path:
    store = MemoryStore()
    async with Runtime(store=store) as runtime:
        await runtime.run(define_flow(version), None, run_id=run_id)
    history = await read_run_history(store, run_id)
    path = tmp_path / f"{run_id}.afh"
    write_history_file(redact(history) if redacted else history, path)
    return path


async def test_testing_replay_checks_an_exported_history(tmp_path: Path) -> None:
    path = await exported(tmp_path, "prod-1")
    assert (await replay(path, define_flow(1))).ok
    assert (await replay(path, define_flow(3))).ok  # the change behind ctx.patched
    report = await replay(path, define_flow(2))
    assert not report.ok
    assert report.divergence is not None
    assert report.divergence.step_id == "2"


async def test_testing_replay_takes_a_store_and_a_run_id() -> None:
    store = MemoryStore()
    async with Runtime(store=store) as runtime:
        await runtime.run(define_flow(1), None, run_id="kept")
    assert (await replay(store, define_flow(1), run_id="kept")).ok
    with pytest.raises(ValueError, match="run_id"):
        await replay(store, define_flow(1))


async def test_a_redacted_history_still_checks_kinds_targets_and_hashes(tmp_path: Path) -> None:
    path = await exported(tmp_path, "secret", redacted=True)
    plain = await exported(tmp_path, "plain")
    assert b"three" in plain.read_bytes()  # the agent's state holds the messages' texts
    assert b"three" not in path.read_bytes()
    ok = await replay(path, define_flow(1))
    assert ok.ok, ok.describe()
    assert ok.redacted
    report = await replay(path, define_flow(2))
    assert not report.ok  # the hashes still tell another message


async def test_bad_history_files_are_named_errors(tmp_path: Path) -> None:
    path = await exported(tmp_path, "fine")
    data = path.read_bytes()
    cut = tmp_path / "cut.afh"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(HistoryFileTruncatedError, match="copy it again"):
        read_history_file(cut)
    flipped = bytearray(data)
    flipped[-5] ^= 0xFF
    bad = tmp_path / "bad.afh"
    bad.write_bytes(bytes(flipped))
    with pytest.raises(HistoryFileCorruptedError, match="checksum"):
        read_history_file(bad)
    other = tmp_path / "other.afh"
    other.write_bytes(b"not msgpack at all \xc1")
    with pytest.raises(HistoryFileCorruptedError):
        read_history_file(other)
    outer = msgspec.msgpack.decode(data, type=HistoryFile)
    newer = tmp_path / "newer.afh"
    newer.write_bytes(
        msgspec.msgpack.encode(
            msgspec.structs.replace(outer, version=FORMAT_VERSION + 1, actorflow="9.0")
        )
    )
    with pytest.raises(HistoryFileNewerError, match="upgrade actorflow") as info:
        read_history_file(newer)
    assert info.value.written_by == "9.0"


# --- every kind of step --------------------------------------------------------------


class Big(msgspec.Struct):
    text: str = ""


class Hoarder(Specialist):
    __actorflow_name__ = "tests.replayer.Hoarder"
    state: Big

    @handler
    async def grow(self, note: Note) -> int:
        self.state.text += note.text * 5000  # a state stored as a blob
        return len(self.state.text)


class Approve(msgspec.Struct, frozen=True):
    __actorflow_name__ = "tests.replayer.Approve"
    by: str


class ReplayedChild(Orchestrator):
    __actorflow_name__ = "tests.replayer.ReplayedChild"

    async def run(self, ctx: RunContext, n: int) -> int:
        return n * 2


class Everything(Orchestrator):
    __actorflow_name__ = "tests.replayer.Everything"

    async def run(self, ctx: RunContext, _: None) -> list[object]:
        scribe = await ctx.spawn(Counted, name="scribe")
        hoarder = await ctx.spawn(Hoarder, name="hoarder")
        asked = await ctx.gather(ctx.ask(scribe, Note("a")), ctx.ask(hoarder, Note("b")))
        await ctx.send(scribe, Note("sent"))
        child = await ctx.start_child(ReplayedChild, 21)
        doubled = await child.result()
        approve = await ctx.wait_for(Approve)
        now = await ctx.now()
        return [*asked, doubled, approve.by, now > 0]


async def test_every_kind_of_step_replays_from_its_record() -> None:
    store = MemoryStore()
    async with Runtime(store=store) as runtime:
        handle = await runtime.start(Everything, None, run_id="all")
        await runtime.signal("all", Approve(by="ann"))
        result = await handle.result()
    assert result[2] == 42
    before = Counted.started
    report = await replay_run(store, "all", Everything)
    assert report.ok, report.describe()
    assert report.finished
    assert Counted.started == before


async def test_a_call_outside_ctx_is_a_divergence_in_replays_strict_mode() -> None:
    store = MemoryStore()
    async with Runtime(store=store) as runtime:
        await runtime.run(define_flow(1), None, run_id="clean")

    class Clocked(define_flow(1)):  # type: ignore[misc]
        async def run(self, ctx: RunContext, _: None) -> list[int]:
            time.time()  # what a replay after a crash would get another value from
            out: list[int] = await super().run(ctx, _)
            return out

    report = await replay_run(store, "clean", Clocked)
    d = report.divergence
    assert d is not None
    assert d.error == "NondeterministicCallError"
    assert "time.time" in d.got
    assert "test_replayer.py" in d.where


async def test_a_different_result_is_a_divergence() -> None:
    store = MemoryStore()
    async with Runtime(store=store) as runtime:
        await runtime.run(define_flow(1), None, run_id="result")

    class Reversed(define_flow(1)):  # type: ignore[misc]
        async def run(self, ctx: RunContext, _: None) -> list[int]:
            return list(reversed(await super().run(ctx, _)))

    report = await replay_run(store, "result", Reversed)
    assert not report.ok
    assert report.finished
    assert report.divergence is not None
    assert "result" in report.divergence.recorded


async def test_a_long_run_replays_from_its_snapshot_and_history_chunks(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from actorflow.storage import FileStore
    from actorflow.storage import _history as chunks
    from tests.runtime.workflow.test_long_runs import Long

    monkeypatch.setattr(chunks, "FLUSH_ENTRIES", 2)
    monkeypatch.setattr(chunks, "WINDOW_ENTRIES", 3)
    monkeypatch.setattr(chunks, "FANOUT", 2)
    store = FileStore(str(tmp_path / "store"))
    async with Runtime(store=store) as runtime:
        await runtime.run(Long, 14, run_id="long")
    history = await read_run_history(store, "long")
    assert history.snapshot is not None
    # its chunks and its window's entries put back inline
    assert history.snapshot.history is None
    assert history.snapshot.window is None
    assert (await store.read_snapshot("long", history.snapshot.snapshot_id)).history is not None
    path = tmp_path / "long.afh"
    write_history_file(history, path)
    report = await replay(path, Long)
    assert report.ok, report.describe()
    assert report.finished


async def test_a_run_of_a_sealed_store_replays_with_its_states_in_blobs(tmp_path: Path) -> None:
    from actorflow.storage import Codec, FileStore

    store = FileStore(str(tmp_path / "sealed"), codec=Codec(keys={"k1": bytes(range(32))}))
    async with Runtime(store=store) as runtime:
        handle = await runtime.start(Everything, None, run_id="sealed")
        await runtime.signal("sealed", Approve(by="bo"))
        await handle.result()
    history = await read_run_history(store, "sealed")
    assert history.blobs  # the hoarder's state is too large to travel inline
    assert (await replay_run(store, "sealed", Everything)).ok
    path = tmp_path / "sealed.afh"
    write_history_file(history, path)
    assert (await replay(path, Everything)).ok


class Verdict(Request[Literal["yes", "no"]], frozen=True):
    text: str


class Judge(Specialist):
    __actorflow_name__ = "tests.replayer.Judge"

    @handler
    async def judge(self, verdict: Verdict) -> Literal["yes", "no"]:
        return "yes" if verdict.text else "no"


class Judged(Orchestrator):
    __actorflow_name__ = "tests.replayer.Judged"

    async def run(self, ctx: RunContext, _: None) -> str:
        judge = await ctx.spawn(Judge, name="judge")
        said = await ctx.ask(judge, Verdict("fine"))
        return f"judged {said}"


async def test_a_redacted_history_stops_where_the_code_needs_a_blanked_value() -> None:
    store = MemoryStore()
    async with Runtime(store=store) as runtime:
        await runtime.run(Judged, None, run_id="judged")
    report = await replay(redact(await read_run_history(store, "judged")), Judged)
    assert report.ok
    assert report.short is not None
    assert "redacted value" in report.describe()


async def test_code_that_returns_before_a_recorded_step_is_a_divergence() -> None:
    store = MemoryStore()
    await crash_then(store, define_flow(1), None, "cut", after=6)

    class Shortened(define_flow(1)):  # type: ignore[misc]
        async def run(self, ctx: RunContext, _: None) -> list[int]:
            scribe = await ctx.spawn(Counted, name="scribe")
            out = [await self.intro(ctx, "intro")]
            out.append(await ctx.ask(scribe, Note("one")))
            return out  # "two", recorded before the crash, is never asked for now

    recorded = await read_run_history(store, "cut")
    last = max((k for k in recorded.view().steps if k.isdigit()), key=int)
    report = await replay_run(store, "cut", Shortened)
    assert not report.ok
    assert report.divergence is not None
    assert report.divergence.step_id == last
    assert report.divergence.error == "ReplayStepNotIssued"
    assert "ask scribe" in report.divergence.recorded
    assert "never issue" in report.describe()
    # the code as it was replays the same history ok
    assert (await replay_run(store, "cut", define_flow(1))).ok
