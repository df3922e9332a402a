"""Executing one run: agents in the run's scope, steps delivered in order, the outcome stored.

A ``RunExecution`` is built for every attempt at a run (first start, recovery,
resume, fork). It owns the run's actor scope and a task group for background
completions, rebuilds agents from the recorded view, drives a fresh
orchestrator's ``run(ctx, input)`` and stores how it ended.
"""

from __future__ import annotations

import time
import typing
from typing import TYPE_CHECKING, Any

import anyio

from actorflow.errors import (
    ActorDefinitionError,
    DuplicateActorNameError,
    StepFailedError,
)
from actorflow.runtime.actors import Actor, class_name, handler_for, lookup, state_type
from actorflow.runtime.workflow._ids import args_hash
from actorflow.runtime.workflow._recorder import Recorder, decode, encode
from actorflow.runtime.workflow._steps import Step
from actorflow.storage import StateRef, StepRecord

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from actorflow.runtime.workflow._context import RunContext
    from actorflow.runtime.workflow._ids import Namespace

__all__ = ["RunExecution", "run_signature"]


_signatures: dict[type[Any], tuple[Any, Any]] = {}


def run_signature(cls: type[Any]) -> tuple[Any, Any]:
    """``(input type, result type)`` of an orchestrator class's ``run(ctx, input)``.

    Resolved once per class: resolving string annotations costs an eval each.
    """
    found = _signatures.get(cls)
    if found is None:
        found = _signatures[cls] = _resolve_signature(cls)
    return found


def _resolve_signature(cls: type[Any]) -> tuple[Any, Any]:
    fn = getattr(cls, "run", None)
    if fn is None or not callable(fn):
        raise ActorDefinitionError(
            cls.__qualname__, "an orchestrator needs `async def run(self, ctx, input)`"
        )
    try:
        hints = typing.get_type_hints(fn)
    except Exception:
        hints = {}
    names = [n for n in fn.__code__.co_varnames[: fn.__code__.co_argcount]]
    input_type = hints.get(names[2], Any) if len(names) > 2 else Any
    return input_type, hints.get("return", Any)


# (actor class, message class) -> reply type; resolving annotations costs an
# eval per call, on every step of every run.
_reply_types: dict[tuple[type, type], Any] = {}


class _SpawnStep(Step[Any]):
    kind = "spawn"

    def __init__(
        self,
        runner: RunExecution,
        ctx: RunContext,
        ns: Namespace,
        cls: type[Any],
        name: str,
        state: Any,
    ) -> None:
        self._runner = runner
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
        super().__init__(ctx, ns, name, digest)

    async def _finish(self) -> Any:
        scope = self._runner.scope
        ref = scope.get(self._name)
        if self.record is not None:
            if ref is None:  # not running any more (it escalated, say): bring it back
                recorded = self._runner.recorder.view.state_of(self._name) or self.record.state
                ref = await self._runner.restore_agent(self._name, self._cls, recorded)
            return ref
        rec = self._ctx._recorder
        state: StateRef | None = None
        if ref is not None:
            # get: the agent keeps the state it has; the record names no state
            if ref.actor_type is not self._cls:
                raise DuplicateActorNameError(self._name)
        else:
            ref = await scope.spawn(self._cls, name=self._name, state=self._initial)
            rec.note_agent(self._name, self._cls, self._cls.role)
            state = await rec.state_ref(self._name, class_name(self._cls), self._state_bytes)
            if state is None:  # same bytes as recorded before: still name the type
                state = StateRef(
                    agent=self._name, type=class_name(self._cls), data=self._state_bytes
                )
        rec.record(
            StepRecord(
                step_id=self.id,
                kind="spawn",
                target=self._name,
                args_hash=self.hash,
                state=state,
                time=time.time(),
            )
        )
        await rec.after_step()
        return ref


