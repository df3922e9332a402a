"""Whatever users raise or pass stays inside its own run, and is refused by name.

An exception whose ``__str__`` raises, or whose message is huge, fails only the
run it came from, stored and logged safely and capped. Values msgspec cannot
encode (a lone surrogate, nesting deeper than the stack, an int over 64 bits)
are refused with ``EncodingError`` wherever they enter; so is a decision's
confidence that is not a number in [0, 1]. A stored workflow name never
resolves to an abstract base class.
"""

from __future__ import annotations

import math
from typing import Any

import msgspec
import pytest
import structlog

from actorflow import (
    Actor,
    Orchestrator,
    Request,
    RunContext,
    Runtime,
    RuntimeConfig,
    Specialist,
    _log,
    handler,
)
from actorflow._text import MAX_ERROR_MESSAGE
from actorflow.errors import (
    ActorDefinitionError,
    ActorFailedError,
    EncodingError,
    RegistryError,
    RunFailedError,
)
from actorflow.runtime.actors import lookup
from actorflow.runtime.workflow._ids import message_digest
from actorflow.runtime.workflow._outcomes import new_manifest
from actorflow.storage import DecisionRecord, ErrorInfo, MemoryStore, RunStatus, encode_state
from actorflow.storage import encode_value as encode

NO_RETRIES = RuntimeConfig(step_retries=0)


class Unprintable(ValueError):
    def __str__(self) -> str:
        raise RuntimeError("no text for you")


def deep(levels: int) -> list[Any]:
    root: list[Any] = []
    node = root
    for _ in range(levels):
        node.append([])
        node = node[0]
    return root


HOSTILE = {
    "lone-surrogate": "\udc80",
    "deep-nesting": deep(100_000),
    "huge-int": 2**80,
}


class Boom(Request[int], frozen=True):
    kind: str


class Text(Request[int], frozen=True):
    text: str


class Bomber(Specialist):
    __actorflow_name__ = "tests.hostile.Bomber"

    @handler
    async def boom(self, msg: Boom) -> int:
        if msg.kind == "unprintable":
            raise Unprintable
        if msg.kind == "huge":
            raise ValueError("x" * 1_000_000)
        return 1

    @handler
    async def text(self, msg: Text) -> int:
        return len(msg.text)


class Bombing(Orchestrator):
    __actorflow_name__ = "tests.hostile.Bombing"

    async def run(self, ctx: RunContext, kind: str) -> int:
        bomber = await ctx.spawn(Bomber, name="bomber")
        result: int = await ctx.ask(bomber, Boom(kind))
        return result


# --- errors that cannot be printed, or are huge -----------------------------------


class TestUnprintableErrors:
    async def test_an_ask_fails_with_a_placeholder_and_the_actor_goes_on(self) -> None:
        async with Runtime() as runtime:
            bomber = await runtime.spawn(Bomber, name="bomber")
            with pytest.raises(ActorFailedError, match=r"Unprintable: <unprintable Unprintable>"):
                await bomber.ask(Boom("unprintable"))
            assert await bomber.ask(Boom("fine")) == 1

    async def test_it_fails_only_its_run_and_later_runs_and_recovery_work(self) -> None:
        store = MemoryStore()
        async with Runtime(store=store, config=NO_RETRIES) as runtime:
            with pytest.raises(RunFailedError, match="<unprintable Unprintable>"):
                await runtime.run(Bombing, "unprintable", run_id="bad")
            assert await runtime.run(Bombing, "fine", run_id="good") == 1
        assert (await store.read_run("bad")).status is RunStatus.FAILED
        async with Runtime(store=store) as runtime:
            assert await runtime.recover() == {}

    def test_error_info_describes_it_without_raising(self) -> None:
        info = ErrorInfo.of(Unprintable())
        assert info == ErrorInfo(type="Unprintable", message="<unprintable Unprintable>")

    def test_error_info_escapes_lone_surrogates(self) -> None:
        info = ErrorInfo.of(ValueError("bad \udc80 text"))
        assert info.message == "bad \\udc80 text"
        info.message.encode()  # always UTF-8 encodable, so it can be stored


class TestHugeErrors:
    def test_error_info_caps_the_message_and_says_how_much_was_cut(self) -> None:
        info = ErrorInfo.of(ValueError("x" * 10_000))
        assert info.message.startswith("x" * MAX_ERROR_MESSAGE)
        assert info.message.endswith(f"... [{10_000 - MAX_ERROR_MESSAGE} more characters cut]")

    async def test_stored_errors_and_log_lines_are_capped(self) -> None:
        store = MemoryStore()
        previous = _log.level()
        _log.configure_logging("info")
        try:
            with structlog.testing.capture_logs() as logs:
                async with Runtime(store=store, config=RuntimeConfig(step_retries=1)) as rt:
                    with pytest.raises(RunFailedError) as info:
                        await rt.run(Bombing, "huge", run_id="huge")
        finally:
            _log.configure_logging(previous)
        limit = MAX_ERROR_MESSAGE + 200  # the cap, a marker and the error's own words
        assert len(str(info.value)) < limit
        manifest = await store.read_run("huge")
        assert manifest.error is not None
        assert len(manifest.error.message) < limit
        assert "more characters cut" in manifest.error.message
        failures = [e for e in logs if e["event"] == "actor_failed"]
        assert failures, [e["event"] for e in logs]
        for event in logs:
            for value in event.values():
                assert len(str(value)) < limit, event["event"]


