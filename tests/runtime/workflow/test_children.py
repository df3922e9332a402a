"""Child runs: ``ctx.run_child`` and ``ctx.start_child``.

A child is a run of its own whose end reaches its parent as a signal; the
parent's wait for it is recorded once and replayed exactly; a parent that
replays re-attaches to its child (never starts a second), re-posts an end
that was lost, and drives an orphaned child on; a child survives a SIGKILL
in its middle; a cancelled parent cancels its unfinished children.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, ClassVar

import anyio
import msgspec
import pytest
from anyio.streams.text import TextReceiveStream

from actorflow import Orchestrator, RunContext, Runtime, RuntimeConfig
from actorflow.errors import StepFailedError
from actorflow.runtime.workflow._children import (
    RuntimeChildren,
    child_run_id,
    child_signal,
    post_end,
)
from actorflow.storage import (
    EventRecord,
    FileStore,
    MemoryStore,
    RunStatus,
    StepRecord,
    read_messages,
    validate_run_id,
)
from tests.runtime.workflow.children_child import CHECK, LEAD, Go, Job, Lead
from tests.runtime.workflow.crash_parent import child_env

if TYPE_CHECKING:
    from pathlib import Path

    from actorflow.storage import Store


FAST = RuntimeConfig(signal_poll_interval=0.01)
"""Waits read the inbox often: these tests wait for signals all the time."""


class Double(Orchestrator):
    runs: ClassVar[list[int]] = []

    async def run(self, ctx: RunContext, n: int) -> int:
        Double.runs.append(n)
        return 2 * n


class WaitGo(Orchestrator):
    async def run(self, ctx: RunContext, n: int) -> int:
        go = await ctx.wait_for(Go)
        return n + go.n


class BrokenChild(Orchestrator):
    runs: ClassVar[list[str]] = []

    async def run(self, ctx: RunContext, draft: str) -> int:
        BrokenChild.runs.append(draft)
        raise ValueError(f"bad draft {draft!r}")


class Report(msgspec.Struct, frozen=True):
    child: int
    run_id: str


class One(Orchestrator):
    async def run(self, ctx: RunContext, n: int) -> Report:
        child = await ctx.start_child(Double, n)
        return Report(child=await child.result(), run_id=child.run_id)


class Pair(Orchestrator):
    async def run(self, ctx: RunContext, _: None) -> list[int]:
        a = await ctx.start_child(WaitGo, 1)
        b = await ctx.start_child(WaitGo, 2)
        ra, rb = await ctx.gather(a.result(), b.result())
        return [ra, rb]


class FailingParent(Orchestrator):
    """A failed child's error, then a wait of the parent's own (where a test interrupts it)."""

    async def run(self, ctx: RunContext, _: None) -> str:
        try:
            await ctx.run_child(BrokenChild, "d1")
        except StepFailedError as exc:
            said = f"{exc.error_type}|{exc.error_message}"
        else:
            said = "no error"
        await ctx.wait_for(Go)
        return said


class ThenWait(Orchestrator):
    """A child's result, then a wait of the parent's own (where a test interrupts it)."""

    async def run(self, ctx: RunContext, n: int) -> int:
        value = await ctx.run_child(Double, n)
        go = await ctx.wait_for(Go)
        return value + go.n


class Waiting(Orchestrator):
    async def run(self, ctx: RunContext, n: int) -> int:
        return await ctx.run_child(WaitGo, n)


class Abandoning(Orchestrator):
    async def run(self, ctx: RunContext, policy: str) -> int:
        await ctx.start_child(
            WaitGo, 1, on_parent_cancel="abandon" if policy == "abandon" else "cancel"
        )
        go = await ctx.wait_for(Go)
        return go.n


async def until_logged(store: Store, run_id: str, kind: str, count: int = 1) -> None:
    """Until the run's log holds ``count`` records (steps or events) of ``kind``."""
    while True:
        try:
            log = await store.read_log(run_id)
        except LookupError:
            log = []
        if sum(isinstance(r, StepRecord | EventRecord) and r.kind == kind for r in log) >= count:
            return
        await anyio.sleep(0.005)


# --- ids ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("parent", "step", "expected"),
    [
        ("lead", "0", "lead.child-0"),
        ("lead", "draft.0/review.1@2/3", "lead.child-draft.0-review.1-a2-3"),
    ],
)
def test_a_childs_id_comes_from_its_parents_id_and_step(
    parent: str, step: str, expected: str
) -> None:
    assert child_run_id(parent, step) == expected


