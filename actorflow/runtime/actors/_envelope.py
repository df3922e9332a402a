"""What travels through a mailbox, and the reply slot that comes back.

Kept apart from the cell and the ref, which both use them, so that neither
imports the other for them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

    import anyio

    from actorflow.runtime.actors._protocol import AgentReply

__all__ = ["Envelope", "Reply"]


class Reply:
    """The one-shot slot an ``ask`` or a :meth:`~ActorRef.deliver` waits on.

    The actor's task fills it once: ``value`` (and ``state`` when asked for)
    or ``error``; then it sets ``event`` and calls ``notify``. It satisfies
    :class:`~actorflow.runtime.actors.AgentReply`. Users of ``ask`` never see one.

    Attributes:
        event: set once the reply is in or has failed; ``await event.wait()``.
        value: the handler's return value (None until then, and after a failure).
        error: None, or what the asker gets: :class:`~actorflow.errors.ActorFailedError`
            (the handler's error as its ``__cause__``) or
            :class:`~actorflow.errors.ActorStoppedError`.
        state: with ``want_state``, the actor's state as msgpack bytes taken
            right after the handler returned, before any other message ran;
            ``b""`` otherwise, and after a failure.
        want_state: whether the actor fills ``state``.
        notify: None, or called with the reply, synchronously in the actor's
            task, right after ``event`` is set. ``ctx.gather`` watches many
            replies with it; whoever sets it after delivery must also check
            ``event.is_set()``, as the reply may already be in.
    """

    __slots__ = ("error", "event", "notify", "state", "value", "want_state")

    def __init__(self, event: anyio.Event, want_state: bool = False) -> None:
        self.event = event
        self.value: Any = None
        self.error: BaseException | None = None
        self.state: bytes = b""
        self.want_state = want_state
        self.notify: Callable[[AgentReply], object] | None = None

    def succeed(self) -> None:
        """Mark the reply in (``value`` and ``state`` are set): wake the waiter."""
        self.event.set()
        if self.notify is not None:
            self.notify(self)

    def fail(self, error: BaseException) -> None:
        """Fail the reply with ``error``, unless it is already in."""
        if not self.event.is_set():
            self.error = error
            self.event.set()
            if self.notify is not None:
                self.notify(self)


# (handler, message, reply slot or None for a send, meta or None); the sender
# looks the handler up anyway (to refuse unhandled messages), so it passes it on.
Envelope = tuple[Any, Any, Reply | None, object | None]
