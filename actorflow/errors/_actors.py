"""Errors about one actor: its messages, its mailbox, its failures."""

from __future__ import annotations

import anyio

from actorflow._text import describe
from actorflow.errors._base import ActorflowError

__all__ = [
    "ActorError",
    "ActorFailedError",
    "ActorNotFoundError",
    "ActorStoppedError",
    "AskTimeoutError",
    "DuplicateActorNameError",
    "EscalationError",
    "MailboxClosedError",
    "MailboxFullError",
    "UnhandledMessageError",
]


class ActorError(ActorflowError):
    """An error about one actor, named by ``actor``."""

    def __init__(self, actor: str, message: str) -> None:
        self.actor = actor
        super().__init__(message)


class UnhandledMessageError(ActorError, TypeError):
    """The actor has no handler for the message's type."""

    def __init__(self, actor: str, message_type: type, handled: tuple[type, ...] = ()) -> None:
        self.message_type = message_type
        self.handled = handled
        names = ", ".join(sorted(t.__qualname__ for t in handled)) or "none"
        super().__init__(
            actor,
            f"actor {actor!r} has no handler for {message_type.__qualname__}; "
            f"it handles: {names}. Add an @handler method taking this type.",
        )


class ActorFailedError(ActorError):
    """A handler raised while handling a message; ``__cause__`` is the original error."""

    def __init__(self, actor: str, error: BaseException) -> None:
        self.error = error
        super().__init__(actor, f"actor {actor!r} failed: {describe(error)}")


class ActorStoppedError(ActorError):
    """The actor is stopped (or stopped while a request was pending)."""

    def __init__(self, actor: str, detail: str = "") -> None:
        extra = f" ({detail})" if detail else ""
        super().__init__(actor, f"actor {actor!r} is stopped{extra}")


class AskTimeoutError(ActorError, TimeoutError):
    """An ``ask`` got no reply within its timeout."""

    def __init__(self, actor: str, timeout: float, message_type: type) -> None:
        self.timeout = timeout
        self.message_type = message_type
        super().__init__(
            actor,
            f"actor {actor!r} did not answer {message_type.__qualname__} within {timeout:g}s",
        )


class DuplicateActorNameError(ActorError):
    """A live actor already has this name in this scope."""

    def __init__(self, actor: str) -> None:
        super().__init__(
            actor, f"an actor named {actor!r} is already running; stop it or pick another name"
        )


class ActorNotFoundError(ActorError, LookupError):
    """No live actor has this name."""

    def __init__(self, actor: str) -> None:
        super().__init__(actor, f"no running actor named {actor!r}")


class MailboxFullError(ActorError, anyio.WouldBlock):
    """``send_nowait`` found the mailbox full; ``await send`` waits instead."""

    def __init__(self, actor: str, size: int) -> None:
        self.size = size
        super().__init__(
            actor,
            f"mailbox of actor {actor!r} is full ({size} messages); "
            "use `await ref.send(...)` to wait for room",
        )


class MailboxClosedError(ActorError, anyio.ClosedResourceError):
    """The actor's mailbox is closed: the actor stopped or is stopping."""

    def __init__(self, actor: str) -> None:
        super().__init__(actor, f"mailbox of actor {actor!r} is closed: the actor has stopped")


class EscalationError(ActorError):
    """An actor failed more often than its supervisor's restart budget allows."""

    def __init__(self, actor: str, restarts: int, within: float, error: BaseException) -> None:
        self.restarts = restarts
        self.within = within
        self.error = error
        super().__init__(
            actor,
            f"actor {actor!r} failed {restarts + 1} times within {within:g}s, over its restart "
            f"budget; last error: {describe(error)}",
        )
