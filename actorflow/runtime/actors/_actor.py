"""The Actor base class, the @handler decorator and per-class dispatch tables.

Annotations are resolved lazily, at an actor class's first spawn, so message
and state classes may be defined after the actor, inside a function, or in a
module using ``from __future__ import annotations``.
"""

from __future__ import annotations

import inspect
import sys
import types
import typing
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar, overload

import msgspec

from actorflow.errors import ActorDefinitionError
from actorflow.runtime.actors._registry import register

if TYPE_CHECKING:
    from actorflow.runtime.flow import RetryPolicy

__all__ = [
    "Actor",
    "Dispatch",
    "Request",
    "current_message_meta",
    "dispatch_table",
    "handler",
    "handler_flow",
    "handler_for",
    "state_type",
]

R = TypeVar("R")
F = TypeVar("F", bound=Callable[..., Awaitable[Any]])

_MARK = "__actorflow_handles__"
_RETRY = "__actorflow_retry__"
_LIMIT = "__actorflow_limit__"
_AUTO = object()  # marks a handler whose message type comes from its annotation
NoneType = type(None)

message_meta: ContextVar[object | None] = ContextVar("actorflow_message_meta", default=None)


def current_message_meta() -> object | None:
    """The metadata sent with the message being handled, or None.

    Set by the actor loop while a handler runs; the workflow engine puts a
    step's context (with its idempotency key) there.
    """
    return message_meta.get()


class Request(msgspec.Struct, Generic[R], frozen=True):
    """Base for messages whose reply type is ``R``, so ``ask`` returns an ``R``.

    Messages are values: a Request subclass is frozen too. Example::

        class GetTotal(Request[int], frozen=True):
            pass

        total = await counter.ask(GetTotal())   # a type checker sees an int
    """


@overload
def handler(fn: F, /) -> F: ...
@overload
def handler(
    message_type: type, /, *, retry: RetryPolicy | None = None, limit: str | None = None
) -> Callable[[F], F]: ...
@overload
def handler(*, retry: RetryPolicy | None = None, limit: str | None = None) -> Callable[[F], F]: ...
def handler(
    arg: Any = _AUTO, /, *, retry: RetryPolicy | None = None, limit: str | None = None
) -> Any:
    """Mark an async method as the handler of one message type.

    Used bare, the message type is the annotation of the method's first
    parameter after ``self`` (a union registers every member); ``@handler(Add)``
    names it explicitly. A handler also handles subclasses of its type; the
    most specific handler wins. The return value is the reply to ``ask``.
    ``retry`` (a ``RetryPolicy``) and ``limit`` (a name declared with
    ``Runtime(limits=...)``) apply when a workflow step asks it.

    Raises:
        ActorDefinitionError: the method is not ``async def``, or ``limit`` is not a string.
    """
    if limit is not None and not isinstance(limit, str):
        raise ActorDefinitionError(repr(limit), "a handler's limit is a limit's name (a str)")
    if isinstance(arg, type) or arg is _AUTO:
        explicit = arg

        def mark(fn: Any) -> Any:
            return _mark(fn, explicit, retry, limit)

        return mark
    return _mark(arg, _AUTO, retry, limit)


def _mark(fn: Any, message_type: object, retry: object, limit: str | None) -> Any:
    if not inspect.iscoroutinefunction(fn):
        raise ActorDefinitionError(
            getattr(fn, "__qualname__", repr(fn)), "a handler must be an `async def` method"
        )
    setattr(fn, _MARK, message_type)
    if retry is not None:
        setattr(fn, _RETRY, retry)
    if limit is not None:
        setattr(fn, _LIMIT, limit)
    return fn


