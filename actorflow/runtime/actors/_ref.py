"""ActorRef: the interface of every handle to an actor that other code receives.

Two kinds of ref implement it, as peers: :class:`~actorflow.runtime.LocalRef`
for an actor in this process, and ``actorflow.ray.PlacedRef`` for an agent
living on a Ray actor. Users get refs from the runtime and never construct one.
"""

from __future__ import annotations

from abc import ABCMeta, abstractmethod
from typing import TYPE_CHECKING, Any, Generic, NoReturn, TypeVar, overload

if TYPE_CHECKING:
    from actorflow.runtime.actors._actor import Actor, Request
    from actorflow.runtime.actors._mailbox import MailboxStatistics
    from actorflow.runtime.actors._protocol import AgentReply

__all__ = ["ActorRef"]

A = TypeVar("A", bound="Actor", covariant=True)
R = TypeVar("R")


class _NoPublicConstructor(ABCMeta):
    """Calling a ref class raises: refs come from the runtime only.

    Each implementation builds its refs with a factory function of its own
    module (compare trio's ``NoPublicConstructor``).
    """

    def __call__(cls, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError(
            f"{cls.__qualname__} has no public constructor; "
            "get one from `await runtime.spawn(...)` or `runtime.get(name)`"
        )


class ActorRef(Generic[A], metaclass=_NoPublicConstructor):
    """A cheap, hashable handle to one actor; compare refs to compare actors.

    Get one from ``runtime.spawn`` or ``runtime.get``; never construct it.
    :class:`~actorflow.runtime.LocalRef` (an actor in this process) and
    ``actorflow.ray.PlacedRef`` (an agent on a Ray actor) implement it. It
    satisfies :class:`~actorflow.runtime.actors.AgentRef`, what the workflow
    engine needs of an agent.
    """

    __slots__ = ("__weakref__",)

    @property
    @abstractmethod
    def name(self) -> str:
        """The actor's name, unique within its scope."""

    @property
    @abstractmethod
    def scope(self) -> str | None:
        """The id of the scope (workflow run) the actor lives in; None at the root."""

    @property
    @abstractmethod
    def actor_type(self) -> type[A]:
        """The actor's class."""

    @property
    @abstractmethod
    def alive(self) -> bool:
        """Whether the actor has not stopped yet."""

    @abstractmethod
    def mailbox_statistics(self) -> MailboxStatistics:
        """Queued messages, capacity, blocked senders and whether the mailbox is closed."""

    @abstractmethod
    def __hash__(self) -> int: ...

    @abstractmethod
    def __eq__(self, other: object) -> bool: ...

    @abstractmethod
    async def send(self, msg: object) -> None:
        """Queue ``msg`` for the actor without waiting for it to be handled.

        Waits while the mailbox is full (backpressure); always a cancellation
        point. A handler's failure is the supervisor's business, not the sender's.

        Raises:
            UnhandledMessageError: the actor has no handler for ``type(msg)``.
            MailboxClosedError: the actor has stopped.
        """

    @abstractmethod
    def send_nowait(self, msg: object) -> None:
        """Queue ``msg`` if there is room, without ever waiting.

        Raises:
            UnhandledMessageError: the actor has no handler for ``type(msg)``.
            MailboxFullError: the mailbox is full (also ``anyio.WouldBlock``).
            MailboxClosedError: the actor has stopped.
        """

    @overload
    async def ask(self, msg: Request[R], *, timeout: float | None = None) -> R: ...  # noqa: ASYNC109
    @overload
    async def ask(self, msg: object, *, timeout: float | None = None) -> object: ...  # noqa: ASYNC109
    @abstractmethod
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

    @abstractmethod
    async def deliver(self, msg: object, meta: object | None = None) -> AgentReply:
        """Queue ``msg`` now and return its reply slot, without waiting for the handler.

        "Queue now, wait later": the workflow engine puts every message of a
        ``ctx.gather`` in its mailbox, in step order, before it awaits any
        reply. The handler sees ``meta`` as :func:`current_message_meta`. The
        reply gets the actor's state bytes too; a failed handler or a stopping
        actor fails it instead of raising here.

        Raises:
            UnhandledMessageError: the actor has no handler for ``type(msg)``.
            MailboxClosedError: the actor has stopped.
        """
