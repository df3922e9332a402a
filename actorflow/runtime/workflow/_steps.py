"""Every kind of step a run can take, on one pattern: issued now, replayed or run live.

A step is created by a ``ctx`` call, which issues its id synchronously (so ids
never depend on scheduling) and checks it against the log (``check_replay``).
Awaiting it runs two halves: ``start`` hands its work out (a message, in issue
order, after the output-commit flush) and ``finish`` waits for the outcome and
records it. A step with a record never runs: ``replay`` returns (or raises)
what was recorded. ``ctx.gather`` starts every step in order, then finishes
them together.

Adding a kind of step is one class here (and one record type, if it records
something new). The kinds: ``ValueStep`` (now, random, uuid), ``SleepStep``,
``AskStep``, ``SendStep``, ``SpawnStep``, ``DecideStep``, ``PatchStep`` and
``EmitStep``; the one durable wait, ``WaitStep``, has a module of its own (``_waits.py``).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import anyio
import msgspec

from actorflow._text import error_message, safe_repr
from actorflow.errors import (
    ActorError,
    ActorFailedError,
    DuplicateActorNameError,
    EncodingError,
    StepFailedError,
    UnawaitedStepError,
)
from actorflow.runtime.actors import class_name, module_of, state_type
from actorflow.runtime.workflow._agents import reply_type
from actorflow.runtime.workflow._ids import args_hash, message_hash, value_hash
from actorflow.runtime.workflow._progress import StepInfo, StepMeta, current_step_meta
from actorflow.runtime.workflow._replay import check_replay
from actorflow.runtime.workflow._stream import EmitPayload
from actorflow.storage import (
    DecisionRecord,
    ErrorInfo,
    EventRecord,
    MilestoneRecord,
    StateRef,
    StepRecord,
)
from actorflow.storage import decode_value as decode
from actorflow.storage import encode_value as encode

if TYPE_CHECKING:
    from collections.abc import Callable, Generator, Sequence

    from actorflow.runtime.actors import Actor, ActorRef, AgentRef, AgentReply
    from actorflow.runtime.workflow._env import StepEnv
    from actorflow.runtime.workflow._ids import Namespace
    from actorflow.runtime.workflow._recorder import Turnstile
    from actorflow.runtime.workflow._stream import EmitSink

__all__ = [
    "AskStep",
    "DecideStep",
    "EmitStep",
    "PatchStep",
    "SendStep",
    "SleepStep",
    "SpawnStep",
    "Step",
    "ValueStep",
    "close_namespace",
]

T = TypeVar("T")
A = TypeVar("A", bound="Actor")


class Step(Generic[T]):
    """An issued step of a run. Await it (once) for its result.

    Attributes:
        id: the step's id (its path in the run).
        issued: when it was issued (``time.time()``), kept in its record.
        record: its record in the log, if it completed before (then it replays).
        inline: whether replaying it only returns (or raises) its record: no
            agent, no I/O (``ctx.gather`` replays such steps without a task).
    """

    kind = "step"
    inline = True
    _started = False

    def __init__(self, env: StepEnv, ns: Namespace, target: str | None, digest: str) -> None:
        """Issue the step's id now; ``digest`` is its ``args_hash``."""
        self.env = env
        self.ns = ns
        self.id = step_id = ns.next_step()
        self.target = target
        self.hash = digest
        self.record: StepRecord | None = _lookup(env, step_id, self.kind, target, digest)
        # a replayed step records nothing: only a live one needs the time
        self.issued = time.time() if self.record is None else 0.0
        ns.pending[step_id] = self

    @property
    def recorded(self) -> bool:
        """Whether the step completed before: awaiting it replays its record."""
        return self.record is not None

    def __await__(self) -> Generator[Any, None, T]:
        return self._run().__await__()

    async def _run(self) -> T:
        await self.start()
        return await self.finish()

    def claim(self) -> None:
        """Mark the step awaited (once)."""
        if self._started:
            raise RuntimeError(f"step {self.id} was awaited twice")
        self._started = True
        self.ns.pending.pop(self.id, None)

    async def start(self) -> None:
        """Claim the step and, if it runs live, hand its work out."""
        self.claim()
        if not self.recorded:
            await self._deliver()

    async def finish(self) -> T:
        """The step's outcome: replayed from its record, or waited for and recorded."""
        if self.recorded:
            return self.replay()
        return await self._live()

    def replay(self) -> T:
        """Return (or raise) the recorded outcome."""
        record = self.record
        assert record is not None
        if record.error is not None:
            raise self.failure(record.error)
        return self._decode(record.result)

    def failure(self, error: ErrorInfo) -> StepFailedError:
        """The error a failed step raises, live or replayed."""
        return StepFailedError(self.env.run_id, self.id, error.type, error.message)

    async def _deliver(self) -> None:
        """Hand the step's work out (live steps only); default: nothing to deliver."""

    def _decode(self, result: bytes | None) -> T:
        if result is None:
            return None  # type: ignore[return-value]  # a step of no result (a send)
        value: T = decode(result, Any, "result of step", self.id)
        return value

    async def _live(self) -> T:
        raise NotImplementedError


