"""The ActorSystem: the kernel's runtime, owning one task group and every actor in it.

The workflow engine's ``Runtime`` subclasses it. What the engine uses of it is
public and documented here: :meth:`ActorSystem.open_scope` (one scope per run),
:meth:`ActorSystem.spawn_now` (its own actors, from code that cannot await) and
:meth:`ActorSystem.require_running` (the task group its background tasks join).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

import anyio

from actorflow import _log
from actorflow._text import MAX_ERROR_MESSAGE, error_message, safe_repr
from actorflow.errors import (
    ActorNotFoundError,
    ConfigurationError,
    EscalationError,
    RuntimeNotRunningError,
)
from actorflow.runtime.actors._actor import Actor
from actorflow.runtime.actors._local import cell_of
from actorflow.runtime.actors._scope import ActorScope, stop_cells
from actorflow.runtime.actors._supervisor import SupervisorPolicy

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import TracebackType
    from typing import Self

    from anyio.abc import TaskGroup

    from actorflow.runtime.actors._ref import ActorRef

__all__ = ["ActorSystem"]

A = TypeVar("A", bound=Actor)
logger = _log.get_logger("actorflow.runtime")


class ActorSystem:
    """Runs actors: ``async with Runtime() as runtime: ...``.

    Every actor is a task in the runtime's one task group, so none outlives the
    ``async with`` block. Leaving the block normally shuts down gracefully:
    mailboxes close, actors handle what is queued and run ``on_stop``; those
    still busy after ``shutdown_timeout`` seconds are cancelled. If an actor
    spawned on the runtime escalates (its restart budget is used up), the block
    is cancelled and exits raising :class:`~actorflow.errors.EscalationError`.

    Errors leave the block as themselves, never wrapped in an exception group:
    the body's own exception, the escalation, or an error of a task started in
    :meth:`require_running`'s task group. When several happen, the first
    leaves and the others are added to it as notes (``__notes__``), except
    that ``KeyboardInterrupt`` and ``SystemExit`` always come first. A
    cancellation from outside (an enclosing cancel scope) leaves as the
    event loop's own cancellation.

    Args:
        mailbox_size: default mailbox capacity of new actors.
        supervisor: default supervisor policy of new actors.
        shutdown_timeout: seconds actors get to drain at exit before cancellation.
    """

    def __init__(
        self,
        *,
        mailbox_size: int = 256,
        supervisor: SupervisorPolicy | None = None,
        shutdown_timeout: float = 5.0,
    ) -> None:
        if mailbox_size < 1:
            raise ConfigurationError("mailbox_size", mailbox_size, "an int >= 1")
        if shutdown_timeout < 0:
            raise ConfigurationError("shutdown_timeout", shutdown_timeout, "seconds >= 0")
        self.mailbox_size = mailbox_size
        self.supervisor = supervisor if supervisor is not None else SupervisorPolicy()
        self.shutdown_timeout = shutdown_timeout
        self._task_group: TaskGroup | None = None
        self._root = ActorScope(self, None, self._fail)
        self._scopes: dict[str, ActorScope] = {}
        self._failure: EscalationError | None = None
        self._live = 0
        self._idle: anyio.Event | None = None

    # --- lifecycle -----------------------------------------------------------

    async def __aenter__(self) -> Self:
        if self._task_group is not None:
            raise RuntimeError("this Runtime is already running")
        task_group = anyio.create_task_group()
        await task_group.__aenter__()
        self._task_group = task_group
        logger.info("runtime_started")
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        task_group = self._task_group
        assert task_group is not None
        body_error = exc
        failed_first = self._failure is not None  # the escalation ended the body
        if exc is None and self._failure is None:
            try:
                await self._drain()
            except BaseException as error:  # cancelled (by an escalation or from outside)
                exc = error
        self._task_group = None
        self._root.refuse_spawns()
        task_group.cancel_scope.cancel()  # whoever is still running past the deadline
        errors: list[BaseException] = []
        try:
            exc_tb = exc.__traceback__ if exc is not None else None
            handled = await task_group.__aexit__(type(exc) if exc else None, exc, exc_tb)
        except BaseException as raised:
            # anyio wraps the body's exception and the tasks' errors in a group
            errors = _errors_in(raised)
            if not errors and self._failure is None:
                raise  # only the event loop's cancellation: it leaves as it is
        else:
            if not handled and exc is not None and exc is not body_error:
                raise exc  # the drain was cancelled from outside
        finally:
            logger.info("runtime_stopped", failed=self._failure is not None)
        first = self._first_error(errors, body_error, failed_first)
        if first is not None and first is not body_error:
            raise first
        # otherwise the body's own exception, if any, leaves as the block exits

    def _first_error(
        self, errors: list[BaseException], body_error: BaseException | None, failed_first: bool
    ) -> BaseException | None:
        """The one error that leaves the block; the others become its notes.

        In order: the escalation if it ended the body, the body's own error
        (a cancellation is none), the escalation, then the tasks' errors; but
        ``KeyboardInterrupt`` or ``SystemExit`` first wherever it is.
        """
        failure = self._failure
        body = None if body_error is None or _is_cancellation(body_error) else body_error
        ordered: list[BaseException] = []
        if failure is not None and (failed_first or body is None):
            ordered.append(failure)
        for error in (body, failure, *errors):
            if error is not None and all(error is not seen for seen in ordered):
                ordered.append(error)
        if not ordered:
            return None
        ordered.sort(key=lambda e: not isinstance(e, KeyboardInterrupt | SystemExit))
        first = ordered[0]
        for other in ordered[1:]:
            first.add_note(
                f"also raised as the actor system stopped: {safe_repr(other, MAX_ERROR_MESSAGE)}"
            )
        return first

    async def _drain(self) -> None:
        cells = [cell for scope in self._all_scopes() for cell in scope.refuse_spawns()]
        with anyio.move_on_after(self.shutdown_timeout):
            for cell in cells:
                cell.mailbox.close()
            await self._wait_idle()

    async def _wait_idle(self) -> None:
        while self._live:
            self._idle = anyio.Event()
            await self._idle.wait()

    # what the scopes tell their system (ScopeHost)

    def _actor_started(self) -> None:
        self._live += 1

    def _actor_ended(self) -> None:
        self._live -= 1
        if self._live == 0 and self._idle is not None:
            self._idle.set()

    def _scope_closed(self, scope: ActorScope) -> None:
        if scope.id is not None and self._scopes.get(scope.id) is scope:
            del self._scopes[scope.id]

    def _all_scopes(self) -> list[ActorScope]:
        return [self._root, *self._scopes.values()]

    def require_running(self, action: str) -> TaskGroup:
        """Check that the system runs and return the task group its actors run in.

        A task started in the group belongs to the system: it is cancelled if
        still running when the ``async with`` block ends (after the actors
        drained), and its error, if any, leaves the block (see the class).
        The workflow engine runs its runs there.

        Args:
            action: what the caller is about to do, for the error (``"start a run"``).

        Raises:
            RuntimeNotRunningError: outside the ``async with`` block, or after
                an escalation failed the system.
        """
        if self._task_group is None or self._failure is not None:
            raise RuntimeNotRunningError(action)
        return self._task_group

    def _fail(self, error: EscalationError) -> None:
        """An actor of the root scope escalated: the runtime fails as a whole."""
        if self._failure is None:
            self._failure = error
            logger.error("runtime_failed", actor=error.actor, error=error_message(error))
            if self._task_group is not None:
                self._task_group.cancel_scope.cancel()

    @property
    def running(self) -> bool:
        """Whether the runtime is inside its ``async with`` block and has not failed."""
        return self._task_group is not None and self._failure is None

    # --- actors ------------------------------------------------------------

    async def spawn(
        self,
        actor_cls: type[A],
        *,
        name: str,
        state: Any = None,
        supervisor: SupervisorPolicy | None = None,
        mailbox_size: int | None = None,
    ) -> ActorRef[A]:
        """Start an actor and return its ref; its ``on_start`` runs soon after.

        Args:
            actor_cls: the Actor subclass.
            name: unique among the runtime's actors; letters, digits, ``-_.``.
            state: the initial state (a private copy is made); default
                ``StateType()``.
            supervisor: overrides the runtime's default policy.
            mailbox_size: overrides the runtime's default capacity.

        Raises:
            InvalidNameError: ``name`` is not a valid actor name.
            DuplicateActorNameError: a live actor already has this name.
            ActorDefinitionError: the class is declared wrongly.
            RuntimeNotRunningError: outside ``async with Runtime()``.
        """
        return self._root.spawn_now(
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
        """:meth:`spawn`, for code that cannot await; the same arguments and errors.

        The actor's task starts soon after. The workflow engine starts its own
        system actors (its checkpointer) this way, at the root like any
        actor spawned on the runtime: they escalate to the runtime.
        """
        return self._root.spawn_now(
            actor_cls, name=name, state=state, supervisor=supervisor, mailbox_size=mailbox_size
        )

    def get(self, name: str) -> ActorRef[Any] | None:
        """The ref of the live root-scope actor called ``name``, or None."""
        return self._root.get(name)

    def lookup(self, name: str) -> ActorRef[Any]:
        """The ref of the live root-scope actor called ``name``.

        Raises:
            ActorNotFoundError: no live actor has that name.
        """
        ref = self._root.get(name)
        if ref is None:
            raise ActorNotFoundError(name)
        return ref

    async def stop(self, ref: ActorRef[Any], *, timeout: float | None = None) -> None:  # noqa: ASYNC109
        """Stop one actor and wait until it has stopped.

        It handles the messages already queued and runs ``on_stop``; after
        ``timeout`` seconds it is cancelled instead. Stopping a stopped actor
        does nothing.

        Raises:
            ActorNotFoundError: ``ref`` is not a ref to an actor in this process.
        """
        cell = cell_of(ref)  # a ref is the only handle users hold to a cell
        if cell is None:
            raise ActorNotFoundError(ref.name)
        await stop_cells([cell], timeout)

    # --- scopes (for the workflow engine) ------------------------------------

    def open_scope(
        self, scope_id: str, *, on_escalate: Callable[[EscalationError], None]
    ) -> ActorScope:
        """Open a scope for a workflow run: its own actor names, its own escalation.

        Actors spawned with ``scope.spawn`` live in the system's task group
        like any other, but their names only need to be unique in the scope,
        and one that uses up its restart budget calls ``on_escalate``
        (synchronously, from the actor's task) instead of failing the system.
        ``await scope.aclose()`` stops the scope's actors and closes it, after
        which its id can be opened again.

        Raises:
            ConfigurationError: a scope with this id is open.
            RuntimeNotRunningError: outside ``async with Runtime()``.
        """
        self.require_running("open a scope")
        if scope_id in self._scopes:
            raise ConfigurationError("scope_id", scope_id, "an id no open scope has")
        scope = ActorScope(self, scope_id, on_escalate)
        self._scopes[scope_id] = scope
        return scope


def _is_cancellation(error: BaseException) -> bool:
    return isinstance(error, anyio.get_cancelled_exc_class())


def _errors_in(raised: BaseException) -> list[BaseException]:
    """The exceptions in ``raised`` (flattening exception groups) but cancellations."""
    if isinstance(raised, BaseExceptionGroup):
        return [leaf for sub in raised.exceptions for leaf in _errors_in(sub)]
    return [] if _is_cancellation(raised) else [raised]