# --- values msgspec cannot encode ---------------------------------------------------


class Holder(msgspec.Struct):
    text: str = ""


class Keep(Request[None], frozen=True):
    text: str


class Keeper(Actor):
    __actorflow_name__ = "tests.hostile.Keeper"
    state: Holder

    @handler
    async def keep(self, msg: Keep) -> None:
        self.state.text = msg.text


class Asking(Orchestrator):
    __actorflow_name__ = "tests.hostile.Asking"

    async def run(self, ctx: RunContext, text: str) -> str:
        bomber = await ctx.spawn(Bomber, name="bomber")
        try:
            await ctx.ask(bomber, Text(text + "\udc80"))
        except EncodingError as exc:
            return str(exc)
        return "sent"


@pytest.mark.parametrize("value", HOSTILE.values(), ids=HOSTILE.keys())
class TestUnencodableValues:
    def test_the_recorder_refuses_them_by_name(self, value: object) -> None:
        with pytest.raises(EncodingError, match="the value cannot be encoded"):
            encode(value, "the value")

    def test_the_store_refuses_them_as_state(self, value: object) -> None:
        with pytest.raises(EncodingError, match="cannot be encoded"):
            encode_state(value)

    def test_a_message_holding_one_is_refused_when_hashed(self, value: object) -> None:
        with pytest.raises(EncodingError, match="message Holding"):
            message_digest("ask", "agent", Holding(value))

    async def test_a_run_input_is_refused_before_anything_is_stored(self, value: object) -> None:
        store = MemoryStore()
        async with Runtime(store=store) as runtime:
            with pytest.raises(EncodingError, match="workflow input"):
                await runtime.start(Asking, value)
        assert await store.list_runs() == []


class Holding(msgspec.Struct):
    value: Any


async def test_a_message_step_with_a_lone_surrogate_raises_encoding_error_in_the_run() -> None:
    async with Runtime(store=MemoryStore()) as runtime:
        refused = await runtime.run(Asking, "hello")
    assert "message Text cannot be encoded" in refused


async def test_an_actor_state_that_cannot_be_encoded_fails_the_message_by_name() -> None:
    async with Runtime() as runtime:
        keeper = await runtime.spawn(Keeper, name="keeper")
        with pytest.raises(ActorFailedError, match="state of actor 'keeper'") as info:
            await keeper.ask(Keep("\udc80"))
        assert isinstance(info.value.__cause__, EncodingError)
        await keeper.ask(Keep("fine"))  # rolled back to the last good state; goes on


# --- decisions --------------------------------------------------------------------


class Deciding(Orchestrator):
    __actorflow_name__ = "tests.hostile.Deciding"

    async def run(self, ctx: RunContext, confidence: Any) -> str:
        try:
            await ctx.decide("pick", confidence=confidence)
        except EncodingError as exc:
            return str(exc)
        return "decided"


@pytest.mark.parametrize(
    "confidence",
    [math.nan, math.inf, -math.inf, 1.5, -0.1, "0.5", True],
    ids=["nan", "inf", "-inf", "above-1", "below-0", "text", "bool"],
)
async def test_a_decision_with_a_bad_confidence_is_refused_at_once(confidence: object) -> None:
    store = MemoryStore()
    async with Runtime(store=store) as runtime:
        refused = await runtime.run(Deciding, confidence, run_id="d")
    assert "is not a number between 0 and 1" in refused, refused
    log = await store.read_log("d")
    assert not [r for r in log if isinstance(r, DecisionRecord)], "nothing was recorded"


@pytest.mark.parametrize("confidence", [0.0, 0.5, 1, 1.0, None])
async def test_a_decision_with_a_good_confidence_is_recorded(confidence: object) -> None:
    async with Runtime(store=MemoryStore()) as runtime:
        assert await runtime.run(Deciding, confidence) == "decided"


# --- abstract base classes ----------------------------------------------------------


def test_the_base_classes_names_never_resolve() -> None:
    for name in ("Orchestrator", "Specialist", "Evaluator"):
        with pytest.raises(RegistryError, match="names the base class actorflow"):
            lookup(name)


async def test_starting_the_orchestrator_base_class_is_refused() -> None:
    async with Runtime(store=MemoryStore()) as runtime:
        with pytest.raises(ActorDefinitionError, match="is a base class"):
            await runtime.start(Orchestrator, None)


async def test_a_stored_run_naming_the_base_class_is_not_recovered() -> None:
    store = MemoryStore()
    manifest = new_manifest(Deciding, 0.5, run_id="base", owner="dead", code_version=None)
    await store.create_run(msgspec.structs.replace(manifest, workflow="Orchestrator"))
    async with Runtime(store=store) as runtime:
        assert await runtime.recover() == {}
    assert (await store.read_run("base")).status is RunStatus.RUNNING, "never taken"
