"""A workflow whose specialist's state class changes shape between deployments.

Shared by ``test_state_versions.py`` and its SIGKILL child
(``state_versions_child.py``). The writer class is defined by
``define_writer(...)``: calling it again defines the class again under the same
registry name (and module), which replaces the old one, as a new deployment
of the code would. ``NotesFlow`` always spawns the writer defined last.

Version 1 of the writer's state keeps its notes as one comma-separated string
(``NotesV1``); version 2 keeps a list (``Notes``) and upgrades version-1 data.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import msgspec

from actorflow import Orchestrator, Request, RunContext, Specialist, handler, phase

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

WRITER_NAME = "tests.state_versions.Writer"
FLOW_NAME = "tests.state_versions.NotesFlow"
PAUSE = "?"
"""An item of the flow's input that waits for the item to come from ``resume``."""


class Append(Request[str], frozen=True):
    item: str


class NotesV1(msgspec.Struct):
    """Version 1 (no ``state_version``: 1): one comma-separated string."""

    text: str = ""


class Notes(msgspec.Struct):
    """Version 2: a list, upgraded from version 1 by splitting the string."""

    state_version: ClassVar[int] = 2
    items: list[str] = []

    @classmethod
    def upgrade_state(cls, data: Any, from_version: int) -> Any:
        if from_version == 1:
            text = data.pop("text")
            data["items"] = text.split(",") if text else []
        return data


class NotesNoUpgrade(msgspec.Struct):
    """A version 2 that cannot read version 1: no ``upgrade_state``, a required field."""

    state_version: ClassVar[int] = 2
    items: list[str]


ON_APPEND: Callable[[str], Awaitable[None]] | None = None
"""Called by every writer before it appends an item (the SIGKILL child reports and holds)."""

_current: list[type[Specialist]] = []


def current_writer() -> type[Specialist]:
    """The writer class defined last (the code 'deployed' now)."""
    return _current[-1]


async def _before_append(item: str) -> None:
    if ON_APPEND is not None:
        await ON_APPEND(item)


def define_writer(state: type[Any]) -> type[Specialist]:
    """Define the writer again, with ``state`` (``NotesV1``, ``Notes``...) as its state class."""
    if state is NotesV1:

        class WriterV1(Specialist):
            __actorflow_name__ = WRITER_NAME
            state: NotesV1

            @handler
            async def append(self, msg: Append) -> str:
                await _before_append(msg.item)
                parts = [p for p in self.state.text.split(",") if p]
                self.state.text = ",".join([*parts, msg.item])
                return self.state.text

        cls: type[Specialist] = WriterV1
    elif state is Notes:

        class WriterV2(Specialist):
            __actorflow_name__ = WRITER_NAME
            state: Notes

            @handler
            async def append(self, msg: Append) -> str:
                await _before_append(msg.item)
                self.state.items.append(msg.item)
                return ",".join(self.state.items)

        cls = WriterV2
    elif state is NotesNoUpgrade:

        class WriterNoUpgrade(Specialist):
            __actorflow_name__ = WRITER_NAME
            state: NotesNoUpgrade

            @handler
            async def append(self, msg: Append) -> str:
                await _before_append(msg.item)
                self.state.items.append(msg.item)
                return ",".join(self.state.items)

        cls = WriterNoUpgrade
    else:
        raise AssertionError(f"no writer for {state!r}")
    _current.append(cls)
    return cls


class NotesFlow(Orchestrator):
    """Each group of items is one phase; the writer appends the items one by one.

    An item ``PAUSE`` waits for input (``runtime.resume``) and appends the answer.
    The result is the writer's last reply: all its notes, comma-separated.
    """

    __actorflow_name__ = FLOW_NAME

    @phase
    async def write(self, ctx: RunContext, items: list[str]) -> str:
        writer = await ctx.spawn(current_writer(), name="writer")
        out = ""
        for item in items:
            if item == PAUSE:
                item = await ctx.wait_for_input("next item?")
            out = await ctx.ask(writer, Append(item))
        return out

    async def run(self, ctx: RunContext, groups: list[list[str]]) -> str:
        out = ""
        for items in groups:
            out = await self.write(ctx, items)
        return out
