"""Signals and waits: ``runtime.signal`` into a run's inbox, ``ctx.wait_for`` taking them.

Each signal is taken once, in order per type, by the waits in step order;
the wait and what it took are recorded, so replay returns the same and
never takes another; deadlines are recorded, so a restart does not reset
them; paused runs go on at ``recover()`` once their wait can resolve.
"""

from __future__ import annotations

import sys
import types
from typing import TYPE_CHECKING

import anyio
import msgspec
import pytest
from anyio.streams.text import TextReceiveStream

from actorflow import Orchestrator, RunContext, Runtime, RuntimeConfig, phase
from actorflow.errors import (
    ConfigurationError,
    EncodingError,
    RunFailedError,
    RunFinishedError,
    RunNotFoundError,
    RunPaused,
    StoreUnavailableError,
    WaitTimeoutError,
)
from actorflow.runtime.workflow import _recovery, _signals
from actorflow.runtime.workflow._wait_records import pending_waits, read_resolution
from actorflow.runtime.workflow.steps import _wait
from actorflow.storage import EventRecord, FileStore, MemoryStore, RunStatus, StepRecord
from tests.runtime.workflow.crash_parent import child_env
from tests.runtime.workflow.signal_child import Fix, TwoFixes

if TYPE_CHECKING:
    from pathlib import Path

    from actorflow.storage import Store


class Other(msgspec.Struct, frozen=True):
    text: str


class Together(Orchestrator):
    async def run(self, ctx: RunContext, _: None) -> list[int]:
        fixes = await ctx.gather(ctx.wait_for(Fix), ctx.wait_for(Fix), ctx.wait_for(Fix))
        return [f.n for f in fixes]


class Deadline(Orchestrator):
    async def run(self, ctx: RunContext, seconds: float) -> int:
        fix = await ctx.wait_for(Fix, timeout=seconds, default=Fix(-1))
        return fix.n


class NoDefault(Orchestrator):
    async def run(self, ctx: RunContext, _: None) -> str:
        try:
            await ctx.wait_for(Fix, timeout=0.01)
        except WaitTimeoutError as exc:
            return f"timed out at {exc.step_id}"
        return "got one"


class PausedFix(Orchestrator):
    async def run(self, ctx: RunContext, seconds: float | None) -> int:
        fix = await ctx.wait_for(Fix, timeout=seconds, default=Fix(0), pause=True)
        return fix.n


class Question(Orchestrator):
    async def run(self, ctx: RunContext, _: None) -> str:
        answer = await ctx.wait_for_input("go on?", timeout=60, default="no answer")
        return answer


class PhaseThenPause(Orchestrator):
    @phase
    async def first(self, ctx: RunContext) -> int:
        return (await ctx.wait_for(Fix)).n

    async def run(self, ctx: RunContext, _: None) -> list[int]:
        a = await self.first(ctx)
        b = await ctx.wait_for(Fix, pause=True)
        return [a, b.n]


