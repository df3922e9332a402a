"""Actor scopes: a namespace of actor names and an escalation target.

The actor system has a root scope (escalating to the system itself); the
workflow engine opens one scope per run with ``runtime.open_scope``, so two
runs can both have ``researcher-0`` and a failing agent escalates to its run.
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import anyio
import msgspec

from actorflow import _log
from actorflow._text import error_message
from actorflow.errors import (
    ActorDefinitionError,
    ActorStoppedError,
    ConfigurationError,
    DuplicateActorNameError,
    EscalationError,
)
from actorflow.runtime.actors._actor import Actor, NoneType, dispatch_table, state_type
from actorflow.runtime.actors._cell import NONE_BYTES, ActorCell, decoder_for, encode_state
from actorflow.runtime.actors._local import local_ref
from actorflow.runtime.actors._names import validate_name

if TYPE_CHECKING:
    from collections.abc import Callable

    from anyio.abc import TaskGroup

    from actorflow.runtime.actors._ref import ActorRef
    from actorflow.runtime.actors._supervisor import SupervisorPolicy

__all__ = ["ActorScope", "ScopeHost", "stop_cells"]

A = TypeVar("A", bound=Actor)
logger = _log.get_logger("actorflow.runtime")


class ScopeHost(Protocol):
    """What a scope needs of the actor system that owns it (an ``ActorSystem``)."""

    @property
    def mailbox_size(self) -> int:
        """The default mailbox capacity."""
        ...

    @property
    def supervisor(self) -> SupervisorPolicy:
        """The default supervisor policy."""
        ...

    def require_running(self, action: str) -> TaskGroup:
        """The task group actors run in; raises if the system is not running."""
        ...

    # underscored: the system's side of this contract, not for its users
    def _actor_started(self) -> None: ...
    def _actor_ended(self) -> None: ...
    def _scope_closed(self, scope: ActorScope) -> None: ...


class ActorScope:
    """A set of actors with their own names, stopped together.

    Attributes:
        id: the scope's id (a run id), or None for the runtime's root scope.
        emit_sink: where its actors' ``emit(event)`` goes, called with the
            actor's name and the event (set by the workflow engine for a
            run's scope before any spawn); None: ``emit`` does nothing.
    """

    emit_sink: Callable[[str, object], None] | None = None

    def __init__(
        self,
        host: ScopeHost,
        scope_id: str | None,
        on_escalate: Callable[[EscalationError], None],
    ) -> None:
        self.id = scope_id
        self._host = host
        self._on_escalate = on_escalate
        self._cells: dict[str, ActorCell] = {}
        self._closed = False

    def __repr__(self) -> str:
        return f"<ActorScope {self.id!r} actors={len(self._cells)}>"

    async def spawn(
        self,
        actor_cls: type[A],
        *,
        name: str,
        state: Any = None,
        supervisor: SupervisorPolicy | None = None,
        mailbox_size: int | None = None,
    ) -> ActorRef[A]:
        """Start an actor in this scope; see :meth:`ActorSystem.spawn`."""
        return self.spawn_now(
            actor_cls, name=name, state=state, supervisor=supervisor, mailbox_size=mailbox_size
        )

    def spawn_now(
        self,
        actor_cls: type[A],
        *,
        name: str,
        state: Any = None,
        supervisor: SupervisorPolicy | None = None,
        mailbox_size: int | None = None,
    ) -> ActorRef[A]:
        """:meth:`spawn` for code that cannot await: the actor's task starts soon after."""
        host = self._host
        task_group = host.require_running("spawn an actor")
        if self._closed:
            raise ActorStoppedError(name, f"scope {self.id!r} is closed")
        validate_name(name)
        if name in self._cells:
            raise DuplicateActorNameError(name)
        if not (isinstance(actor_cls, type) and issubclass(actor_cls, Actor)):
            raise ActorDefinitionError(repr(actor_cls), "spawn takes a subclass of Actor")
        size = host.mailbox_size if mailbox_size is None else mailbox_size
        if size < 1:
            raise ConfigurationError("mailbox_size", size, "an int >= 1")
        state_cls = state_type(actor_cls)
        state, state_bytes = _initial_state(actor_cls, name, state_cls, state)
        cell = ActorCell(
            actor_cls=actor_cls,
            name=name,
            scope=self,
            state=state,
            state_bytes=state_bytes,
            state_cls=state_cls,
            dispatch=dispatch_table(actor_cls),
            policy=supervisor if supervisor is not None else host.supervisor,
            mailbox_size=size,
        )
        ref: ActorRef[A] = local_ref(cell)
        cell.ref = ref
        self._cells[name] = cell
        host._actor_started()
        task_group.start_soon(cell.main, name=f"actor {name}")
        if _log.enabled("info"):
            logger.info("actor_spawned", actor=name, scope=self.id, type=actor_cls.__qualname__)
        return ref

    def get(self, name: str) -> ActorRef[Any] | None:
        """The ref of the live actor called ``name`` in this scope, or None."""
        cell = self._cells.get(name)
        return None if cell is None else cell.ref

    def refuse_spawns(self) -> list[ActorCell]:
        """Spawn no more actors here; return the live ones (the system drains them at exit)."""
        self._closed = True
        return list(self._cells.values())

    async def aclose(self, *, timeout: float | None = None) -> None:  # noqa: ASYNC109
        """Stop every actor of the scope and wait for them; no more spawns.

        Each actor first handles what is already in its mailbox; after
        ``timeout`` seconds (or if this call is cancelled) the rest are
        cancelled, and their pending asks fail with ActorStoppedError. The
        system forgets the scope, so its id can be opened again.
        """
        try:
            await stop_cells(self.refuse_spawns(), timeout)
        finally:
            self._host._scope_closed(self)

    def escalate(self, error: EscalationError) -> None:
        """Called by an actor that used up its restart budget."""
        self._on_escalate(error)

    def forget(self, cell: ActorCell) -> None:
        """Called by an actor's task as it ends."""
        if self._cells.get(cell.name) is cell:
            del self._cells[cell.name]
        self._host._actor_ended()


