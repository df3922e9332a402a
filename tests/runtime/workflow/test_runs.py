"""Runs as a whole: ids, results, determinism, patches, pause, fork, owners, snapshots."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel
import msgspec
import pytest

import actorflow.runtime.workflow._run_table
from actorflow import (
    Orchestrator,
    Request,
    RunContext,
    Runtime,
    RuntimeConfig,
    Specialist,
    handler,
    phase,
)
from actorflow.errors import (
    NonDeterminismError,
    RunFailedError,
    RunInputMismatchError,
    RunLockedError,
    RunNotFinishedError,
    RunNotFoundError,
    RunNotPausedError,
    RunPaused,
    StorageError,
)
from actorflow.storage import (
    FileStore,
    MemoryStore,
    RunStatus,
    Snapshot,
    SnapshotInfo,
    StepRecord,
    read_full_snapshot,
)
from actorflow.testing import CrashingStore, SimulatedCrashError, crash_and_recover
from tests.runtime.workflow.workflows import AREAS, Lead, Pipeline

if TYPE_CHECKING:
    from pathlib import Path


class Note(Request[int], frozen=True):
    text: str


class Notes(msgspec.Struct):
    items: list[str] = []


class Scribe(Specialist):
    state: Notes

    @handler
    async def write(self, note: Note) -> int:
        self.state.items.append(note.text)
        return len(self.state.items)


async def crash_then(
    store: MemoryStore, workflow: type, arg: object, run_id: str, after: int
) -> None:
    """Run ``workflow`` until ``after`` records are durable, then 'kill the process'."""
    crashing = CrashingStore(store, crash_after=after)
    async with Runtime(store=crashing) as runtime:
        handle = await runtime.start(workflow, arg, run_id=run_id)
        async with anyio.create_task_group() as tg:

            async def stop_at_crash() -> None:
                await crashing.crashed.wait()
                handle.cancel()

            tg.start_soon(stop_at_crash)
            await handle.wait()
            tg.cancel_scope.cancel()
    assert crashing.crashed.is_set(), "the run finished before the crash point"


# --- ids and results ---------------------------------------------------------------


async def test_result_of_unknown_unfinished_and_failed_runs_are_named_errors() -> None:
    store = MemoryStore()
    async with Runtime(store=store) as runtime:
        with pytest.raises(RunNotFoundError):
            await runtime.result("nope")
        await crash_then(store, Lead, "a;b", "half", after=3)
        with pytest.raises(RunNotFinishedError, match="running"):
            await runtime.result("half")
        with pytest.raises(RunInputMismatchError):
            await runtime.run(Lead, "other input", run_id="half")
        with pytest.raises(ValueError, match="run id"):
            await runtime.run(Lead, "x", run_id="../etc")


async def test_result_decodes_to_the_orchestrators_return_type() -> None:
    store = MemoryStore()
    async with Runtime(store=store) as runtime:
        report = await runtime.run(Lead, "a;b", run_id="typed")
    async with Runtime(store=store) as runtime:
        assert await runtime.result("typed") == report
        [manifest] = await runtime.runs(status=RunStatus.COMPLETED, workflow=Lead)
        assert manifest.run_id == "typed"


class Boom(Orchestrator):
    async def run(self, ctx: RunContext, _: None) -> None:
        raise KeyError("no such thing")


async def test_a_failing_orchestrator_fails_the_run_with_its_cause() -> None:
    store = MemoryStore()
    async with Runtime(store=store) as runtime:
        with pytest.raises(RunFailedError, match="KeyError") as info:
            await runtime.run(Boom, None, run_id="boom")
        assert isinstance(info.value.__cause__, KeyError)
        with pytest.raises(RunFailedError, match="KeyError"):
            await runtime.result("boom")
    assert (await store.read_run("boom")).status is RunStatus.FAILED


# --- determinism and patches ----------------------------------------------------------


def define_flow(version: int) -> type[Orchestrator]:
    """The same workflow name, redefined like a code change between deployments."""

    class Flow(Orchestrator):
        __actorflow_name__ = "tests.Flow"

        async def run(self, ctx: RunContext, _: None) -> list[int]:
            scribe = await ctx.spawn(Scribe, name="scribe")
            out = [await ctx.ask(scribe, Note("one"))]
            if version == 2:
                out.append(await ctx.ask(scribe, Note("inserted")))
            if version == 3 and ctx.patched("insert-note"):
                out.append(await ctx.ask(scribe, Note("inserted")))
            out.append(await ctx.ask(scribe, Note("two")))
            out.append(await ctx.ask(scribe, Note("three")))
            return out

    return Flow


async def test_changed_code_replaying_an_old_log_raises_non_determinism() -> None:
    store = MemoryStore()
    await crash_then(store, define_flow(1), None, "drift", after=3)
    define_flow(2)
    async with Runtime(store=store) as runtime:
        handle_results = await runtime.recover()
        assert handle_results == {}
        with pytest.raises(RunFailedError) as info:
            await runtime.handle("drift").result()
    cause = info.value.__cause__
    assert isinstance(cause, NonDeterminismError)
    assert cause.step_id == "2"
    assert "test_runs.py" in cause.where
    assert "ctx.patched" in str(cause)


async def test_a_change_guarded_by_patched_recovers_old_runs_and_applies_to_new_ones() -> None:
    store = MemoryStore()
    await crash_then(store, define_flow(1), None, "old", after=3)
    flow = define_flow(3)
    async with Runtime(store=store) as runtime:
        assert await runtime.recover() == {"old": [1, 2, 3]}
        assert await runtime.run(flow, None, run_id="new") == [1, 2, 3, 4]


# --- state and snapshots -------------------------------------------------------------


class Journal(Orchestrator):
    phases_run = 0

    @phase
    async def chapter(self, ctx: RunContext, n: int) -> int:
        Journal.phases_run += 1
        scribe = await ctx.spawn(Scribe, name="scribe")
        count: int = await ctx.ask(scribe, Note(f"chapter {n}"))
        return count

    async def run(self, ctx: RunContext, n: int) -> tuple[int, int]:
        # Attributes set outside phases are rebuilt by replay; a finished
        # phase does not run again, so its body must not be what sets them.
        total = 0
        self.count = 0
        for i in range(n):
            total = await self.chapter(ctx, i)
            self.count += 1
        return total, self.count


async def test_snapshots_hold_states_as_recorded_never_later_ones() -> None:
    store = MemoryStore()
    async with Runtime(store=store) as runtime:
        await runtime.run(Journal, 4, run_id="journal")
    sizes = []
    for info in await store.list_snapshots("journal"):
        snap = await store.read_snapshot("journal", info.snapshot_id)
        ref = snap.agents["scribe"].state if "scribe" in snap.agents else None
        if ref is not None and ref.data is not None:
            sizes.append(len(msgspec.msgpack.decode(ref.data, type=Notes).items))
    assert sizes == sorted(sizes)
    assert sizes[0] < sizes[-1] == 4


@pytest.mark.parametrize("after", [2, 4, 7])
async def test_orchestrator_attributes_are_rebuilt_by_replay_never_restored_twice(
    after: int,
) -> None:
    outcome = await crash_and_recover(Journal, 4, crash_after=after)
    assert outcome.recovered == outcome.expected == (4, 4)


class WriteOrderStore(MemoryStore):
    """Remembers how long the log was whenever a snapshot was written."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[int, int]] = []

    async def write_snapshot(self, snapshot: Snapshot, *, update: Any = None) -> SnapshotInfo:
        self.seen.append((snapshot.position, await self.log_length(snapshot.run_id)))
        return await super().write_snapshot(snapshot, update=update)


