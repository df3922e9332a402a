"""The replayer: what a recovery with today's code would do, stopped where the history ends.

A run's history (``RunHistory``: its manifest, the newest usable snapshot
with its history chunks put back inline, the log after it, its agents' state
blobs and the inbox entries it took) is read exactly as recovery reads it
(``load_view``'s order). A fresh orchestrator then runs from the top in
strict determinism mode with ``StepEnv.replaying`` set: every step with a
record is checked against it (``check_replay``) and its outcome fed back,
finished phases return their recorded results, and the first step with no
record ends the replay (``HistoryEnd``: a recovery would go on live there).
Agents are ``ReplayRef`` placeholders: none is started, none runs. Whatever
the engine writes meanwhile goes to a scratch ``MemoryStore``, never to the
store the history came from.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import msgspec

from actorflow._text import error_message
from actorflow.errors import (
    CorruptedDataError,
    NonDeterminismError,
    NondeterministicCallError,
    StorageError,
)
from actorflow.runtime.actors import Actor, ActorScope, ActorSystem, lookup, state_type
from actorflow.runtime.workflow._agents import RunAgents
from actorflow.runtime.workflow._config import RuntimeConfig
from actorflow.runtime.workflow._context import RunContext
from actorflow.runtime.workflow._determinism import Determinism, guarded
from actorflow.runtime.workflow._env import HistoryEnd, StepEnv
from actorflow.runtime.workflow._flow import FlowControl
from actorflow.runtime.workflow._outcomes import run_signature
from actorflow.runtime.workflow._recorder import Recorder
from actorflow.runtime.workflow._replay import RunView, _describe, call_site
from actorflow.runtime.workflow._replay_agents import ReplayPlacer, replay_ref
from actorflow.runtime.workflow._signals import SignalDesk
from actorflow.runtime.workflow._updates import UpdateRunner
from actorflow.runtime.workflow.steps import close_namespace
from actorflow.storage import (
    InboxEntry,
    LogRecord,
    LogWriter,
    MemoryStore,
    RunManifest,
    RunStatus,
    Snapshot,
    SupportsInbox,
    read_messages,
    resolve_snapshot,
)
from actorflow.storage import decode_value as decode
from actorflow.storage import encode_value as encode

if TYPE_CHECKING:
    from actorflow.storage import Store

__all__ = ["Divergence", "ReplayReport", "RunHistory", "read_run_history", "replay_history"]


class RunHistory(msgspec.Struct, frozen=True, kw_only=True):
    """Everything a replay of one run needs, and nothing of any other run.

    Attributes:
        manifest: the run's manifest (workflow, input, status, result).
        snapshot: the newest usable snapshot, its history chunks inline (None: none).
        records: the log after the snapshot, in order.
        blobs: the agents' state blobs the records and snapshot point to, by address.
        inbox: the inbox entries the run took.
        redacted: whether payloads were replaced (``actorflow export --redact``).
    """

    manifest: RunManifest
    snapshot: Snapshot | None = None
    records: tuple[LogRecord, ...] = ()
    blobs: dict[str, bytes] = {}
    inbox: tuple[InboxEntry, ...] = ()
    redacted: bool = False

    @property
    def run_id(self) -> str:
        """The run's id."""
        return self.manifest.run_id

    def view(self) -> RunView:
        """The run as recovery sees it: the snapshot, then every record after it.

        Agents' states kept in blobs come inline: a blob's address depends on
        the store it was written to (a keyed hash in a sealed one).
        """
        run_id = self.manifest.run_id
        view = RunView.from_snapshot(self.snapshot) if self.snapshot else RunView(run_id)
        for record in self.records:
            view.apply(record)
        for name, agent in view.agents.items():
            ref = agent.state
            if ref is not None and ref.data is None and ref.blob in self.blobs:
                inline = msgspec.structs.replace(ref, data=self.blobs[ref.blob], blob="")
                view.agents[name] = msgspec.structs.replace(agent, state=inline)
        return view


class Divergence(msgspec.Struct, frozen=True, kw_only=True):
    """Where the code now imported parts from a run's history.

    Attributes:
        step_id: the step (empty when the run's end differs, or the call was outside a step).
        recorded: what the history holds there.
        got: what the code did instead.
        where: ``file:line`` of the orchestrator code that did it.
        error: the error's type name (``NonDeterminismError``, say).
        message: the whole message.
    """

    step_id: str
    recorded: str
    got: str
    where: str
    error: str
    message: str


