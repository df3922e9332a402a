"""Typed views of the Ray actor handles actorflow calls.

Ray types an actor handle's methods loosely; these small protocols say what
each ``handle.method.remote(...)`` takes and what its ``ObjectRef`` holds.
:func:`as_agents` and :func:`as_host` give a Ray handle its view; code that
hands the handle back to Ray (``ray.kill``) keeps Ray's own type.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ParamSpec, Protocol, TypeVar, cast

if TYPE_CHECKING:
    from ray import ObjectRef
    from ray.actor import ActorHandle

__all__ = ["AgentsHandle", "HostHandle", "RemoteMethod", "as_agents", "as_host"]

P = ParamSpec("P")
T = TypeVar("T")


class RemoteMethod(Protocol[P, T]):
    """One method of a Ray actor handle: ``remote`` calls it and returns its result's ref."""

    def remote(self, *args: P.args, **kwargs: P.kwargs) -> ObjectRef[T]:
        """Queue the call on the Ray actor; the ref's value is the method's return value."""
        ...


class AgentsHandle(Protocol):
    """A handle to a :class:`~actorflow.ray._agents_actor.PlacedAgents` Ray actor."""

    @property
    def spawn(self) -> RemoteMethod[[str, str, str, bytes], str | None]:
        """``spawn(run_id, name, incarnation, state)``: an error message, or None."""
        ...

    @property
    def call(self) -> RemoteMethod[[bytes], bytes]:
        """``call(request)``: an encoded ``CallRequest`` in, an encoded ``CallReply`` out."""
        ...

    @property
    def release(self) -> RemoteMethod[[str], None]:
        """``release(run_id)``: stop the run's agents there."""
        ...

    @property
    def memory(self) -> RemoteMethod[[], int]:
        """``memory()``: the Ray actor's resident memory, in bytes."""
        ...


class HostHandle(Protocol):
    """A handle to a :class:`~actorflow.ray._host.Host` Ray actor."""

    @property
    def info(self) -> RemoteMethod[[], bytes]:
        """``info()``: an encoded ``HostInfo`` once the host's runtime is up."""
        ...

    @property
    def drive(self) -> RemoteMethod[[str], tuple[int, str | None]]:
        """``drive(run_id)``: the host's load and an error message, or None."""
        ...

    @property
    def milestone(self) -> RemoteMethod[[str, bytes], bool]:
        """``milestone(token, data)``: whether the step in flight recorded it."""
        ...

    @property
    def load(self) -> RemoteMethod[[], int]:
        """``load()``: how many runs the host drives."""
        ...

    @property
    def adopt_now(self) -> RemoteMethod[[], None]:
        """``adopt_now()``: look for runs to take over now."""
        ...

    @property
    def memory(self) -> RemoteMethod[[], int]:
        """``memory()``: the host's resident memory, in bytes."""
        ...

    @property
    def stop(self) -> RemoteMethod[[], None]:
        """``stop()``: close the host's runtime."""
        ...


def as_agents(handle: ActorHandle[Any]) -> AgentsHandle:
    """The typed view of a handle to a ``PlacedAgents`` Ray actor (the caller knows it is one)."""
    return cast("AgentsHandle", handle)


def as_host(handle: ActorHandle[Any]) -> HostHandle:
    """The typed view of a handle to a ``Host`` Ray actor (the caller knows it is one)."""
    return cast("HostHandle", handle)
