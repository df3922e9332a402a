"""``compare_runs``: two real runs side by side, on the memory and the file store.

A run and a fork of it with an agent's state edited share their past (equal)
and part where the edit shows (the second phase's reply, the decision, the
result); two runs of different inputs differ from the first step; a run
compared with itself differs nowhere. A fork whose parent's log retention
pruned, or whose parent is deleted, still matches its past, from the
checkpoints kept.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec
import pytest

from actorflow import Runtime
from actorflow.errors import LogPrunedError, RunNotFoundError
from actorflow.runtime import (
    Compared,
    ComparedRun,
    FieldChange,
    RunComparison,
    compare_runs,
)
from actorflow.runtime.workflow._compare import _merged
from actorflow.storage import FileStore, ForkEdit, MemoryStore, RunStatus, SqliteStore
from tests.runtime.workflow.fork_flow import Ledger

if TYPE_CHECKING:
    from pathlib import Path

    from actorflow.storage import Store

AnyStore = MemoryStore | FileStore | SqliteStore


@pytest.fixture(params=["memory", "file", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> AnyStore:
    if request.param == "sqlite":
        return SqliteStore(tmp_path / "store.db")
    return MemoryStore() if request.param == "memory" else FileStore(tmp_path / "store")


async def run_and_fork(store: Store, edit: dict[str, object] | None) -> str:
    """``source`` run to its end, and ``forked`` from the end of its first phase."""
    async with Runtime(store=store) as runtime:
        await runtime.run(Ledger, "a", run_id="source")
    infos = await store.list_snapshots("source")
    checkpoint = next(i.snapshot_id for i in infos if i.trigger == "phase_end")
    async with Runtime(store=store) as runtime:
        handle = await runtime.fork("source", checkpoint, edit=edit, new_run_id="forked")
        await handle.result()
    return checkpoint


def by_label(items: tuple[Compared, ...]) -> dict[str, list[Compared]]:
    found: dict[str, list[Compared]] = {}
    for item in items:
        found.setdefault(item.label, []).append(item)
    return found


async def test_a_fork_with_an_edit_shares_its_past_and_parts_where_the_edit_shows(
    store: AnyStore,
) -> None:
    async with store:
        checkpoint = await run_and_fork(store, {"clerk": {"entries": ["x", "y"], "prefix": "> "}})
        comparison = await compare_runs(store, "source", "forked")
    assert comparison.differs
    assert comparison.a == ComparedRun(
        run_id="source", workflow="tests.fork_flow.Ledger", status=RunStatus.COMPLETED
    )
    assert (comparison.b.parent, comparison.b.parent_snapshot) == ("source", checkpoint)
    assert [e.agent for e in comparison.b.fork_edits] == ["clerk"]
    assert isinstance(comparison.b.fork_edits[0], ForkEdit)
    assert comparison.status == Compared(key="status", label="status", a="completed", b="completed")
    assert comparison.result.differs
    assert comparison.result.changes == (
        FieldChange(field="<value>", a=["a", "A"], b=["x", "y", "> A"]),
    )
    assert not comparison.error.differs
    # the first phase is the shared past: equal; the second ran on the edited state
    [opened, closed] = comparison.phases
    assert (opened.label, opened.differs, opened.a) == ("open", False, ["a"])
    assert (closed.label, closed.differs) == ("close", True)
    assert (closed.a, closed.b) == (["a", "A"], ["x", "y", "> A"])
    asks = by_label(comparison.steps)["ask clerk"]
    assert [(s.a, s.b, s.differs) for s in asks] == [
        (["a"], ["a"], False),
        (["a", "A"], ["x", "y", "> A"], True),
    ]
    assert all(s.in_a and s.in_b for s in comparison.steps), "the same steps, by id"
    [decision] = comparison.decisions
    assert decision.label == "close"
    assert decision.changes == (FieldChange(field="description", a="2 entries", b="3 entries"),)


async def test_a_run_compared_with_itself_differs_nowhere(store: AnyStore) -> None:
    async with store:
        await run_and_fork(store, None)
        comparison = await compare_runs(store, "source", "source")
        unedited = await compare_runs(store, "source", "forked")
    assert not comparison.differs
    assert not any(c.differs for c in (*comparison.phases, *comparison.steps))
    # a fork without an edit does the same again: only its clock readings could differ
    assert not unedited.result.differs
    assert not any(p.differs for p in unedited.phases)
    assert unedited.b.fork_edits == ()


async def test_runs_of_different_inputs_differ_from_their_first_step(store: AnyStore) -> None:
    async with store, Runtime(store=store) as runtime:
        await runtime.run(Ledger, "a", run_id="one")
        await runtime.run(Ledger, "b", run_id="two")
        comparison = await compare_runs(store, "one", "two")
    first_ask = by_label(comparison.steps)["ask clerk"][0]
    assert (first_ask.a, first_ask.b, first_ask.differs) == (["a"], ["b"], True)
    assert all(p.differs for p in comparison.phases)
    assert comparison.b.parent is None


async def test_a_fork_whose_parent_log_was_pruned_matches_from_the_checkpoints_kept() -> None:
    # the memory store cuts a log at any position; the file store by whole segments only
    store = MemoryStore()
    async with store:
        await run_and_fork(store, {"clerk": {"entries": ["x"]}})
        before = await compare_runs(store, "source", "forked")
        # as retention does: below what the checkpoint the fork started from, the first
        # kept, needs (its position, or its log window's start)
        checkpoint = (await store.read_run("forked")).parent_snapshot
        infos = await store.list_snapshots("source")
        kept = next(i for i in infos if i.snapshot_id == checkpoint)
        for info in infos:
            if info.position < kept.position:
                await store.delete_snapshot("source", info.snapshot_id)
        window = (await store.read_snapshot("source", kept.snapshot_id)).window
        needed = kept.position if window is None else window.start
        assert await store.truncate_log_before("source", needed)
        with pytest.raises(LogPrunedError):
            await store.read_log("source", 0)
        after = await compare_runs(store, "source", "forked")
    assert after.phases == before.phases
    # the steps inside the phase before the checkpoint are gone from both
    assert {s.key for s in after.steps} < {s.key for s in before.steps}
    assert all(s.in_a and s.in_b for s in after.steps)
    assert after.result == before.result
    assert after.decisions == before.decisions


async def test_a_fork_whose_parent_is_deleted_still_has_its_past(store: AnyStore) -> None:
    async with store:
        await run_and_fork(store, {"clerk": {"entries": ["x"]}})
        async with Runtime(store=store) as runtime:
            infos = await store.list_snapshots("forked")
            first = next(i.snapshot_id for i in infos if i.trigger == "fork")
            again = await runtime.fork("forked", first, new_run_id="again")
            await again.result()
        await store.delete_run("source")
        comparison = await compare_runs(store, "forked", "again")
    [opened, closed] = comparison.phases
    assert opened.label == "open"
    assert opened.in_a
    assert opened.in_b
    assert not opened.differs
    assert not closed.differs


async def test_an_unknown_run_is_named(store: AnyStore) -> None:
    async with store:
        with pytest.raises(RunNotFoundError, match="'nope'"):
            await compare_runs(store, "nope", "nope")


async def test_a_comparison_is_plain_data() -> None:
    store = MemoryStore()
    await run_and_fork(store, {"clerk": {"entries": ["x"]}})
    comparison = await compare_runs(store, "source", "forked")
    again = msgspec.json.decode(msgspec.json.encode(comparison), type=RunComparison)
    assert again == comparison


def test_each_runs_own_items_come_after_the_item_it_recorded_before_them() -> None:
    assert _merged(["a", "b", "c"], ["a", "x", "c", "y"]) == ["a", "x", "b", "c", "y"]
    assert _merged(["a", "b"], []) == ["a", "b"]
    assert _merged([], ["x", "y"]) == ["x", "y"]
    assert _merged(["a", "b"], ["b", "a"]) == ["a", "b"]
