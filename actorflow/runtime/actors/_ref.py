"""ActorRef: the only handle to an actor that other code receives."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Generic, NoReturn, TypeVar, overload

import anyio

from actorflow.errors import AskTimeoutError
from actorflow.runtime.actors._envelope import Reply

if TYPE_CHECKING:
    from actorflow.runtime.actors._actor import Actor, Request
    from actorflow.runtime.actors._cell import ActorCell
    from actorflow.runtime.actors._envelope import Envelope
    from actorflow.runtime.actors._mailbox import MailboxStatistics

__all__ = ["ActorRef"]

A = TypeVar("A", bound="Actor", covariant=True)
R = TypeVar("R")


class _NoPublicConstructor(type):
    def __call__(cls, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError(
            f"{cls.__qualname__} has no public constructor; "
            "get one from `await runtime.spawn(...)` or `runtime.get(name)`"
        )

    def _create(cls, *args: Any, **kwargs: Any) -> Any:
        return super().__call__(*args, **kwargs)


class ActorRef(Generic[A], metaclass=_NoPublicConstructor):
    """A cheap, hashable handle to one actor; compare refs to compare actors.

    Get one from ``runtime.spawn`` or ``runtime.get``; never construct it. It
    satisfies :class:`~actorflow.runtime.actors.AgentRef`, what the workflow
    engine needs of an agent.
    """

    __slots__ = ("__weakref__", "_cell", "_mailbox")

    def __init__(self, cell: ActorCell) -> None:
        self._cell = cell
        self._mailbox = cell.mailbox

    @property
    def name(self) -> str:
        """The actor's name, unique within its scope."""
        return self._cell.name

    @property
    def scope(self) -> str | None:
        """The id of the scope (workflow run) the actor lives in; None at the root."""
        return self._cell.scope.id

    @property
    def actor_type(self) -> type[A]:
        """The actor's class."""
        return self._cell.actor_cls  # type: ignore[return-value]

    @property
    def alive(self) -> bool:
        """Whether the actor's task has not finished yet."""
        return not self._cell.done

    def mailbox_statistics(self) -> MailboxStatistics:
        """Queued messages, capacity, blocked senders and whether the mailbox is closed."""
        return self._mailbox.statistics()

    def __hash__(self) -> int:
        return id(self._cell)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ActorRef) and other._cell is self._cell

    def __repr__(self) -> str:
        scope = self._cell.scope.id
        where = f" in {scope!r}" if scope is not None else ""
        return f"<ActorRef {self._cell.actor_cls.__qualname__} {self._cell.name!r}{where}>"

    def _check(self, msg: object) -> Any:
        cell = self._cell
        fn = cell.dispatch.lookup(type(msg))
        if fn is None:
            raise cell.unhandled(msg)
        return fn

    async def send(self, msg: object) -> None:
        """Queue ``msg`` for the actor without waiting for it to be handled.

        Waits while the mailbox is full (backpressure). Always a cancellation
        point; it does not otherwise yield to the scheduler (docs/actors.md).
        A handler's failure is the supervisor's business, not the sender's.

        Raises:
            UnhandledMessageError: the actor has no handler for ``type(msg)``.
            MailboxClosedError: the actor has stopped.
        """
        fn = self._cell.dispatch.lookup(type(msg))
        if fn is None:
            raise self._cell.unhandled(msg)
        # Mailbox.put inlined, reading its privates: this is the hottest call of the library
        mailbox = self._mailbox
        if mailbox.yield_on_put:
            await mailbox._backend.checkpoint()
        else:
            await mailbox._backend.checkpoint_if_cancelled()
        if len(mailbox._buf) < mailbox._max:
            mailbox.put_nowait((fn, msg, None, None))
        else:
            await mailbox.put_checked((fn, msg, None, None))

    def send_nowait(self, msg: object) -> None:
        """Queue ``msg`` if there is room, without ever waiting.

        Raises:
            UnhandledMessageError: the actor has no handler for ``type(msg)``.
            MailboxFullError: the mailbox is full (also ``anyio.WouldBlock``).
            MailboxClosedError: the actor has stopped.
        """
        self._mailbox.put_nowait((self._check(msg), msg, None, None))

    @overload
    async def ask(self, msg: Request[R], *, timeout: float | None = None) -> R: ...  # noqa: ASYNC109
    @overload
    async def ask(self, msg: object, *, timeout: float | None = None) -> object: ...  # noqa: ASYNC109
    async def ask(self, msg: object, *, timeout: float | None = None) -> object:  # noqa: ASYNC109
        """Send ``msg`` and wait for the handler's return value.

        For a message subclassing ``Request[R]`` a type checker sees an ``R``;
        for any other message, an ``object`` to narrow (``isinstance``) or
        ``cast``: only the handler knows its reply type.

        If the asker is cancelled or times out after the message was queued,
        the actor still handles it; only the reply is dropped.

        Raises:
            UnhandledMessageError: the actor has no handler for ``type(msg)``.
            ActorFailedError: the handler raised (its error is the ``__cause__``).
            AskTimeoutError: no reply within ``timeout`` seconds.
            ActorStoppedError: the actor stopped before answering.
            MailboxClosedError: the actor had already stopped.
        """
        fn = self._check(msg)
        reply = Reply(self._mailbox.new_event())
        envelope: Envelope = (fn, msg, reply, None)
        if timeout is None:
            # the fast path: no cancel scope to enter and leave
            await self._mailbox.put(envelope)
            await reply.event.wait()
        else:
            with anyio.move_on_after(timeout):
                await self._mailbox.put(envelope)
                await reply.event.wait()
            if not reply.event.is_set():
                raise AskTimeoutError(self._cell.name, timeout, type(msg))
        if reply.error is not None:
            raise reply.error
        return reply.value

    async def deliver(self, msg: object, meta: object | None = None) -> Reply:
        """Queue ``msg`` now and return its reply slot, without waiting for the handler.

        "Queue now, wait later": the workflow engine puts every message of a
        ``ctx.gather`` in its mailbox, in step order, before it awaits any
        reply. The handler sees ``meta`` as :func:`current_message_meta`. The
        reply gets the actor's state bytes too (:class:`Reply`); a failed
        handler or a stopping actor fails it instead of raising here.

        Waits while the mailbox is full (backpressure); always a cancellation
        point, and if cancelled the message was not queued.

        Raises:
            UnhandledMessageError: the actor has no handler for ``type(msg)``.
            MailboxClosedError: the actor has stopped.
        """
        fn = self._check(msg)
        reply = Reply(self._mailbox.new_event(), want_state=True)
        await self._mailbox.put((fn, msg, reply, meta))
        return reply
