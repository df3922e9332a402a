"""``runtime.fork(..., edit={agent: state})``: a fork that starts with an agent's state replaced.

The new state, a value of the agent's state type or plain data converted to
it, is checked before anything is stored; the fork runs on from the
checkpoint with it, its manifest records what was edited, and a run forked
without an edit is as before. On the memory store, the file store, and an
encrypted file store.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

import msgspec
import pytest

from actorflow import Runtime
from actorflow.errors import (
    ForkEditError,
    InvalidStateEditError,
    RunError,
    UnknownEditedAgentError,
)
from actorflow.runtime.workflow._agents import INLINE_STATE_BYTES
from actorflow.storage import Codec, FileStore, ForkEdit, MemoryStore, RunManifest
from tests.runtime.workflow.fork_flow import Book, Ledger

if TYPE_CHECKING:
    from pathlib import Path

    from actorflow.storage import Snapshot, Store

KEY = bytes(range(32))
AnyStore = MemoryStore | FileStore


@pytest.fixture(params=["memory", "file", "sealed"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> AnyStore:
    if request.param == "memory":
        return MemoryStore()
    codec = Codec(keys={"k1": KEY}) if request.param == "sealed" else None
    return FileStore(tmp_path / "store", codec=codec)


async def first_phase_end(store: Store, run_id: str) -> str:
    infos = await store.list_snapshots(run_id)
    return next(i.snapshot_id for i in infos if i.trigger == "phase_end")


async def fork_snapshot(store: Store, run_id: str) -> Snapshot:
    infos = await store.list_snapshots(run_id)
    first = next(i.snapshot_id for i in infos if i.trigger == "fork")
    return await store.read_snapshot(run_id, first)


async def run_ledger(store: Store) -> str:
    """Run ``Ledger`` to its end; the end of its first phase, once written.

    Leaving the runtime waits for the phase ends still queued to be written.
    """
    async with Runtime(store=store) as runtime:
        assert await runtime.run(Ledger, "a", run_id="source") == ["a", "A"]
    return await first_phase_end(store, "source")


async def test_a_fork_with_an_edited_state_runs_on_with_it(store: AnyStore) -> None:
    async with store:
        checkpoint = await run_ledger(store)
        async with Runtime(store=store) as runtime:
            edit = {"entries": ["x", "y"], "prefix": "> "}
            handle = await runtime.fork(
                "source", checkpoint, edit={"clerk": edit}, new_run_id="edited"
            )
            # the second phase's clerk starts from the edited book
            assert await handle.result() == ["x", "y", "> A"]
            manifest = await store.read_run("edited")
            snapshot = await fork_snapshot(store, "edited")
    ref = snapshot.agents["clerk"].state
    assert ref is not None
    assert ref.data is not None
    data = msgspec.msgpack.encode(Book(entries=["x", "y"], prefix="> "))
    assert ref.data == data
    assert manifest.fork_edits == (
        ForkEdit(
            agent="clerk",
            type="tests.fork_flow.Clerk",
            state_hash=hashlib.sha256(data).hexdigest(),
        ),
    )
    assert (manifest.parent, manifest.parent_snapshot) == ("source", checkpoint)


async def test_a_new_state_may_be_a_value_of_the_state_type(store: AnyStore) -> None:
    async with store:
        checkpoint = await run_ledger(store)
        async with Runtime(store=store) as runtime:
            handle = await runtime.fork(
                "source", checkpoint, edit={"clerk": Book(entries=["kept"], pages=7)}
            )
            assert await handle.result() == ["kept", "A"]


async def test_a_large_new_state_is_stored_as_a_blob_of_the_fork(store: AnyStore) -> None:
    big = ["e" * 100] * (INLINE_STATE_BYTES // 50)
    async with store:
        checkpoint = await run_ledger(store)
        async with Runtime(store=store) as runtime:
            handle = await runtime.fork(
                "source", checkpoint, edit={"clerk": {"entries": big}}, new_run_id="big"
            )
            assert await handle.result() == [*big, "A"]
            snapshot = await fork_snapshot(store, "big")
            ref = snapshot.agents["clerk"].state
            assert ref is not None
            assert ref.data is None
            assert ref.blob in await store.list_blobs("big")


async def everything(store: Store) -> tuple[list[str], list[str]]:
    runs = sorted(m.run_id for m in await store.list_runs())
    return runs, await store.list_blobs("source")


@pytest.mark.parametrize(
    ("edit", "path", "problem"),
    [
        ({"entries": "not a list"}, "$.entries", "Expected `array`, got `str`"),
        ({"entries": ["ok", 3]}, "$.entries[1]", "Expected `str`, got `int`"),
        ({"pages": "many"}, "$.pages", "Expected `int`, got `str`"),
        ({"entires": ["typo"]}, "$.entires", "no such field"),
        ([1, 2], "$", "Expected `object`, got `array`"),
        (Book(entries=[1]), "$.entries[0]", "Expected `str`, got `int`"),  # type: ignore[list-item]
    ],
)
async def test_a_new_state_that_does_not_fit_is_refused_before_anything_is_stored(
    store: AnyStore, edit: object, path: str, problem: str
) -> None:
    async with store:
        checkpoint = await run_ledger(store)
        async with Runtime(store=store) as runtime:
            before = await everything(store)
            with pytest.raises(InvalidStateEditError) as info:
                await runtime.fork("source", checkpoint, edit={"clerk": edit}, new_run_id="bad")
            assert await everything(store) == before
    error = info.value
    assert isinstance(error, ForkEditError | ValueError | RunError)
    assert (error.agent, error.path, error.problem) == ("clerk", path, problem)
    assert (error.run_id, error.checkpoint, error.state_type) == ("source", checkpoint, "Book")
    message = str(error)
    assert "'clerk'" in message
    assert path in message
    assert problem in message
    assert "nothing was stored" in message


async def test_an_edit_of_an_agent_the_checkpoint_lacks_is_refused(store: AnyStore) -> None:
    async with store:
        checkpoint = await run_ledger(store)
        async with Runtime(store=store) as runtime:
            before = await everything(store)
            with pytest.raises(UnknownEditedAgentError) as info:
                await runtime.fork("source", checkpoint, edit={"clark": {}}, new_run_id="bad")
            assert await everything(store) == before
    assert isinstance(info.value, LookupError)
    assert info.value.agent == "clark"
    assert info.value.known == ("clerk",)
    assert "no such agent (its agents: 'clerk')" in str(info.value)


async def test_a_fork_without_an_edit_is_as_before(store: AnyStore) -> None:
    async with store:
        checkpoint = await run_ledger(store)
        async with Runtime(store=store) as runtime:
            handle = await runtime.fork("source", checkpoint, new_run_id="plain")
            assert await handle.result() == ["a", "A"]
            manifest = await store.read_run("plain")
            empty = await runtime.fork("source", checkpoint, edit={}, new_run_id="empty")
            assert await empty.result() == ["a", "A"]
    assert manifest.fork_edits == ()


async def test_an_edited_fork_recovers_with_its_edit(tmp_path: Path) -> None:
    """The fork's first snapshot is the only copy of the edit: a new process reads it back."""
    store = FileStore(tmp_path / "store")
    async with store:
        checkpoint = await run_ledger(store)
        async with Runtime(store=store) as runtime:
            handle = await runtime.fork(
                "source", checkpoint, edit={"clerk": {"entries": ["z"]}}, new_run_id="again"
            )
            assert await handle.result() == ["z", "A"]
    async with FileStore(tmp_path / "store") as reopened, Runtime(store=reopened) as runtime:
        forked = await runtime.fork("again", "0000-fork-of-" + checkpoint)
        assert await forked.result() == ["z", "A"]


def test_a_manifest_with_fork_edits_reads_in_code_that_predates_them() -> None:
    class OlderManifest(msgspec.Struct, kw_only=True, tag_field="tag", tag="manifest"):
        run_id: str
        workflow: str
        input: bytes
        input_hash: str

    edit = ForkEdit(agent="clerk", type="T", state_hash="00")
    new = RunManifest(run_id="r", workflow="w", input=b"", input_hash="h", fork_edits=(edit,))
    older = msgspec.msgpack.decode(msgspec.msgpack.encode(new), type=OlderManifest)
    assert older.run_id == "r"
    again = msgspec.msgpack.decode(msgspec.msgpack.encode(older), type=RunManifest)
    assert again.fork_edits == ()
