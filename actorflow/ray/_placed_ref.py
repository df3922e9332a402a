"""PlacedRef: the :class:`~actorflow.runtime.ActorRef` to an agent living on a Ray actor.

A run's host holds one per placed agent, and the engine drives it like a
local agent: ``deliver`` hands the message to the Ray actor and returns a
reply slot that Ray's completion fills. A handler's ``save_progress`` calls
the host back (``Host.milestone``), which records the milestone in the run's
log before the handler goes on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar, overload

import anyio

from actorflow.errors import AskTimeoutError
from actorflow.runtime import ActorRef
from actorflow.runtime.actors import Actor, MailboxStatistics

if TYPE_CHECKING:
    from actorflow.ray._agent import PlacedAgent
    from actorflow.ray._reply import PlacedReply
    from actorflow.runtime.actors import Request

__all__ = ["PlacedRef", "placed_ref"]

A = TypeVar("A", bound=Actor, covariant=True)
R = TypeVar("R")


class PlacedRef(ActorRef[A]):
    """An :class:`~actorflow.runtime.ActorRef` to an agent living on a Ray actor.

    ``ask``, ``send`` and the engine's ``deliver`` go through Ray; the
    mailbox that gives backpressure is the Ray actor's.
    """

    __slots__ = ("_agent",)

    _agent: PlacedAgent

    @property
    def name(self) -> str:
        """The agent's name, unique within its run."""
        return self._agent.name

    @property
    def scope(self) -> str | None:
        """The run the agent belongs to."""
        return self._agent.run_id

    @property
    def actor_type(self) -> type[A]:
        """The agent's class."""
        return self._agent.cls  # type: ignore[return-value]

    @property
    def alive(self) -> bool:
        """Whether the run still holds the agent (its Ray actor is restarted when lost)."""
        return not self._agent.stopped

    def mailbox_statistics(self) -> MailboxStatistics:
        """The agent's mailbox as this sender sees it; the mailbox itself is in its Ray actor.

        ``current_size``: messages this process handed to Ray that have no
        answer yet (queued there or being handled). ``max_size`` is 0: Ray's
        queue has no bound a sender waits on, so ``waiting_senders`` is 0 too.
        ``closed``: the run let go of the agent.
        """
        agent = self._agent
        return MailboxStatistics(
            current_size=agent.in_flight, max_size=0, waiting_senders=0, closed=agent.stopped
        )

    def __hash__(self) -> int:
        return id(self._agent)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PlacedRef) and other._agent is self._agent

    def __repr__(self) -> str:
        agent = self._agent
        return f"<PlacedRef {agent.cls.__qualname__} {agent.name!r} in {agent.run_id!r}>"

    async def deliver(self, msg: object, meta: object | None = None) -> PlacedReply:
        """Hand ``msg`` to the agent through Ray now; its reply slot is filled later.

        Raises:
            ActorStoppedError: the run's attempt ended.
            UnhandledMessageError: the agent's class has no handler for it.
            ConfigurationError: no node took the agent within its start timeout.
        """
        return await self._agent.deliver(msg, meta)

    async def send(self, msg: object) -> None:
        """Hand ``msg`` to the agent through Ray without waiting for its handler.

        Raises:
            ActorStoppedError: the run's attempt ended.
            UnhandledMessageError: the agent's class has no handler for it.
        """
        await self._agent.deliver(msg, None)

    def send_nowait(self, msg: object) -> None:
        """Hand ``msg`` to the agent through Ray now, without waiting (no bound: never full).

        Ordered with this sender's other messages to the agent, like ``send``.

        Raises:
            ActorStoppedError: the run's attempt ended, or the agent's Ray
                actor was lost and is started again by the next ``await send``.
            UnhandledMessageError: the agent's class has no handler for it.
        """
        self._agent.deliver_now(msg)

    @overload
    async def ask(self, msg: Request[R], *, timeout: float | None = None) -> R: ...  # noqa: ASYNC109
    @overload
    async def ask(self, msg: object, *, timeout: float | None = None) -> object: ...  # noqa: ASYNC109
    async def ask(self, msg: object, *, timeout: float | None = None) -> object:  # noqa: ASYNC109
        """Send ``msg`` through Ray and wait for the handler's reply (as ``ActorRef.ask``).

        Raises:
            UnhandledMessageError: the agent's class has no handler for it.
            ActorFailedError: the handler raised (its error is the ``__cause__``).
            AskTimeoutError: no reply within ``timeout`` seconds.
            ActorStoppedError: the run's attempt ended, or the agent's Ray actor died.
        """
        reply = await self._agent.deliver(msg, None)
        if timeout is None:
            await reply.event.wait()
        else:
            with anyio.move_on_after(timeout):
                await reply.event.wait()
            if not reply.event.is_set():
                raise AskTimeoutError(self._agent.name, timeout, type(msg))
        if reply.error is not None:
            raise reply.error
        return reply.value


def placed_ref(agent: PlacedAgent) -> PlacedRef[Any]:
    """The ref to the placed ``agent`` (the placer makes one per agent it starts)."""
    ref: PlacedRef[Any] = object.__new__(PlacedRef)
    ref._agent = agent
    return ref
