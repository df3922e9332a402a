"""LocalRef: the ref to an actor in this process, which reads its cell and mailbox directly."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar, overload

import anyio

from actorflow.errors import AskTimeoutError
from actorflow.runtime.actors._envelope import Reply
from actorflow.runtime.actors._ref import ActorRef

if TYPE_CHECKING:
    from actorflow.runtime.actors._actor import Actor, Request
    from actorflow.runtime.actors._cell import ActorCell
    from actorflow.runtime.actors._envelope import Envelope
    from actorflow.runtime.actors._mailbox import Mailbox, MailboxStatistics

__all__ = ["LocalRef", "cell_of", "local_ref"]

A = TypeVar("A", bound="Actor", covariant=True)
R = TypeVar("R")


class LocalRef(ActorRef[A]):
    """An :class:`ActorRef` to an actor in this process: its mailbox is right here.

    ``send`` and ``ask`` put the message in the actor's bounded mailbox, so
    a full mailbox makes ``send`` wait (backpressure) and ``send_nowait`` raise.
    """

    __slots__ = ("_cell", "_mailbox")

    _cell: ActorCell
    _mailbox: Mailbox[Envelope]

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
        return isinstance(other, LocalRef) and other._cell is self._cell

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
        """Send ``msg`` and wait for the handler's return value (see :meth:`ActorRef.ask`).

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
        """Queue ``msg`` now and return its :class:`Reply`, without waiting for the handler.

        See :meth:`ActorRef.deliver`. Waits while the mailbox is full
        (backpressure); always a cancellation point, and if cancelled the
        message was not queued.

        Raises:
            UnhandledMessageError: the actor has no handler for ``type(msg)``.
            MailboxClosedError: the actor has stopped.
        """
        fn = self._check(msg)
        if meta is not None:
            # a traced step's handler runs in its span (actorflow[otel]); the
            # actor's message loop stays as it is
            around = getattr(meta, "around", None)
            if around is not None:
                fn = around(fn, self._mailbox.statistics().current_size)
        reply = Reply(self._mailbox.new_event(), want_state=True)
        await self._mailbox.put((fn, msg, reply, meta))
        return reply


def local_ref(cell: ActorCell) -> LocalRef[Any]:
    """The ref to the actor of ``cell`` (the scope makes one per cell)."""
    ref: LocalRef[Any] = object.__new__(LocalRef)
    ref._cell = cell
    ref._mailbox = cell.mailbox
    return ref


def cell_of(ref: ActorRef[Any]) -> ActorCell | None:
    """The cell behind ``ref`` if it is a ref to an actor in this process, else None."""
    return ref._cell if isinstance(ref, LocalRef) else None