class Actor:
    """Base class of actors: a typed state and async message handlers.

    Declare the state with a class annotation (``state: Tally``); it is built
    with ``Tally()`` unless ``spawn(..., state=...)`` gives one. The state must
    be msgspec-encodable: it is what snapshots hold and what a restart restores.
    An actor handles one message at a time. Users never instantiate actors;
    ``runtime.spawn`` does.

    Attributes:
        name: the actor's name, unique in its scope.
        state: the actor's whole checkpointable state.
        role: a marker the workflow engine reads (``"orchestrator"``,
            ``"specialist"``, ``"evaluator"`` in subclasses).
    """

    role: ClassVar[str] = "actor"
    name: str
    state: Any
    # where ``emit`` goes: set by the actor's scope when it is built (a run's event hub)
    _actorflow_emit: Callable[[str, object], None] | None = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # Remember where the class was defined so annotations naming classes
        # local to a function can be resolved later, at first spawn.
        frame = sys._getframe(1)
        while frame is not None and frame.f_code.co_name == "__init_subclass__":
            frame = frame.f_back  # type: ignore[assignment]
        local = frame is not None and frame.f_locals is not frame.f_globals
        cls._actorflow_frame = frame if local else None  # type: ignore[attr-defined]
        # Stored runs name agent classes; recovery finds them here, never by import.
        register(cls)

    async def on_start(self) -> None:
        """Called before the first message and again after each restart."""

    async def on_stop(self) -> None:
        """Called when the actor stops gracefully, or before it is restarted."""

    def __repr__(self) -> str:
        return f"<{type(self).__qualname__} {getattr(self, 'name', '?')!r}>"

    def emit(self, event: object) -> None:
        """Stream ``event`` to the readers of its run's ``handle.events()``, now.

        Synchronous and cheap: it never blocks, never waits for a reader and
        never raises for a full buffer (a reader too far behind loses the
        oldest events, counted). The event is passed as is, neither copied
        nor encoded (emit immutable values, such as frozen msgspec Structs);
        nothing is recorded, and a recovery that runs the code again emits
        again. Readers see it tagged with this actor's name, in emit order.
        On a store with an event stream (memory, file) it is also encoded and
        written, off the event loop and without fsync, for readers in other
        processes (``runtime.watch(run_id, events=True)``); an event that
        cannot be encoded is left out of that stream, with a warning. For an
        event recorded once, the orchestrator awaits
        ``ctx.emit(event, durable=True)``.

        Outside a run (an actor of a plain ``ActorSystem``, or one spawned on
        the runtime directly) there is no reader: it does nothing.
        Call it from the event loop's thread (a handler, not a worker thread).

        .. versionadded:: 0.2
        .. versionchanged:: 0.4
           Also streamed to the store's event stream, for other processes.
        """
        sink = self._actorflow_emit
        if sink is not None:
            sink(self.name, event)


def _namespaces(owner: type) -> tuple[dict[str, Any], dict[str, Any]]:
    module = sys.modules.get(owner.__module__)
    globalns: dict[str, Any] = dict(vars(module)) if module is not None else {}
    localns: dict[str, Any] = {}
    frame = owner.__dict__.get("_actorflow_frame")
    if frame is not None:
        localns.update(frame.f_locals)
    localns.update(vars(owner))
    localns[owner.__name__] = owner
    return globalns, localns


def _resolve(annotation: object, owner: type, what: str) -> Any:
    if not isinstance(annotation, str):
        return annotation
    globalns, localns = _namespaces(owner)
    try:
        return eval(annotation, globalns, localns)
    except Exception as exc:
        raise ActorDefinitionError(
            f"{owner.__qualname__}.{what}",
            f"cannot resolve the annotation {annotation!r} ({exc}); define or import "
            "the type where the actor class can see it, or name it with @handler(Type)",
        ) from exc


def state_type(actor_cls: type[Actor]) -> type:
    """The resolved type of ``actor_cls``'s ``state`` annotation, or ``type(None)``."""
    cached = actor_cls.__dict__.get("_actorflow_state_type")
    if cached is not None:
        return typing.cast("type", cached)
    result: Any = NoneType
    for klass in actor_cls.__mro__:
        if klass is Actor or klass is object:
            break
        annotations = klass.__dict__.get("__annotations__", {})  # noqa: RUF063 (must not evaluate)
        if "state" in annotations:
            result = _resolve(annotations["state"], klass, "state")
            break
    actor_cls._actorflow_state_type = result  # type: ignore[attr-defined]
    return typing.cast("type", result)


