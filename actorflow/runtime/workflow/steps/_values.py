"""Steps the run completes itself, with no agent to wait for.

``ValueStep`` (``ctx.now``, ``random``, ``uuid``) and ``SleepStep`` record a
value computed once; ``SpawnStep`` the run's new agent and its first state;
``DecideStep`` a decision; ``PatchStep`` which side of a code change a run
takes; ``EmitStep`` a streamed event.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, TypeVar

import anyio
import msgspec

from actorflow._text import error_message, safe_repr
from actorflow.errors import DuplicateActorNameError, EncodingError
from actorflow.runtime.actors import class_name, module_of, state_type
from actorflow.runtime.workflow._flow import check_limits
from actorflow.runtime.workflow._ids import args_hash, value_hash
from actorflow.runtime.workflow._replay import check_replay
from actorflow.runtime.workflow._stream import EmitPayload
from actorflow.runtime.workflow.steps._base import Step
from actorflow.storage import DecisionRecord, EventRecord, StateRef
from actorflow.storage import decode_value as decode
from actorflow.storage import encode_value as encode

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from actorflow.runtime.actors import Actor, ActorRef
    from actorflow.runtime.workflow._env import StepEnv
    from actorflow.runtime.workflow._ids import Namespace
    from actorflow.runtime.workflow._stream import EmitSink

__all__ = ["DecideStep", "EmitStep", "PatchStep", "SleepStep", "SpawnStep", "ValueStep"]

T = TypeVar("T")
A = TypeVar("A", bound="Actor")


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
        self._record_outcome(result=encode(value, self.kind))
        await self.env.recorder.after_step()
        return value


class SleepStep(ValueStep[float]):
    """``ctx.sleep``: a durable timer; its deadline is recorded, so a recovery waits the rest."""

    span_ends_at_record = False  # its span (tracing on) covers the wait too

    def __init__(self, env: StepEnv, ns: Namespace, seconds: float) -> None:
        super().__init__(env, ns, "sleep", lambda: time.time() + seconds, float)

    async def _run(self) -> float:
        deadline = await super()._run()
        if not self.recorded:
            await self.env.recorder.flush()
        await anyio.sleep(max(0.0, deadline - time.time()))
        span, trace = self.span, self.env.trace
        if span is not None and trace is not None:
            self.span = None
            trace.step_done(span, self.kind, self.issued, None, 1)
        return deadline


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
            check_limits(self._cls, self.env.flow.limiters)
            ref = await agents.spawn(self._cls, self._name, self._initial)
            state = await agents.state_ref(self._name, self._state_bytes)
            if state is None:  # same bytes as recorded before: still name the type
                state = StateRef(
                    agent=self._name,
                    type=class_name(self._cls),
                    version=agents.version(self._name),
                    data=self._state_bytes,
                )
            # where the class comes from, for a process that has not imported it
            state = msgspec.structs.replace(state, module=module_of(self._cls))
        self._record_outcome(state=state)
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
        if env.trace is not None:
            self.span = env.trace.step(self.kind, step_id, None, self.decision is not None)
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
        span, trace = self.span, self.env.trace
        if span is not None and trace is not None:
            self.span = None
            trace.step_done(span, self.kind, 0.0, None, 1)
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
        self._record_outcome(result=self._payload)
        if self._publish is not None:
            self._publish(self._agent, self._event, self.id)
        await rec.after_step()