@pytest.mark.parametrize(
    ("parent", "step"),
    [("p" * 128, "0"), ("a" * 63 + ".b", "0"), ("lead", "odd phase!.0/1"), ("lead", "x..y.0/1")],
)
def test_a_child_id_that_would_not_fit_or_be_safe_is_hashed_and_valid(
    parent: str, step: str
) -> None:
    child = child_run_id(parent, step)
    assert validate_run_id(child) == child
    assert child != child_run_id(parent, step + "0")  # distinct steps, distinct children


# --- live -----------------------------------------------------------------------------


async def test_a_childs_result_reaches_its_parent_typed() -> None:
    store = MemoryStore()
    Double.runs.clear()
    async with Runtime(store=store, config=FAST) as runtime:
        report = await runtime.run(One, 21, run_id="p")
        assert report == Report(child=42, run_id="p.child-0")
        child = await store.read_run("p.child-0")
        assert (child.parent_run, child.parent_step, child.parent) == ("p", "0", None)
        assert child.status is RunStatus.COMPLETED
        assert (await store.read_run("p")).parent_run is None
        # a run of its own: its result is there for anyone who asks
        assert await runtime.result("p.child-0") == 42
    assert Double.runs == [21]


async def test_children_started_together_run_in_parallel() -> None:
    store = MemoryStore()
    async with Runtime(store=store, config=FAST) as runtime:
        handle = await runtime.start(Pair, None, run_id="pair")
        a, b = "pair.child-0", "pair.child-1"
        await until_logged(store, a, "wait_requested")
        await until_logged(store, b, "wait_requested")
        await runtime.signal(b, Go(20))
        assert await runtime.handle(b).result() == 22  # b ends while a still waits
        assert runtime.handle(a).status is RunStatus.RUNNING
        await runtime.signal(a, Go(10))
        assert await handle.result() == [11, 22]


async def test_a_failed_child_raises_step_failed_error_in_its_parent_live_and_replayed() -> None:
    store = MemoryStore()
    BrokenChild.runs.clear()
    async with Runtime(store=store, config=FAST) as runtime:
        await runtime.start(FailingParent, None, run_id="f")
        await until_logged(store, "f", "wait_requested", count=2)  # past the child's end
        assert (await store.read_run("f.child-0")).status is RunStatus.FAILED
    async with Runtime(store=store, config=FAST) as runtime:
        await runtime.signal("f", Go(0))
        said = "ValueError|child run 'f.child-0' failed: bad draft 'd1'"
        assert await runtime.recover() == {"f": said}  # replayed: the same error
    assert BrokenChild.runs == ["d1"]


async def test_a_parent_replayed_after_its_child_finished_does_not_run_the_child_again() -> None:
    store = MemoryStore()
    Double.runs.clear()
    async with Runtime(store=store, config=FAST) as runtime:
        await runtime.start(ThenWait, 4, run_id="t")
        await until_logged(store, "t", "wait_requested", count=2)  # past the child's result
    assert (await store.read_run("t")).status is RunStatus.INTERRUPTED
    async with Runtime(store=store, config=FAST) as runtime:
        await runtime.signal("t", Go(1))
        assert await runtime.recover() == {"t": 9}
    assert Double.runs == [4]
    ends = [e for e in await read_messages(store, "t") if e.type == child_signal("t.child-0")]
    assert len(ends) == 1


