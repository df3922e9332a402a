"""The sending side's record of one placed agent: where it lives, how messages reach it.

Order: Ray's async actors may start calls out of order, so each message
carries a sequence number per agent incarnation, and the Ray actor queues a
message only after its predecessor. Retries belong to actorflow (Ray's task
retries are off): a call that fails because the Ray actor or its node died
fails the reply with ``ActorStoppedError``; the step retries it (same
idempotency key), and the agent is started again, on a live node, from the
state its last answered message left.
"""

from __future__ import annotations

import typing
import uuid
from typing import TYPE_CHECKING, Any, Protocol

import anyio
import msgspec
from ray.exceptions import RayError

from actorflow._log import get_logger
from actorflow._text import describe
from actorflow.errors import (
    ActorFailedError,
    ActorStoppedError,
    ClassNotShippedError,
    ConfigurationError,
    UnhandledMessageError,
)
from actorflow.ray._bridge import on_done, wait_ref
from actorflow.ray._placement import placement_of
from actorflow.ray._reply import PlacedReply, remote_error
from actorflow.ray._spec import CallReply, CallRequest, encode
from actorflow.runtime.actors import handler_for
from actorflow.runtime.cluster import RemoteStep
from actorflow.runtime.registry import class_name, register
from actorflow.storage import decode_value

if TYPE_CHECKING:
    from concurrent.futures import Future

    from actorflow.ray._handles import AgentsHandle
    from actorflow.runtime.actors import Actor

__all__ = ["RETRY_DELAY", "PlacedAgent", "Placer"]

_reply_decoder = msgspec.msgpack.Decoder(CallReply)
_log = get_logger("actorflow.ray")
RETRY_DELAY = 0.2
"""Seconds between looks for a live node that fits, while one is lost or joining."""


class Placer(Protocol):
    """What a placed agent needs of the placer that started it (a ``RayPlacer``)."""

    @property
    def start_timeout(self) -> float:
        """Seconds an agent may take to start on a node that fits."""
        ...

    async def server_for(self, cls: type[Actor], run_id: str) -> AgentsHandle:
        """The Ray actor holding agents of ``cls`` for this run's node (started if needed)."""
        ...

    def forget(self, server: AgentsHandle) -> None:
        """A Ray actor died: choose among the live nodes again for its class."""
        ...

    def expect(self, token: str, run_id: str, meta: object | None) -> str | None:
        """Note a step's message in flight; where its milestones go (``None``: with the reply)."""
        ...

    def settled(self, token: str) -> None:
        """The message's reply came (or its Ray actor died): no more milestones for it."""
        ...


