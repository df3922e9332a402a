"""A run's agents: restored from their recorded states, spawned by steps, typed replies.

One ``RunAgents`` per attempt at a run. It owns nothing but the run's actor
scope (opened and closed by the attempt); what it records goes through the
recorder, and stored states become agents' states again only through
``decode_agent_state`` (state versions and upgrades live there).
"""

from __future__ import annotations

import typing
from typing import TYPE_CHECKING, Any

import anyio

from actorflow.runtime.actors import Actor, handler_for, lookup, state_type
from actorflow.runtime.workflow._replay import decode_agent_state
from actorflow.storage import encode_value

if TYPE_CHECKING:
    from collections.abc import Callable

    from actorflow.runtime.actors import ActorRef, ActorScope
    from actorflow.runtime.workflow._cluster import AgentPlacer
    from actorflow.runtime.workflow._recorder import Recorder
    from actorflow.storage import StateRef

__all__ = ["RunAgents", "reply_type"]

# (actor class, message class) -> reply type; resolving annotations costs an
# eval per call, on every replayed reply of every run.
_reply_types: dict[tuple[type, type], Any] = {}


def reply_type(actor_cls: type[Actor], message_cls: type) -> Any:
    """The handler's return annotation: what a replayed reply decodes as (``Any`` if unknown)."""
    key = (actor_cls, message_cls)
    try:
        return _reply_types[key]
    except KeyError:
        pass
    fn = handler_for(actor_cls, message_cls)
    try:
        found = typing.get_type_hints(fn).get("return", Any) if fn is not None else Any
    except Exception:
        found = Any
    _reply_types[key] = found
    return found


class RunAgents:
    """The agents of one attempt at a run, living in the run's actor scope."""

    __slots__ = ("_placer_for", "_placers", "placed", "recorder", "scope")

    def __init__(
        self,
        scope: ActorScope,
        recorder: Recorder,
        placer_for: Callable[[type[Any]], AgentPlacer | None] | None = None,
        placers: set[AgentPlacer] | None = None,
    ) -> None:
        self.scope = scope
        self.recorder = recorder
        self._placer_for = placer_for
        self._placers = placers if placers is not None else set()
        self.placed: dict[str, ActorRef[Any]] = {}
        """The run's agents that live in other processes (a cluster's placed agents)."""

    def get(self, name: str) -> ActorRef[Any] | None:
        """The run's live agent ``name``, or None."""
        placed = self.placed.get(name)
        if placed is not None:
            return placed if placed.alive else None
        return self.scope.get(name)

    async def _start(self, cls: type[Actor], name: str, state: Any) -> ActorRef[Any]:
        """Spawn in the run's scope, or through the cluster's placer for a placed class."""
        placer = self._placer_for(cls) if self._placer_for is not None else None
        if placer is None:
            return await self.scope.spawn(cls, name=name, state=state)
        self._placers.add(placer)
        data = encode_value(state if state is not None else state_type(cls)(), f"state of {name}")
        ref = await placer.spawn(cls, run_id=self.recorder.run_id, name=name, state=data)
        self.placed[name] = ref
        return ref

    async def restore_all(self) -> int:
        """Re-create every agent the view names, with its latest recorded state.

        Their state blobs are read concurrently (one store round trip each);
        the agents are spawned in the view's order. Returns how many.
        """
        rec = self.recorder
        todo = [
            (name, lookup(snap.type, snap.module), snap.state)
            for name, snap in rec.view.agents.items()
            if self.scope.get(name) is None
        ]
        blobs: dict[str, bytes] = {}

        async def fetch(name: str, ref: StateRef) -> None:
            blobs[name] = await rec.store.get_blob(rec.run_id, ref.blob)

        in_blobs = [(name, ref) for name, _, ref in todo if ref is not None and ref.data is None]
        if in_blobs:  # a task group costs a scheduler pass even with nothing in it
            async with anyio.create_task_group() as tg:
                for blob_of, blob_ref in in_blobs:
                    tg.start_soon(fetch, blob_of, blob_ref)
        for name, cls, ref in todo:
            await self.restore(name, cls, ref, blobs.get(name))
        return len(todo)

    async def restore(
        self, name: str, cls: type[Actor], ref: StateRef | None, blob: bytes | None = None
    ) -> ActorRef[Any]:
        """Spawn agent ``name`` in the run's scope with the state ``ref`` points to.

        Raises:
            IncompatibleStateError: the stored state's version cannot become today's class.
        """
        rec = self.recorder
        state = None
        if ref is not None:
            data = ref.data if ref.data is not None else blob
            if data is None:
                data = await rec.store.get_blob(rec.run_id, ref.blob)
            state = decode_agent_state(data, state_type(cls), ref, name)
            if ref.version == rec.note_agent(name, cls):
                # the same bytes again would record no change of state
                rec.last_state[name] = data
        else:
            rec.note_agent(name, cls)
        return await self._start(cls, name, state)

    async def spawn(self, cls: type[Actor], name: str, state: object) -> ActorRef[Any]:
        """Start a new agent of the run (``ctx.spawn``'s live half)."""
        ref = await self._start(cls, name, state)
        self.recorder.note_agent(name, cls)
        return ref
