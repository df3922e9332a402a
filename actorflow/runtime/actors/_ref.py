"""ActorRef: the only handle to an actor that other code receives."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Generic, NoReturn, TypeVar, overload

import anyio

from actorflow.errors import AskTimeoutError
from actorflow.runtime.actors._cell import Reply

if TYPE_CHECKING:
    from actorflow.runtime.actors._actor import Actor, Request
    from actorflow.runtime.actors._cell import ActorCell
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

    Get one from ``runtime.spawn`` or ``runtime.get``; never construct it.
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
            raise cell._unhandled(msg)
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
            raise self._cell._unhandled(msg)
        # Mailbox.put inlined: this is the hottest call of the library
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
    async def ask(self, msg: object, *, timeout: float | None = None) -> Any: ...  # noqa: ASYNC109
    async def ask(self, msg: object, *, timeout: float | None = None) -> Any:  # noqa: ASYNC109
        """Send ``msg`` and wait for the handler's return value.

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
        await self._exchange((fn, msg, reply, None), reply, timeout)
        if reply.error is not None:
            raise reply.error
        return reply.value

    async def _exchange(
        self,
        envelope: tuple[Any, Any, Reply, object | None],
        reply: Reply,
        timeout: float | None,  # noqa: ASYNC109
    ) -> None:
        if timeout is None:
            # the fast path: no cancel scope to enter and leave
            await self._mailbox.put(envelope)
            await reply.event.wait()
            return
        with anyio.move_on_after(timeout):
            await self._mailbox.put(envelope)
            await reply.event.wait()
        if not reply.event.is_set():
            raise AskTimeoutError(self._cell.name, timeout, type(envelope[1]))

    async def _ask_meta(
        self,
        msg: object,
        *,
        meta: object | None,
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> tuple[Any, bytes]:
        """Like :meth:`ask`, sending ``meta`` with the message (see ``current_message_meta``).

        Returns the reply and the actor's state as msgpack bytes, taken right
        after this handler returned and before any other message ran.
        """
        fn = self._check(msg)
        reply = Reply(self._mailbox.new_event(), want_state=True)
        await self._exchange((fn, msg, reply, meta), reply, timeout)
        if reply.error is not None:
            raise reply.error
        return reply.value, reply.state

    async def _deliver_reply(self, msg: object, meta: object | None) -> Reply:
        """Queue ``msg`` with ``meta`` now; return the reply slot, which gets the state bytes too.

        The workflow engine splits delivery from waiting so ``ctx.gather`` can
        put every message in its mailbox in step order before awaiting any reply.
        """
        fn = self._cell.dispatch.lookup(type(msg))
        if fn is None:
            raise self._cell._unhandled(msg)
        reply = Reply(self._mailbox.new_event(), want_state=True)
        await self._mailbox.put((fn, msg, reply, meta))
        return reply

    async def _send_meta(self, msg: object, *, meta: object | None) -> None:
        """Like :meth:`send`, sending ``meta`` with the message."""
        await self._mailbox.put((self._check(msg), msg, None, meta))
