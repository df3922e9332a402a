"""Actors in a module using postponed annotations; their message class comes last."""

from __future__ import annotations

import msgspec

from actorflow import Actor, handler


class Late(Actor):
    state: LateState

    @handler
    async def on_ping(self, msg: Ping) -> int:
        self.state.seen += msg.n
        return self.state.seen


class LateState(msgspec.Struct):
    seen: int = 0


class Ping(msgspec.Struct, frozen=True):
    n: int
