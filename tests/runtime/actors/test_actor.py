"""Actors: handlers, dispatch, annotations, state, Request typing."""

from __future__ import annotations

import msgspec
import pytest

from actorflow import Actor, Request, Runtime, handler
from actorflow.errors import ActorDefinitionError, UnhandledMessageError
from actorflow.runtime import state_type
from tests.runtime.actors import _future_actors


class Add(msgspec.Struct, frozen=True):
    amount: int


class Sub(Add, frozen=True):
    pass


class Tally(msgspec.Struct):
    total: int = 0


class GetTotal(Request[int], frozen=True):
    pass


class Counter(Actor):
    state: Tally

    @handler
    async def add(self, msg: Add) -> int:
        self.state.total += msg.amount
        return self.state.total

    @handler
    async def get(self, msg: GetTotal) -> int:
        return self.state.total


async def test_state_is_default_constructed_or_given_at_spawn() -> None:
    async with Runtime() as runtime:
        fresh = await runtime.spawn(Counter, name="fresh")
        given = await runtime.spawn(Counter, name="given", state=Tally(5))
        assert await fresh.ask(GetTotal()) == 0
        assert await given.ask(Add(1)) == 6


async def test_a_given_state_is_copied_not_shared() -> None:
    mine = Tally(1)
    async with Runtime() as runtime:
        ref = await runtime.spawn(Counter, name="c", state=mine)
        await ref.ask(Add(1))
    assert mine.total == 1


async def test_dispatch_is_subclass_aware_and_the_most_specific_wins() -> None:
    class Both(Actor):
        @handler
        async def add(self, msg: Add) -> str:
            return "add"

        @handler
        async def sub(self, msg: Sub) -> str:
            return "sub"

    class Base(Actor):
        @handler
        async def add(self, msg: Add) -> str:
            return "base"

    async with Runtime() as runtime:
        both = await runtime.spawn(Both, name="both")
        base = await runtime.spawn(Base, name="base")
        assert await both.ask(Sub(1)) == "sub"
        assert await both.ask(Add(1)) == "add"
        assert await base.ask(Sub(1)) == "base"


async def test_classes_defined_inside_a_function_resolve_lazily() -> None:
    class Local(Actor):
        state: LocalState

        @handler
        async def on(self, msg: LocalMsg) -> int:
            self.state.n += msg.n
            return self.state.n

    class LocalState(msgspec.Struct):  # defined after the actor that names it
        n: int = 0

    class LocalMsg(msgspec.Struct):
        n: int

    async with Runtime() as runtime:
        ref = await runtime.spawn(Local, name="local")
        assert await ref.ask(LocalMsg(2)) == 2
    assert state_type(Local) is LocalState


async def test_a_module_with_postponed_annotations_works() -> None:
    async with Runtime() as runtime:
        ref = await runtime.spawn(_future_actors.Late, name="late")
        assert await ref.ask(_future_actors.Ping(3)) == 3


async def test_handler_can_name_its_type_explicitly_and_take_unions() -> None:
    class Explicit(Actor):
        @handler(Add)
        async def anything(self, msg) -> int:  # type: ignore[no-untyped-def]
            return int(msg.amount) * 10

        @handler
        async def either(self, msg: Sub | Tally) -> str:
            return type(msg).__name__

    async with Runtime() as runtime:
        ref = await runtime.spawn(Explicit, name="x")
        assert await ref.ask(Add(2)) == 20
        assert await ref.ask(Tally()) == "Tally"
        assert await ref.ask(Sub(1)) == "Sub"  # the most specific handler wins


async def test_a_message_without_handler_is_an_error_to_the_sender() -> None:
    async with Runtime() as runtime:
        ref = await runtime.spawn(Counter, name="c")
        with pytest.raises(UnhandledMessageError) as info:
            await ref.send(Tally())
        assert "Add" in str(info.value)
        with pytest.raises(UnhandledMessageError):
            await ref.ask(Tally())
        with pytest.raises(UnhandledMessageError):
            ref.send_nowait(Tally())


async def test_stateless_actors_have_none_state() -> None:
    class Echo(Actor):
        @handler
        async def echo(self, msg: Add) -> object:
            return (self.state, self.name)

    assert state_type(Echo) is type(None)
    async with Runtime() as runtime:
        ref = await runtime.spawn(Echo, name="echo")
        assert await ref.ask(Add(1)) == (None, "echo")


def test_a_handler_must_be_async() -> None:
    with pytest.raises(ActorDefinitionError, match="async def"):

        class Bad(Actor):
            @handler  # type: ignore[type-var]
            def add(self, msg: Add) -> int:
                return 1


async def test_an_unresolvable_annotation_is_a_clear_error_at_spawn() -> None:
    class Broken(Actor):
        @handler
        async def on(self, msg: NoSuchType) -> None:  # type: ignore[name-defined]  # noqa: F821
            pass

    async with Runtime() as runtime:
        with pytest.raises(ActorDefinitionError, match="NoSuchType"):
            await runtime.spawn(Broken, name="broken")


async def test_two_handlers_for_one_type_in_one_class_are_refused() -> None:
    class Twice(Actor):
        @handler
        async def a(self, msg: Add) -> None:
            pass

        @handler
        async def b(self, msg: Add) -> None:
            pass

    async with Runtime() as runtime:
        with pytest.raises(ActorDefinitionError, match="both handle"):
            await runtime.spawn(Twice, name="twice")


async def test_lifecycle_hooks_run_in_order() -> None:
    events: list[str] = []

    class Hooks(Actor):
        async def on_start(self) -> None:
            events.append("start")

        async def on_stop(self) -> None:
            events.append("stop")

        @handler
        async def on(self, msg: Add) -> None:
            events.append("msg")

    async with Runtime() as runtime:
        ref = await runtime.spawn(Hooks, name="hooks")
        await ref.ask(Add(1))
    assert events == ["start", "msg", "stop"]


def test_refs_cannot_be_constructed_by_users() -> None:
    from actorflow import ActorRef
    from actorflow.runtime import LocalRef

    with pytest.raises(TypeError, match="ActorRef has no public constructor"):
        ActorRef()  # type: ignore[abstract]
    with pytest.raises(TypeError, match="LocalRef has no public constructor"):
        LocalRef()


async def test_a_spawned_ref_is_a_local_ref_behind_the_actor_ref_interface() -> None:
    from actorflow import ActorRef
    from actorflow.runtime import LocalRef

    async with Runtime() as runtime:
        ref = await runtime.spawn(Counter, name="counter")
        assert isinstance(ref, ActorRef)
        assert isinstance(ref, LocalRef)
        assert runtime.get("counter") == ref
        assert hash(runtime.get("counter")) == hash(ref)
    assert ActorRef.__abstractmethods__ >= {"send", "ask", "deliver", "name"}
