"""What comes back from a placed agent: its reply slot, and its handler's errors by name."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio

if TYPE_CHECKING:
    from collections.abc import Callable

    from actorflow.runtime.actors import AgentReply

__all__ = ["PlacedReply", "RemoteError", "remote_error"]


class RemoteError(Exception):
    """A placed agent's handler raised; subclasses carry the handler's error type name."""


_remote_errors: dict[str, type[RemoteError]] = {}


def remote_error(type_name: str, message: str) -> RemoteError:
    """An error named like the handler's, so the step's record reads as it would in process."""
    cls = _remote_errors.get(type_name)
    if cls is None:
        cls = _remote_errors[type_name] = type(type_name, (RemoteError,), {})
    return cls(message)


class PlacedReply:
    """The reply slot of a message to a placed agent (an ``AgentReply``).

    Ray's completion fills it (in the event loop's thread) and calls :meth:`settle`.
    """

    __slots__ = ("error", "event", "notify", "state", "value")

    def __init__(self) -> None:
        self.event = anyio.Event()
        self.value: Any = None
        self.error: BaseException | None = None
        self.state = b""
        self.notify: Callable[[AgentReply], object] | None = None

    def settle(self) -> None:
        """Set ``event`` and call ``notify``: ``value`` and ``state``, or ``error``, are in."""
        self.event.set()
        if self.notify is not None:
            self.notify(self)
