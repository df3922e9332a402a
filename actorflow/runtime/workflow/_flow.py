"""What a run's asks need of flow control: the runtime's clock and limiters, and each
agent class's retry policy and limit per message type."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from actorflow.runtime.actors import dispatch_table, handler_flow, handler_for
from actorflow.runtime.flow import Limiters, RetryPolicy, SystemClock

if TYPE_CHECKING:
    from collections.abc import Iterable

    from actorflow.runtime.flow import Clock, Limit, Limiter

__all__ = ["FlowControl", "agent_flow", "check_limits"]

_flows: dict[tuple[type, type], tuple[RetryPolicy | None, str | None]] = {}


def agent_flow(actor_cls: type[Any], message_cls: type) -> tuple[RetryPolicy | None, str | None]:
    """The retry policy and limit name of ``actor_cls``'s handler of ``message_cls``.

    The handler's own (``@handler(retry=, limit=)``) win over the class's
    ``retry`` and ``limit`` attributes; None where neither gives one.
    """
    key = (actor_cls, message_cls)
    try:
        return _flows[key]
    except KeyError:
        pass
    fn = handler_for(actor_cls, message_cls)
    retry, limit = handler_flow(fn) if fn is not None else (None, None)
    if retry is None:
        own = getattr(actor_cls, "retry", None)
        retry = own if isinstance(own, RetryPolicy) else None
    if limit is None:
        own = getattr(actor_cls, "limit", None)
        limit = own if isinstance(own, str) else None
    _flows[key] = found = (retry, limit)
    return found


def check_limits(actor_cls: type[Any], limiters: Limiters) -> None:
    """Refuse an agent class whose handlers or ``limit`` name an undeclared limit.

    Raises:
        UnknownLimitError: one of them is not declared.
    """
    own = getattr(actor_cls, "limit", None)
    if isinstance(own, str):
        limiters.check(own, f"agent class {actor_cls.__qualname__}")
    for message_cls, fn in dispatch_table(actor_cls).table.items():
        _, limit = handler_flow(fn)
        if limit is not None:
            limiters.check(
                limit, f"handler {actor_cls.__qualname__}.{fn.__name__} of {message_cls.__name__}"
            )


class FlowControl:
    """A runtime's flow control: its clock and its limiters, shared by all its runs."""

    __slots__ = ("_limiter_of", "clock", "limiters")

    def __init__(self, limits: Iterable[Limit] = (), clock: Clock | None = None) -> None:
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.limiters = Limiters(limits, self.clock)
        self._limiter_of: dict[tuple[type, type], Limiter | None] = {}

    def limiter_for(self, actor_cls: type[Any], message_cls: type) -> Limiter | None:
        """The limiter an ask of ``message_cls`` to ``actor_cls`` takes; None if it takes none.

        One dict lookup once known: every ask pays it, limited or not.

        Raises:
            UnknownLimitError: the limit its handler or class names is not declared.
        """
        key = (actor_cls, message_cls)
        try:
            return self._limiter_of[key]
        except KeyError:
            pass
        _, name = agent_flow(actor_cls, message_cls)
        limiter = self.limiters.get(name, actor_cls) if name is not None else None
        self._limiter_of[key] = limiter
        return limiter
