"""Placed agents, the sending side: references that reach agents living on Ray actors.

The sending side (a run's host) holds a :class:`PlacedRef` per agent, which
the engine drives like a local agent: ``deliver`` hands the message to the
Ray actor and returns a reply slot that Ray's completion fills. A handler's
``save_progress`` calls the host back (``Host.milestone``), which records the
milestone in the run's log before the handler goes on. The Ray actor
(:class:`PlacedAgents`) runs the agents in an actorflow actor system of its
own, one scope per run, so handlers, ``current_step()``, supervision and
state bytes work as they do in process.

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
import zlib
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import anyio
import msgspec
import ray
import ray.util
from ray.exceptions import RayError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from actorflow._log import get_logger
from actorflow._text import describe
from actorflow.errors import (
    ActorFailedError,
    ActorStoppedError,
    ClassNotShippedError,
    ConfigurationError,
    UnhandledMessageError,
)
from actorflow.ray._agents_actor import PlacedAgents
from actorflow.ray._bridge import on_done, wait_ref
from actorflow.ray._placement import Placement, placement_of
from actorflow.ray._spec import CallReply, CallRequest, encode
from actorflow.runtime import ActorRef
from actorflow.runtime.actors import Actor, MailboxStatistics, handler_for
from actorflow.runtime.cluster import RemoteStep
from actorflow.runtime.registry import class_name, module_of, register
from actorflow.storage import decode_value

if TYPE_CHECKING:
    from concurrent.futures import Future

    from actorflow.runtime.actors import Request

__all__ = ["PlacedRef", "RayPlacer"]

A = TypeVar("A", bound=Actor, covariant=True)
R = TypeVar("R")

_reply_decoder = msgspec.msgpack.Decoder(CallReply)
_log = get_logger("actorflow.ray")
_RETRY_DELAY = 0.2
"""Seconds between looks for a live node that fits, while one is lost or joining."""


class _RemoteError(Exception):
    """A placed agent's handler raised; subclasses carry the handler's error type name."""


_remote_errors: dict[str, type[_RemoteError]] = {}


def _remote_error(type_name: str, message: str) -> _RemoteError:
    """An error named like the handler's, so the step's record reads as it would in process."""
    cls = _remote_errors.get(type_name)
    if cls is None:
        cls = _remote_errors[type_name] = type(type_name, (_RemoteError,), {})
    return cls(message)


class _Reply:
    """The reply slot of a message to a placed agent (an ``AgentReply``)."""

    __slots__ = ("error", "event", "notify", "state", "value")

    def __init__(self) -> None:
        self.event = anyio.Event()
        self.value: Any = None
        self.error: BaseException | None = None
        self.state = b""
        self.notify: Any = None

    def settle(self) -> None:
        self.event.set()
        if self.notify is not None:
            self.notify(self)


class _Agent:
    """The sending side's record of one placed agent: where it lives, its last state."""

    def __init__(
        self, placer: RayPlacer, cls: type[Actor], run_id: str, name: str, state: bytes
    ) -> None:
        self.placer = placer
        self.cls = cls
        self.cls_name = class_name(cls)
        self.run_id = run_id
        self.name = name
        self.state = state  # after the last answered message: what a restart starts from
        self.server: Any = None  # the Ray actor's handle, None when it must be (re)started
        self.incarnation = ""
        self.seq = 0
        self.in_flight = 0  # messages handed to Ray and not yet answered
        self.stopped = False
        self.lock = anyio.Lock()
        self.messages: dict[type, tuple[str, Any]] = {}

    async def ensure(self) -> Any:
        """The Ray actor holding this agent, starting the agent there if needed.

        A Ray actor that dies as it is asked (its node is going) is replaced
        by one on another node that fits, within the placer's start timeout.

        Raises:
            ClassNotShippedError: the Ray actor cannot import the class.
            ConfigurationError: no node took the agent within the start timeout.
        """
        if self.server is not None:
            return self.server
        async with self.lock:
            if self.server is None:
                timeout = self.placer.start_timeout
                started = None
                with anyio.move_on_after(timeout):
                    started = await self._start()
                if started is None:
                    raise ConfigurationError(
                        f"{self.cls.__qualname__}.placement",
                        placement_of(self.cls),
                        f"resources a live node has free: the agent did not start in {timeout}s",
                    )
        return self.server

    async def _start(self) -> Any:
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
                await anyio.sleep(_RETRY_DELAY)  # a node going down: choose again
                continue
            if error is not None:
                raise ClassNotShippedError(self.cls_name, "the cluster", error)
            self.incarnation, self.seq, self.server = incarnation, 0, server
            return server

    def lost(self, server: Any) -> None:
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

    async def deliver(self, msg: object, meta: object | None) -> _Reply:
        if self.stopped:
            raise ActorStoppedError(self.name, "its run's attempt ended")
        if self.server is None:
            self.message_type(type(msg))  # an unhandled message starts no Ray actor
            await self.ensure()
        return self.call(self.server, msg, meta)

    def deliver_now(self, msg: object) -> _Reply:
        """``deliver`` without waiting: only while the agent's Ray actor is known.

        Raises:
            ActorStoppedError: the run's attempt ended, or the agent's Ray actor
                was lost and must be started again first (``await send``).
        """
        if self.stopped:
            raise ActorStoppedError(self.name, "its run's attempt ended")
        if self.server is None:
            raise ActorStoppedError(
                self.name, "its Ray actor is starting again: use `await ref.send(msg)`"
            )
        return self.call(self.server, msg, None)

    def call(self, server: Any, msg: object, meta: object | None) -> _Reply:
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
            future: Future[bytes] = server.call.remote(encode(request)).future()
        except BaseException:
            self.placer.settled(token)  # never sent: no milestone can come for it
            raise
        self.in_flight += 1
        reply = _Reply()
        on_done(future, lambda done: self._fill(reply, done, server, reply_type, meta, token))
        return reply

    def _fill(
        self,
        reply: _Reply,
        done: Future[bytes],
        server: Any,
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
            cause = _remote_error(answer.error_type, answer.error or "")
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


class PlacedRef(ActorRef[A], Generic[A]):
    """A reference to a placed agent: an ``ActorRef`` whose actor lives on a Ray actor.

    ``ask``, ``send`` and the engine's ``deliver`` go through Ray; the
    mailbox that gives backpressure is the Ray actor's.
    """

    # its own slots: the base's cell and mailbox belong to in-process actors
    __slots__ = ("_agent",)

    def __init__(self, agent: _Agent) -> None:
        self._agent = agent

    @property
    def name(self) -> str:
        """The agent's name, unique within its run."""
        return self._agent.name

    @property
    def scope(self) -> str | None:
        """The run the agent belongs to."""
        return self._agent.run_id

    @property
    def actor_type(self) -> type[A]:
        """The agent's class."""
        return self._agent.cls  # type: ignore[return-value]

    @property
    def alive(self) -> bool:
        """Whether the run still holds the agent (its Ray actor is restarted when lost)."""
        return not self._agent.stopped

    def mailbox_statistics(self) -> MailboxStatistics:
        """The agent's mailbox as this sender sees it; the mailbox itself is in its Ray actor.

        ``current_size``: messages this process handed to Ray that have no
        answer yet (queued there or being handled). ``max_size`` is 0: Ray's
        queue has no bound a sender waits on, so ``waiting_senders`` is 0 too.
        ``closed``: the run let go of the agent.
        """
        agent = self._agent
        return MailboxStatistics(
            current_size=agent.in_flight, max_size=0, waiting_senders=0, closed=agent.stopped
        )

    def __hash__(self) -> int:
        return id(self._agent)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PlacedRef) and other._agent is self._agent

    def __repr__(self) -> str:
        agent = self._agent
        return f"<PlacedRef {agent.cls.__qualname__} {agent.name!r} in {agent.run_id!r}>"

    async def deliver(self, msg: object, meta: object | None = None) -> _Reply:  # type: ignore[override]
        """Hand ``msg`` to the agent through Ray now; its reply slot is filled later."""
        return await self._agent.deliver(msg, meta)

    async def send(self, msg: object) -> None:
        """Hand ``msg`` to the agent through Ray without waiting for its handler."""
        await self._agent.deliver(msg, None)

    def send_nowait(self, msg: object) -> None:
        """Hand ``msg`` to the agent through Ray now, without waiting (no bound: never full).

        Ordered with this sender's other messages to the agent, like ``send``.

        Raises:
            ActorStoppedError: the run's attempt ended, or the agent's Ray
                actor was lost and is started again by the next ``await send``.
            UnhandledMessageError: the agent's class has no handler for it.
        """
        self._agent.deliver_now(msg)

    @typing.overload
    async def ask(self, msg: Request[R], *, timeout: float | None = None) -> R: ...  # noqa: ASYNC109
    @typing.overload
    async def ask(self, msg: object, *, timeout: float | None = None) -> object: ...  # noqa: ASYNC109
    async def ask(self, msg: object, *, timeout: float | None = None) -> object:  # noqa: ASYNC109
        """Send ``msg`` through Ray and wait for the handler's reply (as ``ActorRef.ask``)."""
        reply = await self._agent.deliver(msg, None)
        if timeout is None:
            await reply.event.wait()
        else:
            with anyio.move_on_after(timeout):
                await reply.event.wait()
            if not reply.event.is_set():
                from actorflow.errors import AskTimeoutError

                raise AskTimeoutError(self._agent.name, timeout, type(msg))
        if reply.error is not None:
            raise reply.error
        return reply.value