def _lookup(
    env: StepEnv, step_id: str, kind: str, target: str | None, digest: str
) -> StepRecord | None:
    """The step's record, checked against what the code issues now (the replay contract)."""
    view = env.view
    record = view.steps.get(step_id)
    if record is not None:
        if record.kind != kind or record.target != target or record.args_hash != digest:
            check_replay(view, step_id, kind, target, digest)
    elif step_id in view.decided:
        check_replay(view, step_id, kind, target, digest)
    return record


# --- values -------------------------------------------------------------------


class ValueStep(Step[T]):
    """``ctx.now``, ``ctx.random``, ``ctx.uuid``: a value computed once, then replayed."""

    def __init__(
        self,
        env: StepEnv,
        ns: Namespace,
        kind: str,
        compute: Callable[[], T],
        type_: type[T],
    ) -> None:
        self.kind = kind
        self._compute = compute
        self._type = type_
        super().__init__(env, ns, None, value_hash(kind))

    def _decode(self, result: bytes | None) -> T:
        value: T = decode(result or b"\xc0", self._type, "result of step", self.id)
        return value

    async def _live(self) -> T:
        value = self._compute()
        rec = self.env.recorder
        rec.record(
            StepRecord(
                step_id=self.id,
                kind=self.kind,
                args_hash=self.hash,
                result=encode(value, self.kind),
                time=time.time(),
                issued=self.issued,
            )
        )
        await rec.after_step()
        return value


class SleepStep(ValueStep[float]):
    """``ctx.sleep``: a durable timer; its deadline is recorded, so a recovery waits the rest."""

    def __init__(self, env: StepEnv, ns: Namespace, seconds: float) -> None:
        super().__init__(env, ns, "sleep", lambda: time.time() + seconds, float)

    async def _run(self) -> float:
        deadline = await super()._run()
        if not self.recorded:
            await self.env.recorder.flush()
        await anyio.sleep(max(0.0, deadline - time.time()))
        return deadline


# --- messages to agents ---------------------------------------------------------