class Dispatch:
    """An actor class's handlers by message type, with subclass-aware lookup."""

    __slots__ = ("_cache", "handled", "table")

    def __init__(self, table: dict[type, Callable[..., Awaitable[Any]]]) -> None:
        self.table = table
        self.handled = tuple(table)
        self._cache: dict[type, Callable[..., Awaitable[Any]] | None] = dict(table)

    def lookup(self, message_type: type) -> Callable[..., Awaitable[Any]] | None:
        """The handler for ``message_type`` (or its nearest base), or None."""
        try:
            return self._cache[message_type]
        except KeyError:
            pass
        found = None
        for base in message_type.__mro__:
            found = self.table.get(base)
            if found is not None:
                break
        self._cache[message_type] = found
        return found


def _message_types(fn: Callable[..., Any], owner: type) -> list[type]:
    declared = getattr(fn, _MARK)
    if declared is not _AUTO:
        return [declared]
    code = fn.__code__
    if code.co_argcount < 2:
        raise ActorDefinitionError(
            f"{owner.__qualname__}.{fn.__name__}", "a handler takes (self, message)"
        )
    param = code.co_varnames[1]
    annotation = fn.__annotations__.get(param)
    if annotation is None:
        raise ActorDefinitionError(
            f"{owner.__qualname__}.{fn.__name__}",
            f"annotate the message parameter {param!r} or use @handler(Type)",
        )
    resolved = _resolve(annotation, owner, fn.__name__)
    members = typing.get_args(resolved) if _is_union(resolved) else (resolved,)
    for member in members:
        if not isinstance(member, type):
            raise ActorDefinitionError(
                f"{owner.__qualname__}.{fn.__name__}",
                f"the message type {member!r} is not a class",
            )
    return list(members)


def _is_union(tp: object) -> bool:
    return isinstance(tp, types.UnionType) or typing.get_origin(tp) is typing.Union


def dispatch_table(actor_cls: type[Actor]) -> Dispatch:
    """Build (once per class) the table of ``actor_cls``'s handlers.

    Raises:
        ActorDefinitionError: an annotation cannot be resolved, or one class
            defines two handlers for the same message type.
    """
    cached = actor_cls.__dict__.get("_actorflow_dispatch")
    if cached is not None:
        return typing.cast("Dispatch", cached)
    table: dict[type, Callable[..., Awaitable[Any]]] = {}
    seen: set[str] = set()
    for klass in actor_cls.__mro__:  # most derived first: overrides win
        own: dict[type, str] = {}
        for attr, fn in vars(klass).items():
            if attr in seen:
                continue
            seen.add(attr)
            if not callable(fn) or not hasattr(fn, _MARK):
                continue
            for message_type in _message_types(fn, klass):
                if message_type in own:
                    raise ActorDefinitionError(
                        klass.__qualname__,
                        f"{own[message_type]} and {attr} both handle "
                        f"{message_type.__qualname__}; keep one",
                    )
                own[message_type] = attr
                table.setdefault(message_type, fn)
    dispatch = Dispatch(table)
    actor_cls._actorflow_dispatch = dispatch  # type: ignore[attr-defined]
    return dispatch


def handler_for(actor_cls: type[Actor], message_type: type) -> Callable[..., Awaitable[Any]] | None:
    """The handler ``actor_cls`` runs for a message of ``message_type``, or None.

    The most specific handler wins, as when the message is delivered. The
    workflow engine reads its return annotation to decode recorded replies.

    Raises:
        ActorDefinitionError: the class's handlers are declared wrongly.
    """
    return dispatch_table(actor_cls).lookup(message_type)


def handler_flow(fn: Callable[..., Awaitable[Any]]) -> tuple[RetryPolicy | None, str | None]:
    """The retry policy and the limit name ``@handler`` gave ``fn`` (None: not given)."""
    return getattr(fn, _RETRY, None), getattr(fn, _LIMIT, None)
