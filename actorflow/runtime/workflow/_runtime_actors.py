"""The actor half of the ``Runtime`` facade: its actors, passed on to its ``ActorSystem``.

``Runtime`` has an :class:`ActorSystem` (it is not one): ``spawn``, ``get``,
``lookup``, ``stop`` and the defaults new actors get are its verbs too, and
live here so that ``_runtime.py`` holds the verbs of runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from actorflow.runtime.actors import Actor, ActorSystem

if TYPE_CHECKING:
    from actorflow.runtime.actors import ActorRef, SupervisorPolicy

__all__ = ["RuntimeActors"]

A = TypeVar("A", bound=Actor)


class RuntimeActors:
    """A runtime's actors: spawned, found and stopped through its actor system."""

    def __init__(self, system: ActorSystem) -> None:
        self._system = system

    @property
    def mailbox_size(self) -> int:
        """Default mailbox capacity of new actors."""
        return self._system.mailbox_size

    @mailbox_size.setter
    def mailbox_size(self, size: int) -> None:
        self._system.mailbox_size = size

    @property
    def supervisor(self) -> SupervisorPolicy:
        """Default supervisor policy of new actors."""
        return self._system.supervisor

    @supervisor.setter
    def supervisor(self, policy: SupervisorPolicy) -> None:
        self._system.supervisor = policy

    @property
    def shutdown_timeout(self) -> float:
        """Seconds actors (and runs) get to stop at exit before cancellation."""
        return self._system.shutdown_timeout

    @shutdown_timeout.setter
    def shutdown_timeout(self, seconds: float) -> None:
        self._system.shutdown_timeout = seconds

    @property
    def running(self) -> bool:
        """Whether the runtime is inside its ``async with`` block and has not failed."""
        return self._system.running

    async def spawn(
        self,
        actor_cls: type[A],
        *,
        name: str,
        state: Any = None,
        supervisor: SupervisorPolicy | None = None,
        mailbox_size: int | None = None,
    ) -> ActorRef[A]:
        return await self._system.spawn(
            actor_cls, name=name, state=state, supervisor=supervisor, mailbox_size=mailbox_size
        )

    # One text for both: a runtime's help for these is its actor system's.
    spawn.__doc__ = ActorSystem.spawn.__doc__

    def get(self, name: str) -> ActorRef[Any] | None:
        """The ref of the live root-scope actor called ``name``, or None."""
        return self._system.get(name)

    def lookup(self, name: str) -> ActorRef[Any]:
        """The ref of the live root-scope actor called ``name``.

        Raises:
            ActorNotFoundError: no live actor has that name.
        """
        return self._system.lookup(name)

    async def stop(self, ref: ActorRef[Any], *, timeout: float | None = None) -> None:  # noqa: ASYNC109
        await self._system.stop(ref, timeout=timeout)

    stop.__doc__ = ActorSystem.stop.__doc__