class AskStep(Step[T]):
    """``ctx.ask``: a message to an agent, its reply and the agent's new state.

    Attributes (live steps, once delivered): ``pending`` is the reply slot,
    ``turnstile`` / ``ticket`` order the agent's records by delivery.
    """

    kind = "ask"
    # what a step only has once delivered (class-level defaults: replays never set them)
    pending: AgentReply | None = None
    ticket = -1
    turnstile: Turnstile | None = None
    _deliver_error: ActorError | None = None
    _meta: StepMeta | None = None  # dropped once the step is finished (see _done)

    def __init__(
        self,
        env: StepEnv,
        ns: Namespace,
        ref: AgentRef,
        message: object,
        timeout: float | None,
    ) -> None:
        self.ref = ref
        self.message = message
        self.timeout = timeout
        # Step.__init__, inlined: a recovery issues thousands of these
        self.env = env
        self.ns = ns
        self.id = step_id = ns.next_step()
        self.target = target = ref.name
        self.hash = digest = message_hash(self.kind, target, message)
        self.record = record = _lookup(env, step_id, self.kind, target, digest)
        self.issued = 0.0
        if record is None:  # a replayed step never reaches its agent
            self.issued = time.time()
            self._meta = self._make_meta(1)
        ns.pending[step_id] = self

    def _make_meta(self, attempt: int) -> StepMeta:
        run_id = self.env.run_id
        key = f"{run_id}/{self.id}"
        info = StepInfo(run_id=run_id, step_id=self.id, key=key, attempt=attempt)
        progress = self.env.view.milestones.get(key)
        return StepMeta(info, self._save_milestone, progress.data if progress else None)

    async def _save_milestone(self, data: bytes) -> None:
        rec = self.env.recorder
        key = f"{self.env.run_id}/{self.id}"
        rec.record(MilestoneRecord(key=key, agent=self.ref.name, data=data))
        # a handler still running after its step finished holds its meta in its context
        meta = self._meta if self._meta is not None else current_step_meta()
        if meta is not None and meta.info.key == key:
            meta.progress = data
        await rec.flush()

    def _metrics(self) -> dict[str, float]:
        """What the handler reported for the step (``report``)."""
        meta = self._meta
        return meta.metrics if meta is not None else {}

    def _done(self) -> None:
        # the meta holds this step (``milestone``): without the cycle, a finished
        # run's steps (and all they reach) are freed at once, not by the GC
        self._meta = None

    def _decode(self, result: bytes | None) -> T:
        # the handler's return annotation, looked up only when a reply is replayed
        type_ = reply_type(self.ref.actor_type, type(self.message))
        value: T = decode(result or b"\xc0", type_, "reply of step", self.id)
        return value

    async def _deliver(self) -> None:
        rec = self.env.recorder
        if rec.barrier_needed():
            await rec.output_barrier()
        try:
            await self._redeliver()
        except ActorError as exc:
            # a stopped agent, say: handled with the task's retries in _live
            self._deliver_error = exc

    async def _redeliver(self) -> None:
        turnstile = self.turnstile = self.env.recorder.turnstile(self.ref.name)
        self.ticket = turnstile.take()
        self.pending = None
        try:
            self.pending = await self.ref.deliver(self.message, self._meta)
        except BaseException:
            self._release(turnstile)
            raise

    def _release(self, turnstile: Turnstile) -> None:
        if self.ticket >= 0:
            turnstile.release(self.ticket)
            self.ticket = -1

    def abandon(self) -> None:
        """Give up a delivered step that will never be finished (its gather was cancelled)."""
        if self.ticket >= 0 and self.turnstile is not None:
            self._release(self.turnstile)

    def answered(self) -> bool:
        """Whether the step is delivered and its reply is in, without an error."""
        pending = self.pending
        return pending is not None and pending.event.is_set() and pending.error is None

    async def _live(self) -> T:
        turnstile = self.env.recorder.turnstile(self.ref.name)
        try:
            reply, state, attempt = await self._outcome(turnstile)
            if not turnstile.ready(self.ticket):
                await turnstile.wait(self.ticket)
            await self._record_success(reply, state, attempt)
        finally:
            self._release(turnstile)
            self._done()
        await self.env.recorder.after_step()
        return reply  # type: ignore[no-any-return]

    async def finish_answered(self) -> T:
        """``finish`` for a step whose reply is in (``answered``), without the sync flush.

        ``ctx.gather`` records such steps in order, in its own task, and makes
        them durable together (one flush) in ``sync`` mode.
        """
        turnstile = self.turnstile
        pending = self.pending
        assert turnstile is not None
        assert pending is not None
        try:
            if not turnstile.ready(self.ticket):
                await turnstile.wait(self.ticket)
            await self._record_success(pending.value, pending.state, 1)
        finally:
            self._release(turnstile)
            self._done()
        return pending.value  # type: ignore[no-any-return]

    async def _outcome(self, turnstile: Turnstile) -> tuple[Any, bytes, int]:
        """The reply and state, retrying a failed task; records the final failure."""
        config = self.env.config
        attempt = 1
        handler_error: BaseException | None = None
        while True:
            try:
                if self._deliver_error is not None:
                    error, self._deliver_error = self._deliver_error, None
                    raise error
                if self.pending is None:  # a retry (the first delivery happened in start)
                    await self._redeliver()
                pending = self.pending
                assert pending is not None
                if self.timeout:
                    with anyio.fail_after(self.timeout):
                        await pending.event.wait()
                elif not pending.event.is_set():
                    await pending.event.wait()
                if pending.error is not None:
                    raise pending.error
                return pending.value, pending.state, attempt
            except (ActorError, TimeoutError) as exc:
                if isinstance(exc, ActorFailedError):
                    handler_error = exc  # the root cause, worth more than a later "stopped"
                if attempt > config.step_retries:
                    await turnstile.wait(self.ticket)
                    raise await self._record_failure(handler_error or exc) from exc
                self._release(turnstile)
                self.pending = None
                await anyio.sleep(config.retry_backoff * 2 ** (attempt - 1))
                attempt += 1
                self._meta = self._make_meta(attempt)

    async def _record_success(self, reply: object, state: bytes, attempts: int) -> None:
        """Record the step's reply and the agent's new state (not flushed: see ``_live``)."""
        rec = self.env.recorder
        name = self.ref.name
        ref: StateRef | None = None
        if self.ref.scope == self.env.run_id:
            # only the run's own agents are restored from its records; an actor
            # of the runtime outlives runs and keeps its own state
            if rec.needs_blob(name, state):
                ref = await rec.state_ref(name, state)
            else:
                ref = rec.inline_state_ref(name, state)
        result = None if self.kind == "send" else encode(reply, "reply of", name)
        rec.record(
            StepRecord(
                step_id=self.id,
                kind=self.kind,
                target=name,
                args_hash=self.hash,
                result=result,
                metrics=self._metrics(),
                state=ref,
                attempts=attempts,
                time=time.time(),
                issued=self.issued,
            )
        )

    async def _record_failure(self, exc: BaseException) -> StepFailedError:
        cause = exc.__cause__ if exc.__cause__ is not None else exc
        error = ErrorInfo.of(cause)
        rec = self.env.recorder
        rec.record(
            StepRecord(
                step_id=self.id,
                kind=self.kind,
                target=self.ref.name,
                args_hash=self.hash,
                error=error,
                metrics=self._metrics(),
                attempts=self.env.config.step_retries + 1,
                time=time.time(),
                issued=self.issued,
            )
        )
        rec.emit("step_failed", step_id=self.id, agent=self.ref.name, error=error.type)
        await rec.after_step()
        return self.failure(error)


