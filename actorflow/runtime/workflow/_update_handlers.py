"""``@update``: an orchestrator method that answers ``runtime.update`` while the run goes on."""

from __future__ import annotations

import typing
from typing import Any, TypeVar, overload

if typing.TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

__all__ = ["UpdateSpec", "update", "update_handlers"]

F = TypeVar("F", bound="Callable[..., Awaitable[Any]]")


class UpdateSpec:
    """What ``@update`` marks: the method, its message and reply types, its validator."""

    __slots__ = ("fn", "message_type", "name", "result_type", "validator")

    def __init__(
        self,
        fn: Callable[..., Awaitable[Any]],
        validator: Callable[[Any, Any], object] | None,
    ) -> None:
        self.fn = fn
        self.name = fn.__name__
        self.validator = validator
        self.message_type: Any = None
        self.result_type: Any = Any

    def resolve(self) -> None:
        """Read the message and reply types from the annotations (once the classes exist)."""
        hints = typing.get_type_hints(self.fn)
        code = self.fn.__code__
        params = code.co_varnames[: code.co_argcount]
        # (self, ctx, message)
        if len(params) != 3 or params[2] not in hints:
            raise TypeError(
                f"@update method {self.fn.__qualname__} must be "
                "`async def name(self, ctx, message: MessageType) -> Reply`"
            )
        self.message_type = hints[params[2]]
        self.result_type = hints.get("return", Any)


@overload
def update(fn: F, /) -> F: ...
@overload
def update(*, validator: Callable[[Any, Any], object] | None = None) -> Callable[[F], F]: ...
def update(
    fn: F | None = None, /, *, validator: Callable[[Any, Any], object] | None = None
) -> F | Callable[[F], F]:
    """Mark ``async def name(self, ctx, message: M) -> R`` as the run's handler of ``M``.

    ``runtime.update(run_id, M(...))`` from any process reaches it while the
    run goes on, and gets its reply. ``validator(self, message)`` (a plain
    function) may raise to reject an update before anything is recorded: the
    caller gets ``UpdateRejectedError`` with its message. An accepted update
    runs as steps of its own (ids ``update/<n>/...``) and its reply is
    recorded, so a recovery never runs a finished update again; one cut off
    by a crash runs again, its recorded steps replayed.
    """

    def mark(f: F) -> F:
        f.__actorflow_update__ = UpdateSpec(f, validator)  # type: ignore[attr-defined]
        return f

    return mark(fn) if fn is not None else mark


_handlers: dict[type, dict[str, UpdateSpec]] = {}


def update_handlers(cls: type, name_of: Callable[[Any], str]) -> dict[str, UpdateSpec]:
    """``cls``'s ``@update`` methods by the type name of their message (``name_of``)."""
    found = _handlers.get(cls)
    if found is None:
        found = {}
        for attr in dir(cls):
            spec = getattr(getattr(cls, attr, None), "__actorflow_update__", None)
            if isinstance(spec, UpdateSpec):
                spec.resolve()
                found[name_of(spec.message_type)] = spec
        _handlers[cls] = found
    return found
