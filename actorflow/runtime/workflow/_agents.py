"""A run's agents: restored from their recorded states, spawned by steps, typed replies.

One ``RunAgents`` per attempt at a run. It holds the run's actor scope
(opened and closed by the attempt) and what the attempt recorded of each
agent's state, so a step's record names a new state only when it changed
(``state_ref``: inline when small, else a blob written first). Its records go
through the recorder, and stored states become agents' states again only
through ``decode_agent_state`` (state versions and upgrades live there).
"""

from __future__ import annotations

import typing
from typing import TYPE_CHECKING, Any

import anyio

from actorflow.runtime.actors import Actor, class_name, handler_for, lookup, state_type
from actorflow.runtime.workflow._replay import decode_agent_state
from actorflow.storage import StateRef, encode_value, state_version

if TYPE_CHECKING:
    from collections.abc import Callable

    from actorflow.runtime.actors import ActorRef, ActorScope
    from actorflow.runtime.workflow._cluster import AgentPlacer
    from actorflow.runtime.workflow._recorder import Recorder

__all__ = ["INLINE_STATE_BYTES", "RunAgents", "reply_type"]

INLINE_STATE_BYTES = 4096
"""States up to this size travel inside their step record instead of a blob."""

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

    __slots__ = (
        "_last_state",
        "_placer_for",
        "_placers",
        "_types",
        "_versions",
        "placed",
        "recorder",
        "scope",
    )

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
        # encoded state last recorded per agent, to record a state only when it changed
        self._last_state: dict[str, bytes] = {}
        self._types: dict[str, str] = {}
        self._versions: dict[str, int] = {}

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
            if ref.version == self._note(name, cls):
                # the same bytes again would record no change of state
                self._last_state[name] = data
        else:
            self._note(name, cls)
        return await self._start(cls, name, state)

    async def spawn(self, cls: type[Actor], name: str, state: object) -> ActorRef[Any]:
        """Start a new agent of the run (``ctx.spawn``'s live half)."""
        ref = await self._start(cls, name, state)
        self._note(name, cls)
        return ref

    # --- recorded states ---------------------------------------------------

    def _note(self, name: str, cls: type[Actor]) -> int:
        """Remember an agent's class (type name, role, state version); return the version.

        The view reads evaluators' confidence by role; every state recorded for
        the agent carries the version of its class's state.
        """
        self._types[name] = class_name(cls)
        self.recorder.view.roles[name] = cls.role
        version = self._versions[name] = state_version(state_type(cls))
        return version

    def version(self, name: str) -> int:
        """The state version of agent ``name``'s class (spawned or restored by this attempt)."""
        return self._versions[name]

    def needs_blob(self, agent: str, data: bytes) -> bool:
        """Whether recording ``data`` as ``agent``'s new state takes a blob write (I/O)."""
        return len(data) > INLINE_STATE_BYTES and self._last_state.get(agent) != data

    def inline_state_ref(self, agent: str, data: bytes) -> StateRef | None:
        """``state_ref`` for a state that needs no blob (``needs_blob`` is false), without I/O."""
        if self._last_state.get(agent) == data:
            return None
        self._last_state[agent] = data
        return StateRef(
            agent=agent,
            type=self._types.get(agent, ""),
            version=self._versions.get(agent, 1),
            data=data,
        )

    async def state_ref(self, agent: str, data: bytes) -> StateRef | None:
        """A reference to ``data`` as ``agent``'s new state, or ``None`` if unchanged."""
        if self._last_state.get(agent) == data:
            return None
        self._last_state[agent] = data
        agent_type = self._types.get(agent, "")
        version = self._versions.get(agent, 1)
        if len(data) <= INLINE_STATE_BYTES:
            return StateRef(agent=agent, type=agent_type, version=version, data=data)
        # The blob must be durable before any record that points at it.
        rec = self.recorder
        blob = await rec.store.put_blob(rec.run_id, data)
        return StateRef(agent=agent, type=agent_type, version=version, blob=blob)