class SendStep(AskStep[None]):
    """``ctx.send``: done once delivered; the agent's handling is recorded in the background.

    The enclosing phase (or the run) waits for that record before it ends.
    """

    kind = "send"

    async def finish(self) -> None:
        record = self.record
        if record is not None:
            if record.error is not None:
                raise self.failure(record.error)
            return
        ns = self.ns
        done = anyio.Event()
        ns.sends.append(done)

        async def complete() -> None:
            try:
                await self._live()
            except StepFailedError as exc:
                ns.failed_sends.append(exc)
            finally:
                done.set()

        self.env.task_group.start_soon(complete)

    def _decode(self, result: bytes | None) -> None:
        return None


async def close_namespace(env: StepEnv, ns: Namespace) -> None:
    """End of a phase (or the run): every send recorded, every step awaited.

    Raises:
        StepFailedError: a ``ctx.send`` of the namespace failed (the first).
        UnawaitedStepError: steps were issued and never awaited.
    """
    sends, ns.sends = ns.sends, []
    for done in sends:
        await done.wait()
    if ns.failed_sends:
        raise ns.failed_sends.pop(0)
    if ns.pending:
        ids = list(ns.pending)
        ns.pending.clear()
        raise UnawaitedStepError(env.run_id, ids)


# --- agents -------------------------------------------------------------------


class SpawnStep(Step["ActorRef[A]"]):
    """``ctx.spawn``: get or create the run's agent ``name`` of class ``cls``."""

    kind = "spawn"
    inline = False

    def __init__(self, env: StepEnv, ns: Namespace, cls: type[A], name: str, state: object) -> None:
        self._cls = cls
        self._name = name
        # Checked on replay: the class, and a state only if the code gives one,
        # so a state class gaining a defaulted field does not break old runs.
        given = b"" if state is None else encode(state, f"state of {name}")
        st = state_type(cls)
        if state is None and st is not type(None):
            state = st()
        self._state_bytes = encode(state, f"state of {name}")
        self._initial = state
        digest = args_hash(self.kind, name, class_name(cls).encode() + given)
        super().__init__(env, ns, name, digest)

    async def finish(self) -> ActorRef[A]:
        agents = self.env.agents
        ref = agents.get(self._name)
        if self.record is not None:
            if ref is None:  # not running any more (it escalated, say): bring it back
                recorded = self.env.view.state_of(self._name) or self.record.state
                ref = await agents.restore(self._name, self._cls, recorded)
            return ref
        rec = self.env.recorder
        state: StateRef | None = None
        if ref is not None:
            # get: the agent keeps the state it has; the record names no state
            if ref.actor_type is not self._cls:
                raise DuplicateActorNameError(self._name)
        else:
            ref = await agents.spawn(self._cls, self._name, self._initial)
            state = await rec.state_ref(self._name, self._state_bytes)
            if state is None:  # same bytes as recorded before: still name the type
                state = StateRef(
                    agent=self._name,
                    type=class_name(self._cls),
                    version=rec.agent_versions[self._name],
                    data=self._state_bytes,
                )
            # where the class comes from, for a process that has not imported it
            state = msgspec.structs.replace(state, module=module_of(self._cls))
        rec.record(
            StepRecord(
                step_id=self.id,
                kind="spawn",
                target=self._name,
                args_hash=self.hash,
                state=state,
                time=time.time(),
                issued=self.issued,
            )
        )
        await rec.after_step()
        return ref


# --- decisions ------------------------------------------------------------------