class RunExecution:
    """One attempt at a run, from agents restored to the outcome stored."""

    def __init__(self, *, runtime: Any, recorder: Recorder, scope: Any, task_group: Any) -> None:
        self.runtime = runtime
        self.recorder = recorder
        self.scope = scope
        self.task_group = task_group
        self.run_id = recorder.run_id

    # --- agents ------------------------------------------------------------

    async def restore_agents(self) -> int:
        """Re-create every agent the view names, with its latest recorded state.

        Their state blobs are read concurrently (one store round trip each);
        the agents are spawned in the view's order.
        """
        todo = [
            (name, lookup(snap.type), snap.state)
            for name, snap in self.recorder.view.agents.items()
            if self.scope.get(name) is None
        ]
        blobs: dict[str, bytes] = {}

        async def fetch(name: str, ref: StateRef) -> None:
            blobs[name] = await self.recorder.store.get_blob(self.run_id, ref.blob)

        in_blobs = [(name, ref) for name, _, ref in todo if ref is not None and ref.data is None]
        if in_blobs:  # a task group costs a scheduler pass even with nothing in it
            async with anyio.create_task_group() as tg:
                for blob_of, blob_ref in in_blobs:
                    tg.start_soon(fetch, blob_of, blob_ref)
        for name, cls, ref in todo:
            await self.restore_agent(name, cls, ref, blobs.get(name))
        return len(todo)

    async def restore_agent(
        self, name: str, cls: type[Any], ref: StateRef | None, blob: bytes | None = None
    ) -> Any:
        """Spawn agent ``name`` in the run's scope with the state ``ref`` points to."""
        state = None
        if ref is not None:
            data = ref.data if ref.data is not None else blob
            if data is None:
                data = await self.recorder.store.get_blob(self.run_id, ref.blob)
            state = decode(data, state_type(cls), f"state of agent {name}")
            self.recorder.last_state[name] = data
        self.recorder.note_agent(name, cls, cls.role)
        return await self.scope.spawn(cls, name=name, state=state)

    def spawn_step(
        self, ctx: RunContext, ns: Namespace, cls: type[Any], name: str, state: Any
    ) -> Step[Any]:
        return _SpawnStep(self, ctx, ns, cls, name, state)

    def reply_type(self, ref: Any, message: Any) -> Any:
        """The handler's return annotation: what a replayed reply decodes as."""
        key = (ref.actor_type, type(message))
        try:
            return _reply_types[key]
        except KeyError:
            pass
        fn = handler_for(ref.actor_type, type(message))
        try:
            found = typing.get_type_hints(fn).get("return", Any) if fn is not None else Any
        except Exception:
            found = Any
        _reply_types[key] = found
        return found

    # --- background sends --------------------------------------------------

    def track_send(self, ns: Namespace, live: Callable[[], Awaitable[Any]]) -> None:
        """Record a delivered ``ctx.send`` in the background; its phase waits for it."""
        done = anyio.Event()
        ns.sends.append(done)

        async def complete() -> None:
            try:
                await live()
            except StepFailedError as exc:
                ns.failed_sends.append(exc)
            finally:
                done.set()

        self.task_group.start_soon(complete)

    async def wait_sends(self, ns: Namespace) -> None:
        """Wait until every send of the namespace is recorded; raise the first failure."""
        sends, ns.sends = ns.sends, []
        for done in sends:
            await done.wait()
        if ns.failed_sends:
            raise ns.failed_sends.pop(0)

    # --- the orchestrator ----------------------------------------------------

    async def execute(self, cls: type[Any], input_value: Any, ctx: RunContext) -> Any:
        """Run a fresh orchestrator from the top; finished work replays from records."""
        # A fresh instance on every attempt: its attributes are rebuilt by
        # replay, never restored, so nothing is applied twice.
        orchestrator = cls()
        orchestrator.name = "orchestrator"
        st = state_type(cls) if issubclass(cls, Actor) else type(None)
        orchestrator.state = st() if st is not type(None) else None
        result = await orchestrator.run(ctx, input_value)
        await ctx._close_namespace(ctx._root)
        await self.recorder.output_barrier()
        return result
