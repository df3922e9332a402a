"""``crash_and_recover``: runs that pause, and crash points past a run's end."""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

import msgspec
import pytest

from actorflow import Orchestrator, Request, RunContext, Specialist, handler, phase
from actorflow.errors import MissingResponseError
from actorflow.storage import FileStore, MemoryStore, StepRecord
from actorflow.testing import crash_and_recover, run_in_memory

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from actorflow.storage import Store
    from actorflow.testing import CrashOutcome


class Entry(Request[int], frozen=True):
    text: str


class Entries(msgspec.Struct):
    items: list[str] = []


class Clerk(Specialist):
    __actorflow_name__ = "tests.testing.Clerk"
    state: Entries

    @handler
    async def write(self, entry: Entry) -> int:
        self.state.items.append(entry.text)
        return len(self.state.items)


class TwoApprovals(Orchestrator):
    """Work, a pause, more work, a second pause, more work."""

    __actorflow_name__ = "tests.testing.TwoApprovals"

    @phase
    async def draft(self, ctx: RunContext, text: str) -> int:
        clerk = await ctx.spawn(Clerk, name="clerk")
        await ctx.ask(clerk, Entry(text))
        count: int = await ctx.ask(clerk, Entry(text + "!"))
        return count

    async def run(self, ctx: RunContext, text: str) -> list[str]:
        n = await self.draft(ctx, text)
        first = await ctx.wait_for_input(f"publish {n} entries?")
        clerk = await ctx.spawn(Clerk, name="clerk")
        await ctx.ask(clerk, Entry(first))
        second = await ctx.wait_for_input("notify the readers?")
        count = await ctx.ask(clerk, Entry(second))
        return [first, second, str(count)]


RESPONSES = {"publish 2 entries?": "yes", "notify the readers?": "later"}
EXPECTED = ["yes", "later", "4"]


async def every_crash_point(store_for: Callable[[int], Store] | None = None) -> list[CrashOutcome]:
    """``crash_and_recover`` at every point until one is past the end of the log."""
    outcomes = []
    for after in itertools.count(1):
        store = store_for(after) if store_for is not None else None
        try:
            outcome = await crash_and_recover(
                TwoApprovals, "draft", crash_after=after, store=store, responses=RESPONSES
            )
        finally:
            if store is not None:
                await store.aclose()
        outcomes.append(outcome)
        if not outcome.crashed:
            return outcomes
    raise AssertionError("unreachable")


async def test_a_pausing_run_crashed_at_every_point_recovers_the_uninterrupted_result() -> None:
    outcomes = await every_crash_point()
    for after, outcome in enumerate(outcomes, 1):
        assert outcome.expected == EXPECTED
        assert outcome.recovered == EXPECTED, f"crash after {after} records"
    assert all(o.crashed for o in outcomes[:-1])
    # the log's records: 4 steps, 2 waits requested and answered, 2 spawns' worth
    assert len(outcomes) > 10, "the sweep crosses both pauses and both answers"


async def test_a_pausing_run_crashed_at_every_point_on_disk(tmp_path: Path) -> None:
    def store_for(after: int) -> FileStore:
        return FileStore(tmp_path / f"crash-{after}")

    outcomes = await every_crash_point(store_for)
    assert [o.recovered for o in outcomes] == [EXPECTED] * len(outcomes)


async def test_crash_points_land_while_the_responses_are_recorded() -> None:
    store = MemoryStore()
    await run_in_memory(TwoApprovals, "draft", responses=RESPONSES, store=store, run_id="r")
    log = await store.read_log("r")
    answers = [i + 1 for i, r in enumerate(log) if isinstance(r, StepRecord) and r.kind == "input"]
    assert len(answers) == 2
    for after in answers:  # the crash lands on the record of the answer itself
        outcome = await crash_and_recover(
            TwoApprovals, "draft", crash_after=after, responses=RESPONSES
        )
        assert outcome.crashed
        assert outcome.recovered == EXPECTED, f"crash after {after} records"


async def test_a_function_of_the_prompt_answers_too() -> None:
    asked: list[str] = []

    def respond(prompt: str) -> str:
        asked.append(prompt)
        return "yes" if prompt.startswith("publish") else "later"

    outcome = await crash_and_recover(TwoApprovals, "draft", crash_after=3, responses=respond)
    assert outcome.crashed
    assert outcome.recovered == outcome.expected == EXPECTED
    assert set(asked) == set(RESPONSES)


async def test_a_pause_without_a_response_says_which_prompt_to_answer() -> None:
    with pytest.raises(MissingResponseError, match="'publish 2 entries\\?'") as info:
        await crash_and_recover(TwoApprovals, "draft", crash_after=3)
    assert "responses=" in str(info.value)
    assert info.value.prompt == "publish 2 entries?"
    with pytest.raises(MissingResponseError, match="notify the readers"):
        await run_in_memory(TwoApprovals, "draft", responses={"publish 2 entries?": "yes"})


async def test_a_crash_point_past_the_end_gives_the_result_to_compare() -> None:
    outcome = await crash_and_recover(TwoApprovals, "draft", crash_after=10**6, responses=RESPONSES)
    assert not outcome.crashed
    assert outcome.recovered == outcome.expected == EXPECTED
    assert outcome.replayed == 0


async def test_the_recovery_replays_what_was_recorded_before_the_crash() -> None:
    outcomes = await every_crash_point()
    assert max(o.replayed for o in outcomes) > 0


class Tally(Orchestrator):
    """No pause: two entries."""

    __actorflow_name__ = "tests.testing.Tally"

    async def run(self, ctx: RunContext, text: str) -> int:
        clerk = await ctx.spawn(Clerk, name="clerk")
        await ctx.ask(clerk, Entry(text))
        count: int = await ctx.ask(clerk, Entry(text))
        return count


async def test_past_the_end_of_a_run_that_never_pauses_recovered_equals_expected() -> None:
    outcome = await crash_and_recover(Tally, "x", crash_after=10**6)
    assert not outcome.crashed
    assert outcome.recovered == outcome.expected == 2