class DecideStep(Step[DecisionRecord]):
    """``ctx.decide``: a decision and why it was made; visible only once durable."""

    kind = "decision"

    def __init__(
        self,
        env: StepEnv,
        ns: Namespace,
        type: str,
        *,
        description: str,
        rationale: str,
        confidence: float | None,
        alternatives: Sequence[str],
        agent: str,
    ) -> None:
        if confidence is not None:
            _check_confidence(type, confidence)  # before an id is taken: nothing is issued
        self.env = env
        self.ns = ns
        self.id = step_id = ns.next_step()
        self.target = None
        self.hash = type
        self.record = None
        check_replay(env.view, step_id, self.kind, None, type)
        self.decision = env.view.decided.get(step_id)
        self._fields = {
            "step_id": step_id,
            "agent": agent,
            "type": type,
            "description": description,
            "rationale": rationale,
            "confidence": confidence,
            "alternatives": tuple(alternatives),
        }
        ns.pending[step_id] = self

    @property
    def recorded(self) -> bool:
        return self.decision is not None

    def replay(self) -> DecisionRecord:
        assert self.decision is not None
        return self.decision

    async def _live(self) -> DecisionRecord:
        try:
            # Structs do not check types when built; a wrong one would be
            # written now and refuse to load at recovery.
            record = msgspec.convert({**self._fields, "time": time.time()}, DecisionRecord)
        except msgspec.ValidationError as exc:
            raise EncodingError(f"decision {self.hash!r}", error_message(exc)) from None
        # a lone surrogate in a text field would otherwise fail in the log writer, later
        encode(record, f"decision {self.hash!r}")
        rec = self.env.recorder
        rec.record(record)
        rec.emit(
            "decision_made", step_id=self.id, decision=record.type, confidence=record.confidence
        )
        await rec.output_barrier()
        return record


def _check_confidence(decision: str, confidence: object) -> None:
    """Refuse a confidence that is not a finite number in [0, 1] (NaN compares false)."""
    if (
        isinstance(confidence, bool)
        or not isinstance(confidence, int | float)
        or not 0.0 <= confidence <= 1.0
    ):
        raise EncodingError(
            f"decision {safe_repr(decision)}",
            f"its confidence {safe_repr(confidence)} is not a number between 0 and 1",
        )


# --- evolving code -----------------------------------------------------------------


class PatchStep:
    """``ctx.patched``: which side of a code change this run takes (decided synchronously).

    A run that reaches the change point after it was deployed records a
    ``patch`` marker and takes the new path; a run whose log already has
    another step there predates the change and replays the old path.
    """

    __slots__ = ("taken",)

    def __init__(self, env: StepEnv, ns: Namespace, change_id: str) -> None:
        view = env.view
        step_id = ns.peek_step()
        marker = view.events.get(step_id)
        if marker is not None and marker.kind == "patch":
            ns.next_step()
            self.taken = marker.data == change_id.encode()
        elif view.recorded(step_id) is not None:
            self.taken = False  # the old code issued a step here
        else:
            ns.next_step()
            env.recorder.record(EventRecord(kind="patch", step_id=step_id, data=change_id.encode()))
            self.taken = True


# --- streamed events -----------------------------------------------------------------


class EmitStep(Step[None]):
    """``ctx.emit(event, durable=True)``: an event recorded once, for readers in any process.

    Its record is a ``StepRecord`` of kind ``emit`` whose result is an
    ``EmitPayload`` (the event's type name, the agent, the event). Live, it is
    recorded and passed to this process's ``handle.events()`` readers; replayed,
    it does neither: a reader never sees it twice. Only the event's type is
    checked on replay (its value may differ: it is an observation, not an input).
    """

    kind = "emit"

    def __init__(
        self, env: StepEnv, ns: Namespace, event: object, agent: str, publish: EmitSink | None
    ) -> None:
        type_name = class_name(type(event))
        # encoded now: an event that cannot be stored fails where it is emitted
        self._payload = encode(
            EmitPayload(type=type_name, agent=agent, event=event), f"emitted {type_name}"
        )
        self._event = event
        self._agent = agent
        self._publish = publish
        super().__init__(env, ns, None, args_hash(self.kind, None, type_name.encode()))

    def _decode(self, result: bytes | None) -> None:
        return None

    async def _live(self) -> None:
        rec = self.env.recorder
        rec.record(
            StepRecord(
                step_id=self.id,
                kind=self.kind,
                args_hash=self.hash,
                result=self._payload,
                time=time.time(),
                issued=self.issued,
            )
        )
        if self._publish is not None:
            self._publish(self._agent, self._event, self.id)
        await rec.after_step()