class ReplayReport(msgspec.Struct, frozen=True, kw_only=True):
    """One run replayed: whether the code now imported agrees with its history.

    Attributes:
        run_id: the run.
        workflow: its workflow's name.
        ok: no divergence.
        steps: how many recorded steps and decisions the history holds.
        stopped_at: the first step with no record (a recovery would go on
            live from there), or None when the orchestrator returned (or failed).
        finished: the run's end was replayed (it returned or raised).
        divergence: the first divergence, if any.
        redacted: the history's payloads were redacted (``actorflow export --redact``).
        short: why a redacted history's replay stopped before its end (the
            code needed a blanked value: the error it met), or None.
    """

    run_id: str
    workflow: str
    ok: bool
    steps: int = 0
    stopped_at: str | None = None
    finished: bool = False
    divergence: Divergence | None = None
    redacted: bool = False
    short: str | None = None

    def describe(self) -> str:
        """One line for people: ok and where it stopped, or the divergence."""
        d = self.divergence
        if d is not None:
            where = f" step {d.step_id}" if d.step_id else ""
            return (
                f"{self.run_id}: DIVERGED at{where} {d.where}: the history recorded "
                f"{d.recorded}, the code {d.got}"
            )
        if self.short is not None:
            return (
                f"{self.run_id}: ok as far as a redacted history checks: {self.steps} steps, "
                f"then {self.short}"
            )
        if self.stopped_at is not None:
            return (
                f"{self.run_id}: ok, replayed {self.steps} steps; a recovery would go on "
                f"live from step {self.stopped_at}"
            )
        return f"{self.run_id}: ok, replayed {self.steps} steps to the run's end"


async def read_run_history(store: Store, run_id: str) -> RunHistory:
    """Run ``run_id``'s history, read as recovery reads it (``load_view``'s order).

    The newest snapshot whose chunks all read back serves; one that fails its
    checksum is skipped for the one before it.

    Raises:
        RunNotFoundError: no such run.
        CorruptedDataError: the log (or a blob) is damaged.
        StorageError: the store cannot be read.
    """
    manifest = await store.read_run(run_id)
    snapshot: Snapshot | None = None
    for info in reversed(await store.list_snapshots(run_id)):
        try:
            snapshot = await resolve_snapshot(
                store, await store.read_snapshot(run_id, info.snapshot_id)
            )
        except CorruptedDataError:
            continue
        break
    records = tuple(await store.read_log(run_id, snapshot.position if snapshot else 0))
    history = RunHistory(manifest=manifest, snapshot=snapshot, records=records)
    view = history.view()
    blobs: dict[str, bytes] = {}
    for agent in view.agents.values():
        ref = agent.state
        if ref is not None and ref.data is None and ref.blob and ref.blob not in blobs:
            blobs[ref.blob] = await store.get_blob(run_id, ref.blob)
    inbox: tuple[InboxEntry, ...] = ()
    if isinstance(store, SupportsInbox):
        taken = view.inbox_taken
        inbox = tuple(e for e in await read_messages(store, run_id) if e.seq in taken)
    return msgspec.structs.replace(history, blobs=blobs, inbox=inbox)


class _ReplayedChildren:
    """A replay's child runs: recorded starts are looked at, never driven or adopted.

    A child run is a run of its own, replayed on its own (``actorflow replay``
    of its id); a start with no record never gets here (``HistoryEnd``).
    """

    async def start(
        self,
        workflow: type[object],
        input: object,
        *,
        child_id: str,
        parent_run: str,
        parent_step: str,
    ) -> None:
        raise HistoryEnd(parent_step, "child", call_site())

    async def reattach(self, child_id: str, parent_run: str, *, post: bool) -> None:
        """Nothing to drive: the child's own history is its own replay's."""

    def adopt(self, parent_run: str, child_id: str) -> None:
        """Nothing to cancel: no child runs here."""


def _quiet(*args: object, **kwargs: object) -> None:
    """A replay's engine events: nobody drives the run, nothing is reported."""


async def _scratch(history: RunHistory) -> MemoryStore:
    """Where the engine's writes during a replay go: a store in memory holding the run."""
    scratch = MemoryStore()
    await scratch.create_run(history.manifest)
    return scratch


def _flat(exc: BaseException) -> list[BaseException]:
    """``exc``, or the leaves of an exception group (a task group's failures)."""
    if isinstance(exc, BaseExceptionGroup):
        leaves: list[BaseException] = []
        for inner in exc.exceptions:
            leaves.extend(_flat(inner))
        return leaves
    return [exc]