@pytest.mark.parametrize("durability", ["sync", "batched", "phase"])
async def test_a_snapshot_is_written_only_after_the_log_it_covers_is_durable(
    durability: str,
) -> None:
    store = WriteOrderStore()
    config = RuntimeConfig.from_env({"ACTORFLOW_DURABILITY": durability})
    async with Runtime(store=store, config=config) as runtime:
        await runtime.run(Pipeline, AREAS)
    assert store.seen
    assert all(position <= durable for position, durable in store.seen)


class Witness(Specialist):
    """Sees how much of the log was durable when each message arrived."""

    store: MemoryStore | None = None
    seen: list[int] = []

    @handler
    async def write(self, note: Note) -> int:
        step = self.step
        assert step is not None
        assert Witness.store is not None
        Witness.seen.append(await Witness.store.log_length(step.run_id))
        return len(Witness.seen)


class Chain(Orchestrator):
    async def run(self, ctx: RunContext, n: int) -> int:
        witness = await ctx.spawn(Witness, name="witness")
        total = 0
        for i in range(n):
            total += await ctx.ask(witness, Note(str(i)))
        return total


@pytest.mark.parametrize("durability", ["sync", "batched"])
async def test_nothing_reaches_an_agent_before_the_records_it_could_depend_on(
    durability: str,
) -> None:
    store = MemoryStore()
    Witness.store, Witness.seen = store, []
    config = RuntimeConfig.from_env({"ACTORFLOW_DURABILITY": durability})
    async with Runtime(store=store, config=config) as runtime:
        await runtime.run(Chain, 5, run_id="chain")
    # message i follows the spawn record and i earlier ask records
    assert Witness.seen == [1, 2, 3, 4, 5]


