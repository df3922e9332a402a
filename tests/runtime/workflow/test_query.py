"""Queries: ``runtime.query(run_id)`` reads a run from any process and never disturbs it.

A query is built from the newest snapshot and the log after it, plus the
run's inbox: live runs owned elsewhere (another store object, another
process), runs whose owner was SIGKILLed, paused and finished runs. A torn
or zero-filled log tail reads as not written yet and is never cut.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import anyio
import msgspec
import pytest
from anyio.streams.text import TextReceiveStream

from actorflow import Orchestrator, PendingWait, RunContext, RunQuery, Runtime
from actorflow.errors import InvalidRunIdError, RunNotFoundError, RunPaused
from actorflow.storage import FileStore, MemoryStore, RunStatus
from actorflow.storage.file._frames import scan
from tests.runtime.workflow.crash_parent import child_env
from tests.runtime.workflow.query_child import (
    BIG_NOTE,
    WAIT_SECONDS,
    Fix,
    Note,
    Tally,
    Watched,
    until_waiting,
)

if TYPE_CHECKING:
    from pathlib import Path


class Asks(Orchestrator):
    async def run(self, ctx: RunContext, _: None) -> str:
        return await ctx.wait_for_input("ship it?")


def _check_watched(query: RunQuery, *, sent: list[str]) -> None:
    """``query`` is ``Watched`` waiting for its ``Fix``, with ``sent`` notes in its inbox."""
    assert query.workflow == "tests.query.Watched"
    assert query.status is RunStatus.RUNNING
    assert query.phase == "prepare"
    assert query.phases == ("prepare.0",)
    assert sorted(query.agents) == ["big", "small"]
    assert {a.type for a in query.agents.values()} == {"tests.query.Clerk"}
    assert [(d.type, d.rationale, d.confidence) for d in query.decisions] == [
        ("wait", "a fix is needed", 0.5)
    ]
    assert query.metrics["steps"] == 5  # two spawns, three asks
    (wait,) = query.waits
    assert isinstance(wait, PendingWait)
    assert (wait.kind, wait.type, wait.prompt) == ("wait", "Fix", None)
    assert wait.deadline is not None
    assert 0 < wait.deadline - query.as_of <= WAIT_SECONDS
    assert [msgspec.msgpack.decode(e.payload, type=Note).text for e in query.inbox] == sent
    assert [e.type for e in query.inbox] == ["Note"] * len(sent)
    assert query.result is None
    assert query.error is None


async def _check_states(query: RunQuery) -> None:
    assert await query.state("small", Tally) == Tally(2, ["a", "b"])
    assert query.agents["big"].state is not None
    assert query.agents["big"].state.data is None  # kept as a blob: read through the store
    assert await query.state("big", Tally) == Tally(1, [BIG_NOTE])
    with pytest.raises(KeyError):
        await query.state("nobody", Tally)


async def test_a_live_run_owned_through_another_store_object(tmp_path: Path) -> None:
    async with Runtime(store=FileStore(tmp_path)) as owner:
        handle = await owner.start(Watched, None, run_id="live")
        await until_waiting(owner.store, "live")
        await owner.signal("live", Note("later"))  # no wait takes a Note
        async with Runtime(store=FileStore(tmp_path)) as reader:
            query = await reader.query("live")
            assert await reader.store.is_owned("live")  # still the owner's: nothing taken
        _check_watched(query, sent=["later"])
        assert query.owner == owner.owner
        assert query.position == len(await owner.store.read_log("live"))
        await _check_states(query)
        # the owner goes on untroubled: the query took nothing
        await owner.signal("live", Fix(7))
        assert await handle.result() == 7
    async with Runtime(store=FileStore(tmp_path)) as reader:
        done = await reader.query("live")
    assert done.status is RunStatus.COMPLETED
    assert done.waits == ()
    assert msgspec.msgpack.decode(done.result or b"") == 7
    assert [e.type for e in done.inbox] == ["Note"]  # sent, never taken
    assert done.position > query.position


async def test_a_paused_run_shows_its_prompt_and_a_query_round_trips() -> None:
    store = MemoryStore()
    async with Runtime(store=store) as runtime:
        with pytest.raises(RunPaused):
            await runtime.run(Asks, None, run_id="asks")
        query = await runtime.query("asks")
    assert query.status is RunStatus.PAUSED
    (wait,) = query.waits
    assert (wait.kind, wait.type, wait.prompt, wait.pause) == ("input", "str", "ship it?", True)
    again = msgspec.json.decode(msgspec.json.encode(query), type=RunQuery)
    assert again == query


async def test_unknown_runs_and_bad_ids_are_named_errors(tmp_path: Path) -> None:
    async with Runtime(store=FileStore(tmp_path)) as runtime:
        with pytest.raises(RunNotFoundError):
            await runtime.query("nope")
        with pytest.raises(InvalidRunIdError):
            await runtime.query("../etc")


def _segment(store_dir: Path, run_id: str) -> Path:
    (segment,) = sorted(store_dir.rglob("*.seg"))
    assert run_id in str(segment)
    return segment


async def test_a_sigkilled_owner_and_a_torn_tail(tmp_path: Path, anyio_backend_name: str) -> None:
    """A real owner (a child process) is queried live, then SIGKILLed; damage is left alone."""
    store_dir = tmp_path / "store"
    command = [
        sys.executable,
        "-m",
        "tests.runtime.workflow.query_child",
        str(store_dir),
        "child",
        anyio_backend_name,
    ]
    with anyio.fail_after(60):
        async with await anyio.open_process(command, env=child_env()) as child:
            assert child.stdout is not None
            buffered = ""
            async for chunk in TextReceiveStream(child.stdout):
                buffered += chunk
                if "\n" in buffered:
                    break
            assert buffered.startswith("WAITING"), buffered
            async with Runtime(store=FileStore(store_dir)) as reader:
                await reader.signal("child", Note("one"))
                live = await reader.query("child")
                _check_watched(live, sent=["one"])
                assert live.owner is not None
                assert f":{child.pid}:" in live.owner
                child.kill()  # SIGKILL: no cleanup, the segment keeps its zeros
                await child.wait()
                await reader.signal("child", Note("two"))
                segment = _segment(store_dir, "child")
                zeros = segment.read_bytes()
                assert zeros.endswith(b"\0" * 64)  # space set aside, never trimmed
                orphan = await reader.query("child")
                assert segment.read_bytes() == zeros
                # the frames' end, not ``rstrip``: a record may end with zero bytes itself
                written = scan(zeros, location=segment.name, last=True).end
                assert not zeros[written:].strip(b"\0")
                torn = zeros[:written] + b"\x17garbage, half a frame"
                segment.write_bytes(torn)
                after = await reader.query("child")
                assert segment.read_bytes() == torn  # read as not written yet, never cut
    for query in (orphan, after):
        _check_watched(query, sent=["one", "two"])
        assert query.position == live.position
        assert query.owner == live.owner
        await _check_states(query)