async def stop_cells(cells: list[ActorCell], timeout: float | None) -> None:  # noqa: ASYNC109
    """Close the cells' mailboxes, let them drain for ``timeout``, then cancel them."""
    if timeout is not None and all(cell.ends_when_closed for cell in cells):
        timeout = None  # idle actors with nothing to run on the way out: no deadline
    for cell in cells:
        cell.mailbox.close()
    try:
        with anyio.move_on_after(timeout) if timeout is not None else nullcontext():
            for cell in cells:
                await cell.wait_done()
    finally:
        late = [cell for cell in cells if not cell.done]
        for cell in late:
            cell.cancel()
        if late:
            with anyio.CancelScope(shield=True):
                for cell in late:
                    await cell.wait_done()


def _initial_state(
    actor_cls: type[Actor], name: str, state_cls: Any, state: Any
) -> tuple[Any, bytes]:
    """The actor's starting state (a private copy) and its encoded bytes."""
    if state_cls is NoneType:
        if state is not None:
            raise ConfigurationError(
                "state", state, f"None: {actor_cls.__qualname__} declares no `state: Type`"
            )
        return None, NONE_BYTES
    given = state is not None
    if not given:
        try:
            state = state_cls()
        except Exception as exc:
            raise ActorDefinitionError(
                actor_cls.__qualname__,
                f"its state type {state_cls!r} cannot be built without arguments "
                f"({error_message(exc)}); give a default to every field or pass `state=` to spawn",
            ) from exc
    data = encode_state(state, name)
    if given:
        # a decoded copy: the caller's object is never shared with the actor
        try:
            state = decoder_for(state_cls).decode(data)
        except msgspec.ValidationError as exc:
            raise ConfigurationError(
                "state", state, f"a valid {state_cls!r} ({error_message(exc)})"
            ) from exc
    return state, data