# --- pause, resume, fork, cancel --------------------------------------------------------


class Approval(Orchestrator):
    @phase
    async def draft(self, ctx: RunContext, text: str) -> int:
        scribe = await ctx.spawn(Scribe, name="scribe")
        count: int = await ctx.ask(scribe, Note(text))
        return count

    async def run(self, ctx: RunContext, text: str) -> str:
        n = await self.draft(ctx, text)
        answer = await ctx.wait_for_input(f"publish draft {n}?")
        scribe = await ctx.spawn(Scribe, name="scribe")
        await ctx.ask(scribe, Note(answer))
        return f"{text}:{answer}"


async def test_a_paused_run_resumes_with_the_response() -> None:
    store = MemoryStore()
    async with Runtime(store=store) as runtime:
        with pytest.raises(RunPaused, match="publish draft 1") as info:
            await runtime.run(Approval, "hello", run_id="approve")
        assert info.value.run_id == "approve"
    manifest = await store.read_run("approve")
    assert manifest.status is RunStatus.PAUSED
    assert manifest.prompt == "publish draft 1?"
    async with Runtime(store=store) as runtime:
        assert await runtime.recover() == {}, "paused runs wait for resume"
        with pytest.raises(RunPaused):
            await runtime.run(Approval, "hello", run_id="approve")
        assert await runtime.resume("approve", "yes") == "hello:yes"
        with pytest.raises(RunNotFinishedError):
            await runtime.resume("approve", "again")


async def test_a_resume_that_crashed_after_recording_its_response_can_be_resumed_again() -> None:
    store = MemoryStore()
    async with Runtime(store=store) as runtime:
        with pytest.raises(RunPaused):
            await runtime.run(Approval, "hello", run_id="approve")
    crashing = CrashingStore(store, crash_after=1)  # dies right after the response's record
    async with Runtime(store=crashing) as runtime:
        with pytest.raises(StorageError) as info:
            await runtime.resume("approve", "yes")
    assert isinstance(info.value.__cause__, SimulatedCrashError)
    # the response was sent and the run taken up: it is an orphan now, not paused
    assert (await store.read_run("approve")).status is RunStatus.RUNNING
    async with Runtime(store=store) as runtime:
        # the sent response stands: the run goes on with it, never asks again
        assert await runtime.recover() == {"approve": "hello:yes"}


async def test_a_response_sent_before_a_resume_is_the_one_the_run_takes() -> None:
    store = MemoryStore()
    async with Runtime(store=store) as runtime:
        with pytest.raises(RunPaused):
            await runtime.run(Approval, "hello", run_id="approve")
        await runtime.signal("approve", "yes")  # kept in the inbox; nothing runs
        assert (await store.read_run("approve")).status is RunStatus.PAUSED
        assert await runtime.resume("approve", "no") == "hello:yes"


async def test_resuming_a_completed_run_says_it_is_completed_not_unfinished() -> None:
    store = MemoryStore()
    async with Runtime(store=store) as runtime:
        with pytest.raises(RunPaused):
            await runtime.run(Approval, "hi", run_id="done-once")
        assert await runtime.resume("done-once", "yes") == "hi:yes"
        with pytest.raises(RunNotPausedError) as info:
            await runtime.resume("done-once", "again")
    message = str(info.value)
    assert "is completed, not paused" in message
    assert "has not finished" not in message
    assert info.value.status == "completed"