async def replay_history(history: RunHistory, workflow: type[Any]) -> ReplayReport:
    """Replay ``history`` against ``workflow`` (the code now imported); never writes to a store.

    Returns the report: ok and where the history ended, or the first divergence.

    Raises:
        IncompatibleStateError: an agent's stored state cannot become its class's state now.
        RegistryError: an agent's class is not defined here.
    """
    manifest = history.manifest
    run_id = manifest.run_id
    view = history.view()
    steps = len(view.steps) + len(view.decided)
    consulted = _watch_lookups(view)
    store = await _scratch(history)
    config = RuntimeConfig(determinism=Determinism.STRICT)
    recorder = Recorder(
        run_id=run_id,
        store=store,
        writer=LogWriter(store, run_id, start=0),
        view=view,
        config=config,
        request_snapshot=lambda capture: None,
        emit=_quiet,
        attempt=manifest.attempt,
    )
    placer = ReplayPlacer()
    scope = ActorScope(ActorSystem(), run_id, lambda error: None)
    agents = RunAgents(scope, recorder, lambda cls: placer)
    if history.redacted:
        # no states to decode: each agent is its placeholder from the start
        for name, agent in view.agents.items():
            agents.placed[name] = replay_ref(lookup(agent.type, agent.module), run_id, name)
    else:
        # as recovery restores them: a stored state today's class cannot read is found
        await agents.restore_all()
    input_type, _ = run_signature(workflow)
    report = ReplayReport(
        run_id=run_id, workflow=manifest.workflow, ok=True, steps=steps, redacted=history.redacted
    )
    try:
        value = decode(manifest.input, input_type, f"input of run {run_id}")
        result = await _orchestrate(workflow, value, recorder, agents, store, config)
    except BaseException as exc:  # a replay's every end is a report
        return _ended(report, manifest, exc)
    skipped = _first_unissued(view, consulted)
    if skipped is not None:
        return msgspec.structs.replace(report, ok=False, finished=True, divergence=skipped)
    return _compare(report, manifest, result)


_V = TypeVar("_V")


class _Watched(dict[str, _V]):
    """A dict of a replayed view's records that notes every id looked up (``get``, ``in``)."""

    def __init__(self, records: dict[str, _V], seen: set[str]) -> None:
        super().__init__(records)
        self._seen = seen

    def get(self, key: str, default: Any = None) -> Any:
        self._seen.add(key)
        return super().get(key, default)

    def __contains__(self, key: object) -> bool:
        if isinstance(key, str):
            self._seen.add(key)
        return super().__contains__(key)


def _watch_lookups(view: RunView) -> set[str]:
    """The ids the replay will look up in ``view``'s steps, decisions and markers, as it goes.

    Only the replayer's own view is watched: a live run's lookups stay plain dicts.
    """
    seen: set[str] = set()
    view.steps = _Watched(view.steps, seen)
    view.decided = _Watched(view.decided, seen)
    view.events = _Watched(view.events, seen)
    return seen


def _first_unissued(view: RunView, consulted: set[str]) -> Divergence | None:
    """The first top-level step, decision or patch marker the history holds that the code,
    which has returned, never issued: it skipped it (a recovery would lose what it did).

    Only top-level ids count: what is inside a finished phase is replayed with the
    phase's result, never issued again.
    """
    recorded = [(i, _describe(r.kind, r.target, r.args_hash)) for i, r in view.steps.items()]
    recorded += [(i, _describe("decision", None, r.type)) for i, r in view.decided.items()]
    recorded += [
        (i, _describe("patch", None, (r.data or b"").decode(errors="replace")))
        for i, r in view.events.items()
        if r.kind == "patch"
    ]
    # top-level ids are the orchestrator's issue counter: by their number, in issue order
    for step_id, what in sorted(recorded, key=lambda e: int(e[0]) if e[0].isdigit() else -1):
        if "/" in step_id or step_id in consulted:
            continue
        return Divergence(
            step_id=step_id,
            recorded=what,
            got="never issued it: the orchestrator returned first",
            where="",
            error="ReplayStepNotIssued",
            message=f"run {view.run_id!r}: the history holds {what} at step {step_id}, which "
            "the code now imported never issues (it returned before reaching it)",
        )
    return None


