"""The seam between the workflow engine and the agents it drives.

The engine needs little of a reference to an agent: who it is, where it
lives, whether it runs, and a way to hand it a message now and collect the
reply later. :class:`AgentRef` lists exactly that; :class:`ActorRef` satisfies
it for an actor in this process, and a reference to an agent elsewhere (in
another process, on another host) is meant to implement it too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from collections.abc import Callable

    import anyio

    from actorflow.runtime.actors._actor import Actor

__all__ = ["AgentRef", "AgentReply"]


class AgentReply(Protocol):
    """A reply on its way back from an agent; :class:`Reply` is the local one.

    Once ``event`` is set, either ``error`` is not None, or ``value`` is the
    handler's return value and ``state`` the agent's encoded state right after
    it. ``notify``, if set, is called with the reply as ``event`` is set.
    """

    @property
    def event(self) -> anyio.Event:
        """Set once the reply is in or has failed."""
        ...

    @property
    def value(self) -> Any:
        """The handler's return value."""
        ...

    @property
    def error(self) -> BaseException | None:
        """What the asker gets instead of a value (an ``ActorError``), or None."""
        ...

    @property
    def state(self) -> bytes:
        """The agent's state as msgpack bytes, taken right after the handler returned."""
        ...

    notify: Callable[[AgentReply], object] | None


class AgentRef(Protocol):
    """What the workflow engine needs of a reference to an agent."""

    @property
    def name(self) -> str:
        """The agent's name, unique within its scope."""
        ...

    @property
    def scope(self) -> str | None:
        """The id of the scope (workflow run) the agent lives in; None at the root."""
        ...

    @property
    def actor_type(self) -> type[Actor]:
        """The agent's class."""
        ...

    @property
    def alive(self) -> bool:
        """Whether the agent has not stopped yet."""
        ...

    async def deliver(self, msg: object, meta: object | None = None) -> AgentReply:
        """Queue ``msg`` with ``meta`` now and return its reply, which is filled later.

        Waits only for room in the agent's mailbox. The reply carries the
        agent's state too.
        """
        ...
