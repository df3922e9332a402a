"""``@phase``: an orchestrator method as a named, memoised unit of a run."""

from __future__ import annotations

import functools
import typing
from typing import Any, Concatenate, ParamSpec, TypeVar

if typing.TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from actorflow.runtime import RunContext

__all__ = ["phase"]

P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S")


def phase(
    fn: Callable[Concatenate[S, RunContext, P], Awaitable[R]],
) -> Callable[Concatenate[S, RunContext, P], Awaitable[R]]:
    """Mark ``async def name(self, ctx, ...)`` as a phase.

    Calling it issues the phase's id at once (so concurrent phases get stable
    ids); a phase that finished before a crash returns its recorded result
    without running; its end is a record and a snapshot. The result must be
    msgspec-encodable; it is decoded as the return annotation on replay.
    """
    name = fn.__name__
    result_type: list[Any] = []

    @functools.wraps(fn)
    def call(self: S, ctx: RunContext, /, *args: P.args, **kwargs: P.kwargs) -> Awaitable[R]:
        if not result_type:
            try:
                result_type.append(typing.get_type_hints(fn).get("return", Any))
            except Exception:
                result_type.append(Any)
        return ctx.phase(name, fn, self, ctx, *args, result_type=result_type[0], **kwargs)

    return call