async def test_a_lost_end_signal_is_posted_again_by_the_parents_reattach(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = MemoryStore()

    async def lost(self: RuntimeChildren, *args: object) -> None:
        """The child's driver died between the child's end and the post."""

    with monkeypatch.context() as patch:
        patch.setattr(RuntimeChildren, "_post_when_ended", lost)
        async with Runtime(store=store, config=FAST) as runtime:
            await runtime.start(Waiting, 5, run_id="w")
            await until_logged(store, "w", "wait_requested")  # the parent waits for the child
            await until_logged(store, "w.child-0", "wait_requested")
            await runtime.signal("w.child-0", Go(1))
            assert await runtime.handle("w.child-0").result() == 6
    assert (await store.read_run("w")).status is RunStatus.INTERRUPTED
    assert await read_messages(store, "w") == []  # lost
    async with Runtime(store=store, config=FAST) as runtime:
        assert await runtime.recover() == {"w": 6}
    child = await store.read_run("w.child-0")
    await post_end(store, child, "w", "again")  # a repeat adds nothing
    ends = await read_messages(store, "w")
    assert [e.type for e in ends] == [child_signal("w.child-0")]


async def test_recover_takes_an_orphaned_parent_and_child_together_driving_the_child_once() -> None:
    store = MemoryStore()
    async with Runtime(store=store, config=FAST) as runtime:
        await runtime.start(Waiting, 7, run_id="o")
        await until_logged(store, "o.child-0", "wait_requested")
        await until_logged(store, "o", "wait_requested")
    for run_id in ("o", "o.child-0"):
        assert (await store.read_run(run_id)).status is RunStatus.INTERRUPTED
    async with Runtime(store=store, config=FAST) as runtime:
        await runtime.signal("o.child-0", Go(1))
        # the parent's re-attach and recover() both reach for the child: the claim
        # decides (recover() reports the child only if it was the one to drive it)
        results = await runtime.recover()
        assert results["o"] == 8
        assert results.get("o.child-0", 8) == 8
        assert await runtime.result("o.child-0") == 8
    child = await store.read_run("o.child-0")
    assert (child.status, child.attempt) == (RunStatus.COMPLETED, 1)  # taken over once
    ends = [r for r in await store.read_log("o.child-0") if isinstance(r, EventRecord)]
    assert [e.kind for e in ends].count("run_end") == 1


@pytest.mark.parametrize("policy", ["cancel", "abandon"])
async def test_a_cancelled_parent_cancels_its_unfinished_child_unless_it_abandons_it(
    policy: str,
) -> None:
    store = MemoryStore()
    async with Runtime(store=store, config=FAST) as runtime:
        await runtime.start(Abandoning, policy, run_id="c")
        await until_logged(store, "c.child-0", "wait_requested")
        await until_logged(store, "c", "wait_requested")
        await runtime.cancel("c")
        assert (await store.read_run("c")).status is RunStatus.CANCELLED
        child = runtime.handle("c.child-0")
        if policy == "cancel":
            await child.wait()
            assert child.status is RunStatus.CANCELLED
        else:
            await runtime.signal("c.child-0", Go(2))
            assert await child.result() == 3


# --- a real crash -----------------------------------------------------------------------


async def test_a_child_run_survives_a_sigkill_in_its_middle_and_its_work_runs_once(
    tmp_path: Path, anyio_backend_name: str
) -> None:
    """The owner of parent and child is SIGKILLed mid-child; one recover() finishes both."""
    store_dir = tmp_path / "store"
    work_log = tmp_path / "work.log"
    command = [
        sys.executable,
        "-m",
        "tests.runtime.workflow.children_child",
        str(store_dir),
        str(work_log),
        anyio_backend_name,
    ]
    with anyio.fail_after(60):
        async with await anyio.open_process(command, env=child_env()) as process:
            assert process.stdout is not None
            stream = TextReceiveStream(process.stdout)
            seen = ""
            while "WAITING\n" not in seen:
                seen += await stream.receive()
            process.kill()  # SIGKILL, while the child run waits
            await process.wait()
        async with Runtime(store=FileStore(store_dir), config=FAST) as runtime:
            for run_id in (LEAD, CHECK):
                assert (await runtime.store.read_run(run_id)).status is RunStatus.RUNNING
            await runtime.signal(CHECK, Go(5))  # kept for the recovery
            # both are orphans: the parent's re-attach and recover() drive the child once
            results = await runtime.recover()
            assert results[LEAD] == "lead:15"
            assert results.get(CHECK, 15) == 15  # reported if recover() drove it, not the parent
            assert await runtime.result(CHECK) == 15
            assert await runtime.run(Lead, Job(1, str(work_log)), run_id=LEAD) == "lead:15"
    assert (await anyio.Path(work_log).read_text()).split() == ["1"]


# --- docs ------------------------------------------------------------------------------


# --- the CLI ---------------------------------------------------------------------------


def test_actorflow_runs_shows_a_childs_parent_run(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from actorflow.cli import EXIT_CODES, app

    async def two_runs() -> None:
        async with Runtime(store=FileStore(tmp_path), config=FAST) as runtime:
            await runtime.run(One, 1, run_id="p")

    anyio.run(two_runs)
    runner = CliRunner()
    table = runner.invoke(app, ["runs", "--store", str(tmp_path)], env={"COLUMNS": "250"})
    assert table.exit_code == EXIT_CODES["ok"], table.output
    assert "parent run" in table.output
    listed = runner.invoke(app, ["runs", "--store", str(tmp_path), "--json"])
    rows = {r["run_id"]: r["parent_run"] for r in json.loads(listed.stdout)}
    assert rows == {"p": None, "p.child-0": "p"}