class FakeClock:
    """``time`` for the waits and recovery's look at them: deadlines on a clock the test moves."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def time(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock()
    for module in (_wait, _recovery):
        monkeypatch.setattr(module, "time", types.SimpleNamespace(time=fake.time))
    return fake


async def waits_of(store: Store, run_id: str) -> list[StepRecord]:
    log = await store.read_log(run_id)
    return [r for r in log if isinstance(r, StepRecord) and r.kind == "wait"]


async def until_waiting(store: Store, run_id: str, count: int = 1) -> None:
    """Until the run has recorded ``count`` wait requests (its waits started)."""
    while True:
        log = await store.read_log(run_id)
        if sum(isinstance(r, EventRecord) and r.kind == "wait_requested" for r in log) >= count:
            return
        await anyio.sleep(0.005)


# --- live runs ----------------------------------------------------------------------


async def test_a_live_run_takes_signals_of_its_type_in_order_each_once() -> None:
    store = MemoryStore()
    async with Runtime(store=store) as runtime:
        handle = await runtime.start(TwoFixes, None, run_id="live")
        await runtime.signal("live", Other("not for a Fix wait"))
        await runtime.signal("live", Fix(1))
        await runtime.signal("live", Fix(2))
        await runtime.signal("live", Fix(3))  # nobody waits for a third: it stays
        assert await handle.result() == [1, 2]
    taken = [read_resolution(r).seq for r in await waits_of(store, "live")]
    assert taken == [1, 2]
    # replay takes the same two and never the third
    async with Runtime(store=store) as runtime:
        assert await runtime.run(TwoFixes, None, run_id="live") == [1, 2]


async def test_signals_from_another_runtime_reach_a_live_owner_on_a_file_store(
    tmp_path: Path,
) -> None:
    async with Runtime(store=FileStore(tmp_path)) as owner:
        handle = await owner.start(TwoFixes, None, run_id="shared")
        async with Runtime(store=FileStore(tmp_path)) as other:
            await until_waiting(other.store, "shared")
            await other.signal("shared", Fix(7), id="fix-7")
            await other.signal("shared", Fix(7), id="fix-7")  # a retry: adds nothing
            await other.signal("shared", Fix(8))
        assert await handle.result() == [7, 8]


async def test_waits_started_together_take_signals_in_step_order() -> None:
    store = MemoryStore()
    async with Runtime(store=store) as runtime:
        handle = await runtime.start(Together, None, run_id="together")
        for n in (10, 20, 30):
            await runtime.signal("together", Fix(n))
        assert await handle.result() == [10, 20, 30]


async def test_a_signal_that_does_not_decode_is_left_in_the_inbox_not_taken() -> None:
    store = MemoryStore()
    async with Runtime(store=store) as runtime:
        handle = await runtime.start(TwoFixes, None, run_id="bad")
        await store.post("bad", entry_id="x", type="Fix", payload=msgspec.msgpack.encode("no"))
        await runtime.signal("bad", Fix(1))
        await runtime.signal("bad", Fix(2))
        assert await handle.result() == [1, 2]
    assert [e.seq for e in await store.read_inbox("bad")] == [0, 1, 2]


# --- timeouts -----------------------------------------------------------------------


async def test_a_wait_returns_its_default_at_the_deadline_and_replays_it() -> None:
    store = MemoryStore()
    async with Runtime(store=store) as runtime:
        assert await runtime.run(Deadline, 0.01, run_id="late") == -1
        [record] = await waits_of(store, "late")
        assert read_resolution(record).timed_out
        assert await runtime.run(Deadline, 0.01, run_id="late") == -1


async def test_a_wait_without_default_raises_wait_timeout_error_recorded() -> None:
    store = MemoryStore()
    async with Runtime(store=store) as runtime:
        assert await runtime.run(NoDefault, None, run_id="nodefault") == "timed out at 0"
        # replayed: the recorded timeout raises again, at once
        assert await runtime.run(NoDefault, None, run_id="nodefault") == "timed out at 0"
    assert "pass default=" in str(WaitTimeoutError("r", "0", "Fix", 0.01))


async def test_a_restart_in_the_middle_of_a_timeout_does_not_reset_it(clock: FakeClock) -> None:
    store = MemoryStore()
    async with Runtime(store=store) as runtime:
        handle = await runtime.start(Deadline, 3600.0, run_id="restart")
        await until_waiting(store, "restart")
    # the runtime stopped: the run is an orphan, its wait's deadline recorded
    assert handle.status is RunStatus.INTERRUPTED
    [wait] = pending_waits(*(await _events_and_steps(store, "restart")))
    assert wait.deadline == clock.now + 3600.0
    clock.now += 3601.0  # past the recorded deadline: a recovery waits no more
    async with Runtime(store=store) as runtime:
        assert await runtime.recover() == {"restart": -1}


async def _events_and_steps(
    store: Store, run_id: str
) -> tuple[dict[str, EventRecord], dict[str, StepRecord]]:
    log = await store.read_log(run_id)
    events = {r.step_id or r.kind: r for r in log if isinstance(r, EventRecord)}
    steps = {r.step_id: r for r in log if isinstance(r, StepRecord)}
    return events, steps


@pytest.mark.parametrize("seconds", [0, -1, float("nan"), "5", True])
async def test_a_bad_timeout_is_a_configuration_error(seconds: object) -> None:
    class Bad(Orchestrator):
        async def run(self, ctx: RunContext, _: None) -> None:
            await ctx.wait_for(Fix, timeout=seconds)  # type: ignore[call-overload]

    async with Runtime(store=MemoryStore()) as runtime:
        with pytest.raises(RunFailedError, match="ConfigurationError") as info:
            await runtime.run(Bad, None)
    assert isinstance(info.value.__cause__, ConfigurationError)


# --- paused and orphaned runs -------------------------------------------------------


async def test_a_paused_run_goes_on_at_recover_once_its_signal_arrives() -> None:
    store = MemoryStore()
    async with Runtime(store=store) as runtime:
        with pytest.raises(RunPaused):
            await runtime.run(PausedFix, None, run_id="paused")
        assert await runtime.recover() == {}  # nothing to take yet: it stays paused
        assert (await store.read_run("paused")).status is RunStatus.PAUSED
        await runtime.signal("paused", Other("not what it waits for"))
        assert await runtime.recover() == {}
        await runtime.signal("paused", Fix(5))
        assert (await store.read_run("paused")).status is RunStatus.PAUSED
        assert await runtime.recover() == {"paused": 5}
        assert await runtime.recover() == {}


async def test_a_paused_runs_deadline_shows_in_its_manifest_and_resolves_at_recover(
    clock: FakeClock,
) -> None:
    store = MemoryStore()
    async with Runtime(store=store) as runtime:
        with pytest.raises(RunPaused) as info:
            await runtime.run(PausedFix, 30.0, run_id="expiring")
        manifest = await store.read_run("expiring")
        assert manifest.deadline == info.value.deadline == clock.now + 30.0
        assert await runtime.recover("expiring") == {}
        clock.now += 31.0
        assert await runtime.recover("expiring") == {"expiring": 0}
        assert (await store.read_run("expiring")).deadline is None


async def test_wait_for_input_is_a_string_signal_with_a_default(clock: FakeClock) -> None:
    store = MemoryStore()
    async with Runtime(store=store) as runtime:
        with pytest.raises(RunPaused, match="go on"):
            await runtime.run(Question, None, run_id="q1")
        await runtime.signal("q1", "yes")
        assert await runtime.recover() == {"q1": "yes"}
        with pytest.raises(RunPaused):
            await runtime.run(Question, None, run_id="q2")
        with pytest.raises(ConfigurationError, match="str"):
            await runtime.resume("q2", Fix(1))
        clock.now += 61
        assert await runtime.recover() == {"q2": "no answer"}


async def test_snapshots_keep_what_was_taken_when_the_waits_records_are_gone() -> None:
    # the first wait's record is dropped from snapshots when its phase ends;
    # the inbox cursor in the snapshot still says its signal was taken
    store = MemoryStore()
    async with Runtime(store=store) as runtime:
        handle = await runtime.start(PhaseThenPause, None, run_id="cursor")
        await until_waiting(store, "cursor")
        await runtime.signal("cursor", Fix(1))
        with pytest.raises(RunPaused):
            await handle.result()
        [info, *_] = reversed(await store.list_snapshots("cursor"))
        snapshot = await store.read_snapshot("cursor", info.snapshot_id)
        assert snapshot.inbox_taken == (0,)
        assert not [s for s in snapshot.steps if s.kind == "wait"]
        await runtime.signal("cursor", Fix(2))
        assert await runtime.recover() == {"cursor": [1, 2]}


# --- what cannot be signalled --------------------------------------------------------


async def test_signals_to_unknown_or_finished_runs_and_unencodable_ones_are_named_errors() -> None:
    store = MemoryStore()
    async with Runtime(store=store) as runtime:
        with pytest.raises(RunNotFoundError):
            await runtime.signal("nobody", Fix(1))
        with pytest.raises(ValueError, match="run id"):
            await runtime.signal("../etc", Fix(1))
        handle = await runtime.start(TwoFixes, None, run_id="done")
        with pytest.raises(EncodingError):
            await runtime.signal("done", object())
        await runtime.signal("done", Fix(1))
        await runtime.signal("done", Fix(2))
        await handle.result()
        with pytest.raises(RunFinishedError, match="has ended"):
            await runtime.signal("done", Fix(3))


async def test_a_signal_to_an_orphan_is_taken_once_after_its_owner_is_killed(
    tmp_path: Path, anyio_backend_name: str
) -> None:
    """A real owner (a child process) takes a signal and is SIGKILLed; the next one waits."""
    store_dir = tmp_path / "store"
    command = [
        sys.executable,
        "-m",
        "tests.runtime.workflow.signal_child",
        str(store_dir),
        "orphan",
        anyio_backend_name,
    ]
    lines: list[str] = []
    with anyio.fail_after(60):
        async with await anyio.open_process(command, env=child_env()) as child:
            assert child.stdout is not None
            stream = TextReceiveStream(child.stdout)
            buffered = ""

            async def line() -> str:
                nonlocal buffered
                while "\n" not in buffered:
                    buffered += await stream.receive()
                text, _, buffered = buffered.partition("\n")
                lines.append(text)
                return text

            assert await line() == "WAITING"
            async with Runtime(store=FileStore(store_dir)) as sender:
                await sender.signal("orphan", Fix(1))  # live owner
                assert await line() == "TOOK 1"
                child.kill()  # SIGKILL
                await child.wait()
                await sender.signal("orphan", Fix(2))  # orphaned: kept for the recovery
        async with Runtime(store=FileStore(store_dir)) as runtime:
            assert await runtime.recover() == {"orphan": [1, 2]}
            assert await runtime.run(TwoFixes, None, run_id="orphan") == [1, 2]
            taken = [read_resolution(r).seq for r in await waits_of(runtime.store, "orphan")]
    assert taken == [0, 1], lines


# --- cancel from anywhere -----------------------------------------------------------


async def test_a_run_owned_by_another_runtime_is_cancelled_through_its_inbox(
    tmp_path: Path,
) -> None:
    async with Runtime(store=FileStore(tmp_path)) as owner:
        handle = await owner.start(TwoFixes, None, run_id="owned")
        async with Runtime(store=FileStore(tmp_path)) as other:
            await until_waiting(other.store, "owned")
            await other.cancel("owned", reason="the user closed the tab")
            await other.cancel("owned", reason="a second request adds nothing")
        with pytest.raises(RunFailedError, match="the user closed the tab"):
            await handle.result()
    manifest = await FileStore(tmp_path).read_run("owned")
    assert manifest.status is RunStatus.CANCELLED
    assert manifest.error is not None
    assert manifest.error.message == "the user closed the tab"
    async with Runtime(store=FileStore(tmp_path)) as runtime:
        assert await runtime.recover() == {}
        with pytest.raises(RunFailedError, match="the user closed the tab"):
            await runtime.result("owned")


async def test_cancelling_a_paused_run_from_anywhere_marks_it_with_the_reason() -> None:
    store = MemoryStore()
    async with Runtime(store=store) as runtime:
        with pytest.raises(RunPaused):
            await runtime.run(PausedFix, None, run_id="paused-cancel")
    async with Runtime(store=store) as other:
        await other.cancel("paused-cancel", reason="no longer needed")
        with pytest.raises(RunFailedError, match="no longer needed"):
            await other.result("paused-cancel")
        with pytest.raises(RunFinishedError):
            await other.signal("paused-cancel", Fix(1))
        assert await other.recover() == {}


class Sleeper(Orchestrator):
    async def run(self, ctx: RunContext, _: None) -> None:
        await ctx.sleep(3600)


async def test_a_run_that_waits_for_nothing_still_takes_a_cancel_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # its inbox is watched from WATCH_AFTER seconds into the attempt on
    monkeypatch.setattr(_signals, "WATCH_AFTER", 0.01)
    async with Runtime(store=FileStore(tmp_path)) as owner:
        handle = await owner.start(Sleeper, None, run_id="sleeper")
        async with Runtime(store=FileStore(tmp_path)) as other:
            assert await other.store.is_owned("sleeper")
            # posted before the owner watches: its watch's first read takes it
            await other.cancel("sleeper", reason="stop sleeping")
        with pytest.raises(RunFailedError, match="stop sleeping"):
            await handle.result()


class NoWatch:
    """A memory store whose inbox watch cannot be opened (as a FIFO the OS refuses)."""

    def __init__(self, inner: MemoryStore) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    def watch_inbox(self, run_id: str) -> object:
        raise StoreUnavailableError("watch inbox", "no watch here")


async def test_a_run_whose_inbox_watch_fails_still_takes_its_signals_by_polling() -> None:
    store = NoWatch(MemoryStore())
    config = RuntimeConfig(signal_poll_interval=0.01)
    async with Runtime(store=store, config=config) as runtime:  # type: ignore[arg-type]
        handle = await runtime.start(TwoFixes, None, run_id="polled")
        await until_waiting(store.inner, "polled")
        await runtime.signal("polled", Fix(1))
        await runtime.signal("polled", Fix(2))
        assert await handle.result() == [1, 2]


async def test_a_stopped_desk_starts_no_watch_that_would_hold_its_run_open() -> None:
    # a timer (or a wait) that asks for a watch just after the attempt stopped
    # the desk must not start one: nobody would cancel it
    store = MemoryStore()
    async with Runtime(store=store) as runtime:
        await runtime.start(PausedFix, None, run_id="desk")
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            desk = _signals.SignalDesk(store, "desk", set(), poll_interval=0.01, task_group=tg)
            desk.stop()
            waiter = _signals.Waiter("0", "Fix", lambda entry: True)
            desk.register(waiter)
            with anyio.move_on_after(0.05):
                await desk.wait(waiter)
            assert waiter.entry is None


async def test_the_watch_clock_opens_live_desks_skips_ended_ones_and_ends_when_idle(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # one task for every run's deferred watch: it must never keep a finished
    # run alive, nor the runtime's task group busy once no run waits for it
    monkeypatch.setattr(_signals, "WATCH_AFTER", 0.0)
    store = MemoryStore()
    async with Runtime(store=store) as runtime:
        await runtime.start(PausedFix, None, run_id="desk")
    with anyio.fail_after(10):
        async with anyio.create_task_group() as clock_group:
            clock = _signals.WatchClock(lambda: clock_group)
            async with anyio.create_task_group() as run_group:
                live = _signals.SignalDesk(
                    store, "desk", set(), poll_interval=0.01, task_group=run_group
                )
                ended = _signals.SignalDesk(
                    store, "desk", set(), poll_interval=0.01, task_group=run_group
                )
                ended.stop()
                clock.schedule(ended)
                clock.schedule(live)
                waiter = _signals.Waiter("0", "Fix", lambda entry: True)
                live.register(waiter)  # registered, not waiting: only a watch reads the inbox
                await _signals.send_signal(store, "desk", Fix(7), entry_id=None, sender=None)
                await waiter.got.wait()  # the clock opened the live desk's watch
                assert waiter.entry is not None
                live.stop()
        # leaving clock_group means the clock's task ended: its FIFO emptied
