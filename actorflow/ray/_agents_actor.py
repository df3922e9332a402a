"""The Ray actor of placed agents: one agent class's agents on one node, for many runs.

It runs the agents in an actorflow actor system of its own, one scope per
run, so handlers, ``current_step()``, supervision and state bytes work as
they do in process. Ray's async actors may start calls out of order, so each
message carries a sequence number per agent incarnation and is queued only
after its predecessor. See :mod:`actorflow.ray._placer` for the sending side.
"""

from __future__ import annotations

import asyncio
import functools
import resource
from typing import Any

import anyio
import msgspec
import ray
from ray.exceptions import RayError

from actorflow._text import describe
from actorflow.errors import ActorStoppedError, ClassNotShippedError, RegistryError
from actorflow.ray._handles import HostHandle, as_host
from actorflow.ray._spec import CallReply, CallRequest, encode, import_all
from actorflow.runtime.actors import (
    Actor,
    ActorRef,
    ActorScope,
    ActorSystem,
    AgentReply,
    dispatch_table,
    state_type,
)
from actorflow.runtime.cluster import RemoteStep
from actorflow.runtime.registry import class_name, lookup
from actorflow.storage import decode_value

__all__ = ["PlacedAgents", "rss"]

_request_decoder = msgspec.msgpack.Decoder(CallRequest)


class _Served:
    """One agent inside the Ray actor: its ref and the order its messages are queued in."""

    __slots__ = ("incarnation", "next_seq", "ref", "waiting")

    def __init__(self, ref: ActorRef[Any], incarnation: str) -> None:
        self.ref = ref
        self.incarnation = incarnation
        self.next_seq = 0
        self.waiting: dict[int, anyio.Event] = {}  # messages that arrived before their turn

    async def queue(self, seq: int, msg: object, meta: object | None) -> AgentReply:
        """Queue ``msg`` in the agent's mailbox after message ``seq - 1``; its reply slot."""
        if seq != self.next_seq:
            turn = self.waiting[seq] = anyio.Event()
            await turn.wait()
        try:
            return await self.ref.deliver(msg, meta)
        finally:
            self.next_seq = seq + 1
            after = self.waiting.pop(seq + 1, None)
            if after is not None:
                after.set()


class PlacedAgents:
    """The Ray actor holding every agent of one class on one node (asyncio inside Ray)."""

    def __init__(
        self,
        cls_name: str,
        imports: tuple[str, ...],
        namespace: str = "",
        module: str | None = None,
    ) -> None:
        self._namespace = namespace
        self._hosts: dict[str, HostHandle] = {}  # the hosts that record milestones, by actor name
        self._error: str | None = None
        self._cls: type[Actor] | None = None
        where = f"node {ray.get_runtime_context().get_node_id()[:12]}"
        try:
            import_all(imports, where)
            # the class's own module, if ``imports`` did not bring it (a plain module name)
            found = lookup(cls_name, module)
            if not (isinstance(found, type) and issubclass(found, Actor)):
                raise RegistryError(cls_name, "is not an actor class")
            self._cls = found
        except (ClassNotShippedError, RegistryError) as exc:
            self._error = str(ClassNotShippedError(cls_name, where, describe(exc)))
        if self._cls is not None:
            # the message types the agents take, by their registry names
            self._messages = {class_name(t): t for t in _handled(self._cls)}
        self._system = ActorSystem()
        self._scopes: dict[str, ActorScope] = {}
        self._agents: dict[tuple[str, str], _Served] = {}
        self._started = anyio.Event()
        self._stop = anyio.Event()
        # Ray gives an async actor its asyncio loop and no task group: the actor's
        # lifetime task goes on that loop; everything else here is anyio
        self._task = asyncio.get_running_loop().create_task(self._serve())

    async def _serve(self) -> None:
        async with self._system:
            self._started.set()
            await self._stop.wait()

    async def spawn(self, run_id: str, name: str, incarnation: str, state: bytes) -> str | None:
        """Start (or replace) the run's agent from ``state``; an error message, or None."""
        if self._cls is None:
            return self._error
        await self._started.wait()
        old = self._agents.pop((run_id, name), None)
        scope = self._scopes.get(run_id)
        if scope is None:
            scope = self._scopes[run_id] = self._system.open_scope(run_id, on_escalate=_ignore)
        if old is not None:
            await self._system.stop(old.ref)
        decoded = decode_value(state, state_type(self._cls), f"state of agent {name!r}")
        ref = await scope.spawn(self._cls, name=name, state=decoded)
        self._agents[(run_id, name)] = _Served(ref, incarnation)
        return None

    async def call(self, request: bytes) -> bytes:
        """Queue one message (a ``CallRequest``) after its predecessor; a ``CallReply``."""
        call = _request_decoder.decode(request)
        served = self._agents.get((call.run_id, call.name))
        if served is None or served.incarnation != call.incarnation or not served.ref.alive:
            return encode(CallReply(lost=True))
        msg_cls = self._messages.get(call.type)
        if msg_cls is None:
            return encode(CallReply(error_type="UnhandledMessageError", error=call.type))
        msg = decode_value(call.message, msg_cls, f"message to agent {call.name!r}")
        save = None
        if call.reply_to is not None and call.step is not None:
            save = functools.partial(
                self._save_milestone, call.reply_to, f"{call.incarnation}:{call.seq}"
            )
        remote = RemoteStep.unpack(call.step, save)
        reply = await served.queue(call.seq, msg, remote.meta if remote else None)
        await reply.event.wait()
        report = remote.report() if remote is not None else None
        if reply.error is not None:
            if isinstance(reply.error, ActorStoppedError):
                return encode(CallReply(lost=True))
            cause = reply.error.__cause__ or reply.error
            return encode(
                CallReply(error_type=type(cause).__name__, error=str(cause), report=report)
            )
        value = encode(reply.value)
        return encode(CallReply(value=value, state=reply.state, report=report))

    async def _save_milestone(self, host_name: str, token: str, data: bytes) -> None:
        """Have the run's host record a milestone before ``save_progress`` returns.

        Raises:
            ActorStoppedError: the host no longer serves the step (its attempt
                ended, or the host died): nothing waits for this handler now.
        """
        host = self._hosts.get(host_name)
        if host is None:
            host = as_host(
                await anyio.to_thread.run_sync(
                    functools.partial(ray.get_actor, host_name, namespace=self._namespace)
                )
            )
            self._hosts[host_name] = host
        try:
            recorded = await host.milestone.remote(token, data)
        except RayError as exc:
            self._hosts.pop(host_name, None)
            raise ActorStoppedError(host_name, f"the milestone was not recorded: {exc}") from exc
        if not recorded:
            raise ActorStoppedError(
                host_name, "the step's attempt ended; the milestone was not recorded"
            )

    async def release(self, run_id: str) -> None:
        """Stop the run's agents here (its attempt ended)."""
        scope = self._scopes.pop(run_id, None)
        for key in [key for key in self._agents if key[0] == run_id]:
            del self._agents[key]
        if scope is not None:
            await scope.aclose(timeout=5.0)

    async def agents(self) -> int:
        """How many agents this actor holds."""
        return len(self._agents)

    async def memory(self) -> int:
        """This process's resident memory, in bytes."""
        return rss()


def _handled(cls: type[Actor]) -> tuple[type, ...]:
    # the kernel's dispatch table is the one list of the message types a class takes
    return tuple(dispatch_table(cls).handled)


def _ignore(_error: BaseException) -> None:
    """A placed agent that used up its restarts stops; its sender's steps then fail."""


def rss() -> int:
    """This process's resident memory, in bytes."""
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * resource.getpagesize()