async def test_fork_starts_a_new_run_from_an_old_checkpoint() -> None:
    store = MemoryStore()
    async with Runtime(store=store) as runtime:
        original = await runtime.run(Journal, 3, run_id="source")
        infos = await store.list_snapshots("source")
        middle = next(i for i in infos if i.trigger == "phase_end")
        finished = len((await read_full_snapshot(store, "source", middle.snapshot_id)).phases)
        Journal.phases_run = 0
        handle = await runtime.fork("source", middle.snapshot_id, new_run_id="forked")
        # the scribe comes back with the notes it had at the checkpoint
        assert await handle.result() == original == (3, 3)
    assert Journal.phases_run == 3 - finished, "phases finished at the checkpoint do not run"
    manifest = await store.read_run("forked")
    assert manifest.parent == "source"
    assert manifest.parent_snapshot == middle.snapshot_id


async def test_cancel_marks_a_run_cancelled_and_recover_leaves_it() -> None:
    store = MemoryStore()
    await crash_then(store, Journal, 3, "doomed", after=2)
    async with Runtime(store=store) as runtime:
        await runtime.cancel("doomed")
        assert await runtime.recover() == {}
    assert (await store.read_run("doomed")).status is RunStatus.CANCELLED


async def test_a_run_cancelled_before_its_code_starts_is_cancelled() -> None:
    store = MemoryStore()
    Journal.phases_run = 0
    async with Runtime(store=store) as runtime:
        handle = await runtime.start(Journal, 3, run_id="early")
        handle.cancel()  # its task has not run yet
        with pytest.raises(RunFailedError, match="cancelled"):
            await handle.result()
    assert Journal.phases_run == 0
    assert (await store.read_run("early")).status is RunStatus.CANCELLED


async def test_new_checkpoint_ids_never_reuse_those_of_pruned_ones() -> None:
    store = MemoryStore()
    await crash_then(store, Journal, 4, "pruned", after=8)
    before = {i.snapshot_id for i in await store.list_snapshots("pruned")}
    assert len(before) >= 2
    for snapshot_id in sorted(before)[:-1]:  # `actorflow prune` on the interrupted run, say
        await store.delete_snapshot("pruned", snapshot_id)
    async with Runtime(store=store) as runtime:
        await runtime.recover("pruned")
    new = {i.snapshot_id for i in await store.list_snapshots("pruned")} - before
    assert new
    number = lambda snapshot_id: int(snapshot_id.partition("-")[0])  # noqa: E731
    assert min(map(number, new)) > max(map(number, before)), "ids count on past pruned ones"


class Kept(Orchestrator):
    async def run(self, ctx: RunContext, n: int) -> int:
        return n


async def test_a_runtime_keeps_the_handles_of_its_newest_finished_runs_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(actorflow.runtime.workflow._run_table, "KEPT_FINISHED_HANDLES", 3)
    async with Runtime(store=MemoryStore()) as runtime:
        for i in range(5):
            await runtime.run(Kept, i, run_id=f"kept-{i}")
        with pytest.raises(RunNotFoundError):
            runtime.handle("kept-1")
        assert await runtime.handle("kept-4").result() == 4
        assert await runtime.result("kept-0") == 0  # the store still has every run


# --- owners, corruption, many runs, giving up ---------------------------------------------


async def test_a_run_owned_by_a_live_process_is_not_taken(tmp_path: Path) -> None:
    async with FileStore(tmp_path) as other:
        await crash_then(MemoryStore(), Journal, 2, "x", after=1)  # warm the classes
        async with Runtime(store=FileStore(tmp_path)) as runtime:
            handle = await runtime.start(Approval, "hi", run_id="owned")
            with pytest.raises(RunPaused):
                await handle.result()
        await other.update_run(
            "owned", lambda m: msgspec.structs.replace(m, status=RunStatus.RUNNING)
        )
        lease = await other.claim("owned", "someone-else")
        async with Runtime(store=FileStore(tmp_path)) as runtime:
            assert await runtime.recover() == {}
            with pytest.raises(RunLockedError):
                await runtime.run(Approval, "hi", run_id="owned")
        await other.release(lease)