async def _orchestrate(
    workflow: type[Any],
    value: object,
    recorder: Recorder,
    agents: RunAgents,
    store: MemoryStore,
    config: RuntimeConfig,
) -> object:
    """A fresh orchestrator run from the top, as an attempt runs it (``_attempt``)."""
    run_id = recorder.run_id
    async with anyio.create_task_group() as tg:
        signals = SignalDesk(
            store,
            run_id,
            recorder.view.inbox_taken,
            poll_interval=config.signal_poll_interval,
            task_group=tg,
        )
        env = StepEnv(
            recorder=recorder,
            agents=agents,
            config=config,
            task_group=tg,
            signals=signals,
            # no limits: a replayed step never takes one, and no live step runs
            flow=FlowControl(),
            children=_ReplayedChildren(),
        )
        env.replaying = True
        ctx = RunContext(env)
        updates = UpdateRunner(env, ctx, tg)
        orchestrator = workflow()
        orchestrator.name = "orchestrator"
        st = state_type(workflow) if issubclass(workflow, Actor) else type(None)
        orchestrator.state = st() if st is not type(None) else None
        updates.attach(orchestrator)
        with guarded(run_id, config.determinism):
            result: object = await orchestrator.run(ctx, value)
        await close_namespace(env, ctx.root)
        updates.stop()
        tg.cancel_scope.cancel()
    return result


def _ended(report: ReplayReport, manifest: RunManifest, exc: BaseException) -> ReplayReport:
    """The report of a replay the orchestrator did not return from."""
    leaves = _flat(exc)
    for leaf in leaves:
        if isinstance(leaf, NonDeterminismError):
            found = Divergence(
                step_id=leaf.step_id,
                recorded=leaf.expected,
                got=leaf.got,
                where=leaf.where,
                error=type(leaf).__name__,
                message=error_message(leaf),
            )
            return msgspec.structs.replace(report, ok=False, divergence=found)
        if isinstance(leaf, NondeterministicCallError):
            found = Divergence(
                step_id="",
                recorded="no such call",
                got=f"a call to {leaf.call}() (use {leaf.instead})",
                where=leaf.site,
                error=type(leaf).__name__,
                message=error_message(leaf),
            )
            return msgspec.structs.replace(report, ok=False, divergence=found)
    for leaf in leaves:
        if isinstance(leaf, HistoryEnd):
            return msgspec.structs.replace(report, stopped_at=leaf.step_id)
    first = leaves[0] if leaves else exc
    if not isinstance(first, Exception):
        raise exc
    if report.redacted:
        # a placeholder where the code needed a value: as far as a redacted history checks
        return msgspec.structs.replace(
            report, short=f"the code needed a redacted value ({type(first).__name__})"
        )
    error = manifest.error
    if (
        manifest.status is RunStatus.FAILED
        and error is not None
        and error.type == type(first).__name__
    ):
        return msgspec.structs.replace(report, finished=True)
    recorded = (
        f"a failure ({error.type})"
        if manifest.status is RunStatus.FAILED and error is not None
        else f"a run {manifest.status}"
    )
    found = Divergence(
        step_id="",
        recorded=recorded,
        got=f"{type(first).__name__}: {error_message(first)}",
        where="",
        error=type(first).__name__,
        message=error_message(first),
    )
    return msgspec.structs.replace(report, ok=False, finished=True, divergence=found)


def _compare(report: ReplayReport, manifest: RunManifest, result: object) -> ReplayReport:
    """The report of a replay whose orchestrator returned: its result against the stored one."""
    finished = msgspec.structs.replace(report, finished=True)
    status = manifest.status
    if report.redacted and status is RunStatus.COMPLETED:
        return finished  # its result was redacted: nothing to compare
    if status is RunStatus.COMPLETED:
        try:
            same = encode(result, "result of the replayed run") == manifest.result
        except StorageError:
            same = False
        if same:
            return finished
        recorded, got = "another result", "a different result"
    elif status is RunStatus.FAILED:
        error = manifest.error
        recorded = f"a failure ({error.type})" if error is not None else "a failure"
        got = "a result"
    else:
        # the history reached the orchestrator's end without a recorded end: a
        # recovery would return now
        return finished
    found = Divergence(
        step_id="",
        recorded=recorded,
        got=got,
        where="",
        error="ReplayResultMismatch",
        message=f"run {manifest.run_id!r}: the run's end differs: it recorded {recorded}, "
        f"the code now returns {got}",
    )
    return msgspec.structs.replace(finished, ok=False, divergence=found)
