"""RayPlacer: starts a run's agents of placed classes on Ray actors, one per class and node.

The sending side (a run's host) holds a :class:`~actorflow.ray.PlacedRef`
per agent (:mod:`actorflow.ray._placed_ref`), backed by a
:class:`~actorflow.ray._agent.PlacedAgent` record. The Ray actor
(:class:`~actorflow.ray._agents_actor.PlacedAgents`) runs the agents in an
actorflow actor system of its own, one scope per run, so handlers,
``current_step()``, supervision and state bytes work as they do in process.
"""

from __future__ import annotations

import zlib
from typing import TYPE_CHECKING, Any

import anyio
import ray
import ray.util
from ray.exceptions import RayError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from actorflow.ray._agent import RETRY_DELAY, PlacedAgent
from actorflow.ray._agents_actor import PlacedAgents
from actorflow.ray._bridge import wait_ref
from actorflow.ray._handles import as_agents
from actorflow.ray._placed_ref import placed_ref
from actorflow.ray._placement import Placement, placement_of
from actorflow.runtime.cluster import RemoteStep
from actorflow.runtime.registry import class_name, module_of, register

if TYPE_CHECKING:
    from ray.actor import ActorClass

    from actorflow.ray._handles import AgentsHandle
    from actorflow.runtime import ActorRef
    from actorflow.runtime.actors import Actor

__all__ = ["RayPlacer"]


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
        self._servers: dict[tuple[str, str], AgentsHandle] = {}
        self._agents: dict[str, list[PlacedAgent]] = {}
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
        agent = PlacedAgent(self, cls, run_id, name, state)
        await agent.ensure()
        self._agents.setdefault(run_id, []).append(agent)
        return placed_ref(agent)

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
        servers: set[AgentsHandle] = set()
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

    def forget(self, server: AgentsHandle) -> None:
        """A Ray actor died: choose among the live nodes again for its class."""
        for key, known in list(self._servers.items()):
            if known is server:
                del self._servers[key]
        self._nodes = None

    async def server_for(self, cls: type[Actor], run_id: str) -> AgentsHandle:
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
            await anyio.sleep(RETRY_DELAY)
        node_id = nodes[zlib.crc32(run_id.encode()) % len(nodes)]
        key = (class_name(cls), node_id)
        server = self._servers.get(key)
        if server is None:
            server = await anyio.to_thread.run_sync(self._start_server, cls, placement, node_id)
            self._servers[key] = server
        return server

    def _start_server(self, cls: type[Actor], placement: Placement, node_id: str) -> AgentsHandle:
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
        handle = (
            _placed_actor()
            .options(**options)
            .remote(class_name(cls), self.imports, self.namespace, module_of(cls))
        )
        assert not isinstance(handle, type)  # Ray's stub allows the class too: it never is
        return as_agents(handle)

    async def _fitting(self, placement: Placement) -> list[str]:
        if self._nodes is None:
            self._nodes = await anyio.to_thread.run_sync(_live_nodes)
        return sorted(node for node, resources in self._nodes if placement.fits(resources))


def _live_nodes() -> list[tuple[str, dict[str, float]]]:
    return [(n["NodeID"], dict(n["Resources"])) for n in ray.nodes() if n["Alive"]]  # type: ignore[no-untyped-call]


_ACTOR: ActorClass[PlacedAgents] | None = None


def _placed_actor() -> ActorClass[PlacedAgents]:
    global _ACTOR
    if _ACTOR is None:
        _ACTOR = ray.remote(PlacedAgents)
    return _ACTOR