async def test_a_corrupt_newest_snapshot_falls_back_to_the_one_before(tmp_path: Path) -> None:
    expected = (await crash_and_recover(Journal, 4, crash_after=3)).expected
    async with FileStore(tmp_path) as store:
        crashing = CrashingStore(store, crash_after=5)
        async with Runtime(store=crashing) as runtime:
            handle = await runtime.start(Journal, 4, run_id="crash-test")
            await crashing.crashed.wait()
            handle.cancel()
    newest = max((tmp_path / "runs" / "crash-test" / "snapshots").iterdir())
    data = bytearray(newest.read_bytes())
    data[len(data) // 2] ^= 0xFF
    newest.write_bytes(bytes(data))
    events = []
    async with Runtime(store=FileStore(tmp_path)) as runtime:
        results = await runtime.recover()
        async for event in runtime.handle("crash-test").events():
            events.append(event.name)
    assert results == {"crash-test": expected}
    assert "checkpoint_corrupted" in events


class GatedScribe(Scribe):
    """Holds every message until the test opens the gate."""

    gate: anyio.Event | None = None

    @handler
    async def write(self, note: Note) -> int:
        if GatedScribe.gate is not None:
            await GatedScribe.gate.wait()
        return await super().write(note)


class GatedJournal(Orchestrator):
    async def run(self, ctx: RunContext, n: int) -> int:
        scribe = await ctx.spawn(GatedScribe, name="researcher-0")
        total = 0
        for i in range(n):
            total = await ctx.ask(scribe, Note(str(i)))
        return total


async def test_a_hundred_concurrent_runs_crash_and_recover_together() -> None:
    store = MemoryStore()
    crashing = CrashingStore(store, crash_after=10**9)
    GatedScribe.gate = anyio.Event()
    async with Runtime(store=crashing) as runtime:
        handles = [await runtime.start(GatedJournal, 5, run_id=f"run-{i:03d}") for i in range(100)]
        with anyio.fail_after(30):
            while crashing.appended < 100:  # each run has spawned its agent
                await anyio.lowlevel.checkpoint()
            # 100 runs x 6 records; the 'process' dies 250 records from now
            crashing.crash_after = crashing.appended + 250
            GatedScribe.gate.set()
            await crashing.crashed.wait()
        for handle in handles:
            handle.cancel()
    GatedScribe.gate = None
    unfinished = await store.list_runs(status=RunStatus.RUNNING)
    assert len(unfinished) == 100, "no run had finished: the crash caught all of them"
    async with Runtime(store=store) as runtime:
        with anyio.fail_after(60):
            results = await runtime.recover()
    assert results == {f"run-{i:03d}": 5 for i in range(100)}
    assert len(await store.list_runs(status=RunStatus.COMPLETED)) == 100


async def test_a_run_that_keeps_crashing_is_marked_failed_after_max_attempts() -> None:
    store = MemoryStore()
    config = RuntimeConfig(max_recovery_attempts=2)
    await crash_then(store, Journal, 5, "hopeless", after=2)
    for _ in range(2):
        crashing = CrashingStore(store, crash_after=1)
        async with Runtime(store=crashing, config=config) as runtime:
            handle_results = await runtime.recover()
            assert handle_results == {}
    async with Runtime(store=store, config=config) as runtime:
        assert await runtime.recover() == {}
        with pytest.raises(RunFailedError, match="RecoveryFailedError"):
            await runtime.result("hopeless")
    manifest = await store.read_run("hopeless")
    assert manifest.status is RunStatus.FAILED
    assert manifest.attempt == 3


@pytest.mark.parametrize("phase_ends", [True, False])
async def test_retention_applies_to_a_run_when_it_finishes(phase_ends: bool) -> None:
    from actorflow.storage import RetentionPolicy

    store = MemoryStore()
    config = RuntimeConfig(retention=RetentionPolicy(keep_last=1, keep_phase_ends=phase_ends))
    async with Runtime(store=store, config=config) as runtime:
        await runtime.run(Journal, 4, run_id="kept")
    triggers = [i.trigger for i in await store.list_snapshots("kept")]
    assert triggers == ["phase_end"] * 4 * phase_ends + ["completed"]
    async with Runtime(store=store) as runtime:
        assert await runtime.result("kept") == (4, 4)


class ListingCounted(MemoryStore):
    """A memory store that counts ``list_snapshots`` calls (a prune starts with one)."""

    listed = 0

    async def list_snapshots(self, run_id: str) -> list[SnapshotInfo]:
        self.listed += 1
        return await super().list_snapshots(run_id)


async def test_a_fresh_run_whose_checkpoints_the_policy_all_keeps_is_not_pruned() -> None:
    from actorflow.storage import RetentionPolicy

    kept = ListingCounted()
    async with Runtime(store=kept) as runtime:  # the default policy keeps phase ends
        await runtime.run(Journal, 4, run_id="kept")
    assert kept.listed == 0  # no prune: it would only have read
    dropped = ListingCounted()
    config = RuntimeConfig(retention=RetentionPolicy(keep_last=1, keep_phase_ends=False))
    async with Runtime(store=dropped, config=config) as runtime:
        await runtime.run(Journal, 4, run_id="dropped")
    assert dropped.listed >= 1
    assert [i.trigger for i in await dropped.list_snapshots("dropped")] == ["completed"]


async def test_retention_counts_the_checkpoints_of_earlier_attempts_too() -> None:
    from actorflow.storage import RetentionPolicy

    store = MemoryStore()
    await crash_then(store, Journal, 6, "twice", after=14)
    first = len(await store.list_snapshots("twice"))
    # phase ends aside (kept whatever keep_last says), to count every checkpoint
    config = RuntimeConfig(retention=RetentionPolicy(keep_last=first, keep_phase_ends=False))
    async with Runtime(store=store, config=config) as runtime:  # waits for pruning on exit
        await runtime.recover("twice")
        written = runtime.handle("twice").metrics["checkpoints"]
        assert 0 < written <= first  # this attempt alone is within the policy
    assert len(await store.list_snapshots("twice")) == first


def define_evolving(version: int) -> type[Orchestrator]:
    """A state class that gains a defaulted field between two deployments."""
    if version == 1:

        class Memo(msgspec.Struct):
            items: list[str] = []

    else:

        class Memo(msgspec.Struct):  # type: ignore[no-redef]
            items: list[str] = []
            tag: str = "new"

    class Keeper(Specialist):
        __actorflow_name__ = "tests.Keeper"
        state: Memo

        @handler
        async def keep(self, note: Note) -> str:
            self.state.items.append(note.text)
            return f"{len(self.state.items)}:{getattr(self.state, 'tag', 'old')}"

    class Evolving(Orchestrator):
        __actorflow_name__ = "tests.Evolving"

        async def run(self, ctx: RunContext, _: None) -> list[str]:
            keeper = await ctx.spawn(Keeper, name="keeper")
            return [str(await ctx.ask(keeper, Note(str(i)))) for i in range(3)]

    return Evolving


async def test_a_state_class_gaining_a_defaulted_field_still_recovers_old_runs() -> None:
    store = MemoryStore()
    await crash_then(store, define_evolving(1), None, "evolve", after=3)
    define_evolving(2)
    async with Runtime(store=store) as runtime:
        assert await runtime.recover() == {"evolve": ["1:old", "2:old", "3:new"]}


class TwoReviews(Orchestrator):
    @phase
    async def review(self, ctx: RunContext, who: str) -> str:
        return await ctx.wait_for_input(f"{who} approves?")

    async def run(self, ctx: RunContext, _: None) -> list[str]:
        answers: list[str] = await ctx.gather(self.review(ctx, "legal"), self.review(ctx, "ops"))
        return answers


async def test_a_pause_inside_gathered_phases_pauses_the_run() -> None:
    store = MemoryStore()
    async with Runtime(store=store) as runtime:
        with pytest.raises(RunPaused, match="legal approves"):
            await runtime.run(TwoReviews, None, run_id="two")
        with pytest.raises(RunPaused, match="ops approves"):
            await runtime.resume("two", "yes")
        assert await runtime.resume("two", "ok") == ["yes", "ok"]


class Directory(Orchestrator):
    shared: Any = None  # a ref to an actor of the runtime, set by the test

    async def run(self, ctx: RunContext, _: None) -> int:
        count: int = await ctx.ask(Directory.shared, Note("from a run"))
        return count


async def test_asking_an_actor_of_the_runtime_records_the_reply_but_not_its_state() -> None:
    store = MemoryStore()
    async with Runtime(store=store) as runtime:
        Directory.shared = await runtime.spawn(Scribe, name="shared-scribe")
        assert await runtime.run(Directory, None, run_id="outside") == 1
    log = await store.read_log("outside")
    [record] = [r for r in log if isinstance(r, StepRecord) and r.kind == "ask"]
    assert record.result is not None
    assert record.state is None