class PlacedAgent:
    """The sending side's record of one placed agent: where it lives, its last state."""

    def __init__(
        self, placer: Placer, cls: type[Actor], run_id: str, name: str, state: bytes
    ) -> None:
        self.placer = placer
        self.cls = cls
        self.cls_name = class_name(cls)
        self.run_id = run_id
        self.name = name
        self.state = state  # after the last answered message: what a restart starts from
        self.server: AgentsHandle | None = None  # None when it must be (re)started
        self.incarnation = ""
        self.seq = 0
        self.in_flight = 0  # messages handed to Ray and not yet answered
        self.stopped = False
        self.lock = anyio.Lock()
        self.messages: dict[type, tuple[str, Any]] = {}

    async def ensure(self) -> AgentsHandle:
        """The Ray actor holding this agent, starting the agent there if needed.

        A Ray actor that dies as it is asked (its node is going) is replaced
        by one on another node that fits, within the placer's start timeout.

        Raises:
            ClassNotShippedError: the Ray actor cannot import the class.
            ConfigurationError: no node took the agent within the start timeout.
        """
        server = self.server
        if server is not None:
            return server
        async with self.lock:
            server = self.server
            if server is None:
                timeout = self.placer.start_timeout
                with anyio.move_on_after(timeout):
                    server = await self._start()
                if server is None:
                    raise ConfigurationError(
                        f"{self.cls.__qualname__}.placement",
                        placement_of(self.cls),
                        f"resources a live node has free: the agent did not start in {timeout}s",
                    )
        return server

    async def _start(self) -> AgentsHandle:
        while True:
            server = await self.placer.server_for(self.cls, self.run_id)
            incarnation = uuid.uuid4().hex[:12]
            try:
                error = await wait_ref(
                    server.spawn.remote(self.run_id, self.name, incarnation, self.state)
                )
            except RayError as exc:
                _log.info("placed_actor_lost", agent=self.name, error=describe(exc))
                self.placer.forget(server)
                await anyio.sleep(RETRY_DELAY)  # a node going down: choose again
                continue
            if error is not None:
                raise ClassNotShippedError(self.cls_name, "the cluster", error)
            self.incarnation, self.seq, self.server = incarnation, 0, server
            return server

    def lost(self, server: AgentsHandle) -> None:
        """``server`` no longer holds this agent: the next message starts it again."""
        if self.server is server:
            self.server = None

    def message_type(self, msg_cls: type) -> tuple[str, Any]:
        """The registry name of a message class and its handler's reply type (cached).

        Raises:
            UnhandledMessageError: the agent's class has no handler for it.
        """
        found = self.messages.get(msg_cls)
        if found is None:
            fn = handler_for(self.cls, msg_cls)
            if fn is None:
                raise UnhandledMessageError(self.name, msg_cls, ())
            try:
                reply_type = typing.get_type_hints(fn).get("return", Any)
            except Exception:
                reply_type = Any
            register(msg_cls)
            found = self.messages[msg_cls] = (class_name(msg_cls), reply_type)
        return found

    async def deliver(self, msg: object, meta: object | None) -> PlacedReply:
        """Hand ``msg`` to the agent's Ray actor, starting it first if needed; its reply slot.

        Raises:
            ActorStoppedError: the run's attempt ended.
            UnhandledMessageError: the agent's class has no handler for it.
            ClassNotShippedError: the Ray actor cannot import the class.
            ConfigurationError: no node took the agent within the start timeout.
        """
        if self.stopped:
            raise ActorStoppedError(self.name, "its run's attempt ended")
        server = self.server
        if server is None:
            self.message_type(type(msg))  # an unhandled message starts no Ray actor
            server = await self.ensure()
        return self.call(server, msg, meta)

    def deliver_now(self, msg: object) -> PlacedReply:
        """``deliver`` without waiting: only while the agent's Ray actor is known.

        Raises:
            ActorStoppedError: the run's attempt ended, or the agent's Ray actor
                was lost and must be started again first (``await send``).
            UnhandledMessageError: the agent's class has no handler for it.
        """
        if self.stopped:
            raise ActorStoppedError(self.name, "its run's attempt ended")
        if self.server is None:
            raise ActorStoppedError(
                self.name, "its Ray actor is starting again: use `await ref.send(msg)`"
            )
        return self.call(self.server, msg, None)

    def call(self, server: AgentsHandle, msg: object, meta: object | None) -> PlacedReply:
        """Hand ``msg`` to the Ray actor ``server`` now (Ray queues it); its reply slot."""
        type_name, reply_type = self.message_type(type(msg))
        seq = self.seq
        self.seq += 1
        token = f"{self.incarnation}:{seq}"
        reply_to = self.placer.expect(token, self.run_id, meta)
        request = CallRequest(
            run_id=self.run_id,
            name=self.name,
            incarnation=self.incarnation,
            seq=seq,
            type=type_name,
            message=msgspec.Raw(encode(msg)),
            step=RemoteStep.pack(meta),
            reply_to=reply_to,
        )
        try:
            future = server.call.remote(encode(request)).future()
        except BaseException:
            self.placer.settled(token)  # never sent: no milestone can come for it
            raise
        self.in_flight += 1
        reply = PlacedReply()
        on_done(future, lambda done: self._fill(reply, done, server, reply_type, meta, token))
        return reply

    def _fill(
        self,
        reply: PlacedReply,
        done: Future[bytes],
        server: AgentsHandle,
        reply_type: Any,
        meta: object | None,
        token: str,
    ) -> None:
        self.placer.settled(token)
        self.in_flight -= 1
        try:
            answer = _reply_decoder.decode(done.result())
        except RayError as exc:
            self.lost(server)
            self.placer.forget(server)
            reply.error = ActorStoppedError(self.name, f"its Ray actor died ({describe(exc)})")
            reply.settle()
            return
        RemoteStep.settle(meta, answer.report)
        if answer.lost:
            self.lost(server)
            reply.error = ActorStoppedError(self.name, "its Ray actor no longer holds it")
        elif answer.error_type is not None:
            cause = remote_error(answer.error_type, answer.error or "")
            failed = ActorFailedError(self.name, cause)
            failed.__cause__ = cause
            reply.error = failed
        else:
            try:
                reply.value = decode_value(
                    answer.value, reply_type, f"reply of agent {self.name!r}"
                )
            except Exception as exc:
                reply.error = ActorFailedError(self.name, exc)
            else:
                reply.state = self.state = answer.state
        reply.settle()
