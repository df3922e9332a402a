"""Queries: a run as its records describe it, read from any process, owning nothing.

``query_run`` reads the run's manifest, builds a ``RunView`` the way recovery
does (``load_view``: the newest valid snapshot plus the log after it) and
reads the run's inbox, and returns what they say as a ``RunQuery``. It takes
no claim or lease and writes nothing: it works while another process owns
the run and appends to it, and after that process crashed. A record being
written while it reads (a torn tail in a file store's log) is read as not
written yet, and left where it is: only the log's writer cuts a torn tail.

Nothing of the user's code is needed to build a query; decoding an agent's
state into its class (``RunQuery.state``) needs that class, nothing more.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, TypeVar

import anyio
import msgspec

from actorflow.errors import InboxUnsupportedError
from actorflow.runtime.workflow._inbox import InboxKind, classify
from actorflow.runtime.workflow._replay import RunView, decode_agent_state, load_view
from actorflow.runtime.workflow._wait_records import PendingWait, pending_waits
from actorflow.storage import (
    AgentSnapshot,
    DecisionRecord,
    ErrorInfo,
    InboxEntry,
    RunStatus,
    read_messages,
    validate_run_id,
)

if TYPE_CHECKING:
    from actorflow.storage import RunManifest, Store

__all__ = ["RunQuery", "query_run"]

S = TypeVar("S")


def _ignore(event: str, **fields: object) -> None:
    """``load_view``'s reports (a checkpoint restored or skipped): a query makes none."""


class RunQuery(msgspec.Struct, frozen=True, kw_only=True, dict=True):
    """One run as its stored records describe it, at log position ``position``.

    Made by :meth:`Runtime.query` in any process, without owning the run: it
    is what the run had durably recorded when it was read, so a live run may
    have gone on since (query again for news). Plain data: compare it, or
    encode it with ``msgspec`` (``state`` is the one method that reads).

    Attributes:
        run_id: the run.
        workflow: its orchestrator's registered name.
        status: where it stands, from its manifest (``running`` while its
            owner works on it, also if that owner has just died: ``recover``
            sees that it is an orphan).
        phase: the phase it is in, or was last in: the phase of its newest
            logged step (a finished phase's name once it ended), else of its
            newest snapshot, else from its manifest; ``actorflow runs`` shows the same.
        position: how many of the run's log records the query reflects: the
            durable log position it is as of (records from it on were not
            written yet when it was read).
        as_of: when it was read (``time.time()``).
        owner: the process that holds or last held the run (``host:pid:...``).
        agents: each agent's latest recorded snapshot: its class's registered
            name, status, latest evaluator confidence, and ``state``, the
            ``StateRef`` of its latest recorded state (inline bytes, or the
            address of a blob); :meth:`state` decodes it.
        decisions: the decisions recorded, in log order.
        metrics: the run's counters (``steps``, and what its steps reported).
        waits: the waits that started and have not resolved, in log order:
            the signal type each takes, its deadline and prompt.
        inbox: the messages sent to the run (signals, ``resume`` answers,
            updates, cancel requests, children's ends: each entry's ``kind``
            says which) that it has not taken yet, in the order they were
            sent; the replies it posted to updates are left out.
        phases: the ids of the phases that have finished, in the order they did.
        result: a completed run's result, as MessagePack bytes
            (``runtime.result`` decodes it to the orchestrator's return type).
        error: what ended a failed, cancelled or blocked run.

    .. versionadded:: 0.3
    """

    run_id: str
    workflow: str
    status: RunStatus
    phase: str | None
    position: int
    as_of: float
    owner: str | None = None
    agents: dict[str, AgentSnapshot] = {}
    decisions: tuple[DecisionRecord, ...] = ()
    metrics: dict[str, float] = {}
    waits: tuple[PendingWait, ...] = ()
    inbox: tuple[InboxEntry, ...] = ()
    phases: tuple[str, ...] = ()
    result: bytes | None = None
    error: ErrorInfo | None = None

    async def state(self, agent: str, state_cls: type[S]) -> S | None:
        """Agent ``agent``'s latest recorded state, as an instance of ``state_cls``.

        Upgraded from the version it was stored with, as a recovery would
        (``upgrade_state``). A state kept as a blob is read from the store the
        query was made with. None when the agent has recorded no state yet.

        Raises:
            KeyError: the run has no agent of that name.
            IncompatibleStateError: the stored state does not fit ``state_cls``.
        """
        ref = self.agents[agent].state
        if ref is None:
            return None
        data = ref.data
        if data is None:
            store: Store | None = self.__dict__.get("_store")
            if store is None:
                raise LookupError(
                    f"agent {agent!r}'s state is a blob and this query has no store to read it "
                    "from (it was not made by `runtime.query`)"
                )
            data = await store.get_blob(self.run_id, ref.blob)
        state: S = decode_agent_state(data, state_cls, ref, agent)
        return state


# Resolves (and caches) the annotations while this module's names are in
# scope: ``actorflow.runtime`` re-exports the class under its own name, where
# ``msgspec`` could not find them any more to decode a query (from JSON, say).
msgspec.json.Decoder(RunQuery)


async def query_run(store: Store, run_id: str) -> RunQuery:
    """The run ``run_id`` as ``store`` holds it now; see :meth:`Runtime.query`.

    The manifest first (an unknown run ends there), then the view and the
    inbox side by side: on S3 their requests overlap.

    Raises:
        InvalidRunIdError: ``run_id`` is not a valid run id.
        RunNotFoundError: no such run.
        CorruptedDataError: a record the view needs is damaged (before the tail).
    """
    validate_run_id(run_id)
    manifest = await store.read_run(run_id)
    views: list[RunView] = []
    inboxes: list[list[InboxEntry]] = []
    failures: list[BaseException] = []

    async def view() -> None:
        try:
            views.append((await load_view(store, run_id, _ignore))[0])
        except Exception as exc:  # raised below as it is, not in an ExceptionGroup
            failures.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(view)
        try:
            inboxes.append(await read_messages(store, run_id))
        except InboxUnsupportedError:
            inboxes.append([])
        except Exception as exc:
            failures.append(exc)
    if failures:
        raise failures[0]
    return _query(store, manifest, views[0], inboxes[0])


def _untaken(entries: list[InboxEntry], taken: set[int]) -> tuple[InboxEntry, ...]:
    """The entries the run has not taken, each with its kind (also those of 0.3), no replies."""
    found = []
    for entry in entries:
        kind = classify(entry)
        if entry.seq in taken or kind is InboxKind.REPLY:
            continue
        if kind is not None and entry.kind != kind.value:
            entry = msgspec.structs.replace(entry, kind=kind.value)
        found.append(entry)
    return tuple(found)


def _query(
    store: Store, manifest: RunManifest, view: RunView, entries: list[InboxEntry]
) -> RunQuery:
    taken = view.inbox_taken
    ended = manifest.status.finished  # a wait a cancelled run left open waits for nothing
    query = RunQuery(
        run_id=manifest.run_id,
        workflow=manifest.workflow,
        status=manifest.status,
        phase=view.logged_phase if view.logged_phase is not None else manifest.phase,
        position=view.position,
        as_of=time.time(),
        owner=manifest.owner,
        agents=view.agents,
        decisions=tuple(view.decisions),
        metrics=view.metrics,
        waits=() if ended else tuple(pending_waits(view.events, view.steps)),
        inbox=_untaken(entries, taken),
        phases=tuple(view.phases),
        result=manifest.result if manifest.status is RunStatus.COMPLETED else None,
        error=manifest.error,
    )
    query.__dict__["_store"] = store
    return query