class RayPlacer:
    """Starts a run's agents of placed classes on Ray actors: one per class and node.

    A run's agents of a class go to a node that fits the class's
    :class:`Placement`, chosen from the run id (so runs spread over the nodes
    that fit, and one run's agents of a class share a node).
    """

    def __init__(
        self,
        *,
        namespace: str,
        imports: tuple[str, ...],
        runtime_env: dict[str, Any] | None,
        start_timeout: float,
        milestones_to: str | None = None,
    ) -> None:
        self.namespace = namespace
        self.milestones_to = milestones_to
        """The Ray actor (by name) that records placed handlers' milestones: the host."""
        # steps in flight (run id, meta) by token, for their milestones
        self._steps: dict[str, tuple[str, object]] = {}
        self.imports = imports
        self.runtime_env = runtime_env
        self.start_timeout = start_timeout
        self._servers: dict[tuple[str, str], Any] = {}
        self._agents: dict[str, list[_Agent]] = {}
        self._nodes: list[tuple[str, dict[str, float]]] | None = None

    def places(self, cls: type) -> bool:
        """Whether agents of ``cls`` are placed (it has a ``placement``)."""
        return placement_of(cls) is not None

    async def spawn(
        self, cls: type[Actor], *, run_id: str, name: str, state: bytes
    ) -> ActorRef[Any]:
        """Start agent ``name`` of run ``run_id`` on a node that fits its class.

        Raises:
            ClassNotShippedError: the node's Ray worker cannot import the class.
            ConfigurationError: no live node has the resources its placement asks.
        """
        register(cls)
        agent = _Agent(self, cls, run_id, name, state)
        await agent.ensure()
        self._agents.setdefault(run_id, []).append(agent)
        ref: PlacedRef[Any] = PlacedRef._create(agent)
        return ref

    def expect(self, token: str, run_id: str, meta: object | None) -> str | None:
        """Note a step's message in flight; where its milestones go (``None``: with the reply)."""
        if self.milestones_to is None or not RemoteStep.is_step(meta):
            return None
        self._steps[token] = (run_id, meta)
        return self.milestones_to

    def settled(self, token: str) -> None:
        """The message's reply came (or its Ray actor died): no more milestones for it."""
        self._steps.pop(token, None)

    async def save_milestone(self, token: str, data: bytes) -> bool:
        """Record a milestone of a step in flight, durably; ``False``: it is no longer in flight."""
        found = self._steps.get(token)
        if found is None:
            return False
        await RemoteStep.record(found[1], data)
        return True

    async def release(self, run_id: str) -> None:
        """Stop the run's placed agents (best effort: a dead Ray actor has nothing to stop)."""
        # before the run's claim goes: a late milestone must not reach its log after
        for token in [t for t, (run, _) in self._steps.items() if run == run_id]:
            del self._steps[token]
        servers = set()
        for agent in self._agents.pop(run_id, []):
            agent.stopped = True
            if agent.server is not None:
                servers.add(agent.server)
        for server in servers:
            try:
                with anyio.move_on_after(5.0):
                    await wait_ref(server.release.remote(run_id))
            except RayError:
                pass  # gone with its node: so are the agents

    async def memory(self) -> dict[str, int]:
        """Resident memory (bytes) of each placed-agent Ray actor this placer started or used."""
        out = {}
        for (cls_name, node_id), server in list(self._servers.items()):
            try:
                out[f"{cls_name}@{node_id[:12]}"] = await wait_ref(server.memory.remote())
            except RayError:
                pass  # gone with its node
        return out

    def forget(self, server: Any) -> None:
        """A Ray actor died: choose among the live nodes again for its class."""
        for key, known in list(self._servers.items()):
            if known is server:
                del self._servers[key]
        self._nodes = None

    async def server_for(self, cls: type[Actor], run_id: str) -> Any:
        """The Ray actor holding agents of ``cls`` for this run's node (started if needed).

        Waits (cancellably) while no live node fits the class's placement:
        a lost node's replacement may still be joining.
        """
        placement = placement_of(cls)
        assert placement is not None
        while True:
            nodes = await self._fitting(placement)
            if nodes:
                break
            self._nodes = None
            await anyio.sleep(_RETRY_DELAY)
        node_id = nodes[zlib.crc32(run_id.encode()) % len(nodes)]
        key = (class_name(cls), node_id)
        server = self._servers.get(key)
        if server is None:
            server = await anyio.to_thread.run_sync(self._start_server, cls, placement, node_id)
            self._servers[key] = server
        return server

    def _start_server(self, cls: type[Actor], placement: Placement, node_id: str) -> Any:
        name = f"actorflow-placed.{class_name(cls)}.{node_id[:16]}"
        options: dict[str, Any] = {
            "name": name,
            "namespace": self.namespace,
            "get_if_exists": True,
            "lifetime": "detached",  # it serves every host's runs, not its creator's only
            "max_restarts": 0,  # actorflow starts it again on a live node, from known states
            "max_task_retries": 0,  # retries are actorflow's, with idempotency keys
            "max_concurrency": 10_000,
            "scheduling_strategy": NodeAffinitySchedulingStrategy(node_id, soft=False),
            **placement.ray_options(),
        }
        if self.runtime_env is not None:
            options["runtime_env"] = self.runtime_env
        return (
            _placed_actor()
            .options(**options)
            .remote(class_name(cls), self.imports, self.namespace, module_of(cls))
        )

    async def _fitting(self, placement: Placement) -> list[str]:
        if self._nodes is None:
            self._nodes = await anyio.to_thread.run_sync(_live_nodes)
        return sorted(node for node, resources in self._nodes if placement.fits(resources))


def _live_nodes() -> list[tuple[str, dict[str, float]]]:
    return [(n["NodeID"], dict(n["Resources"])) for n in ray.nodes() if n["Alive"]]  # type: ignore[no-untyped-call]


_ACTOR: Any = None


def _placed_actor() -> Any:
    global _ACTOR
    if _ACTOR is None:
        _ACTOR = ray.remote(PlacedAgents)
    return _ACTOR
