"""A host: a detached Ray actor running a full actorflow ``Runtime`` (asyncio inside Ray).

Each host opens the shared store and runs a worker runtime
(``adopt_orphans``): the driver hands it runs to drive (``drive``), and its
adopter takes over runs no live process drives, such as those of a host that
died, once the store says their owner is gone. A host restarted by Ray on
another node starts its runtime again from its spec. A loop watches Ray's
node table and wakes the adopter when a node dies: that only speeds up the
search, the store's claim still decides.
"""

from __future__ import annotations

import asyncio
import os
from typing import TYPE_CHECKING

import anyio
import msgspec
import ray

from actorflow._log import get_logger
from actorflow._text import describe
from actorflow.errors import RegistryError, RunLockedError
from actorflow.ray._agents_actor import rss
from actorflow.ray._limits import RayLimits
from actorflow.ray._placement import placement_of
from actorflow.ray._placer import RayPlacer
from actorflow.ray._spec import HostInfo, HostSpec, decode_config, encode, import_all
from actorflow.runtime import Runtime
from actorflow.runtime.registry import lookup
from actorflow.storage import RunIndex, open_store

if TYPE_CHECKING:
    from actorflow.runtime.actors import Actor
    from actorflow.runtime.cluster import AgentPlacer, ClusterRuntime
    from actorflow.storage import SharedLimits

__all__ = ["Host", "HostCluster"]

_log = get_logger("actorflow.ray")


class HostCluster:
    """A host runtime's side of the cluster: it drives its runs itself, places agents,
    and takes its limits from the namespace's budget actors."""

    drives_runs = False

    def __init__(self, placer: RayPlacer, limits: RayLimits) -> None:
        self._placer = placer
        self._limits = limits

    def shared_limits(self) -> SharedLimits:
        """The budget actors (one per limit key in the cluster)."""
        return self._limits

    async def open(self, runtime: ClusterRuntime) -> None:
        """Nothing to connect: the host runs inside the cluster."""

    async def aclose(self) -> None:
        """Nothing to let go of."""

    async def dispatch(self, run_id: str) -> None:
        """Never called: a host drives its runs itself."""
        raise NotImplementedError

    def placer_for(self, cls: type[Actor]) -> AgentPlacer | None:
        """The Ray placer for classes with a ``placement``; ``None`` for the rest."""
        return self._placer if placement_of(cls) is not None else None


class Host:
    """The Ray actor class of a host (decorated with ``ray.remote`` where it is started)."""

    def __init__(self, spec: bytes) -> None:
        self._spec = msgspec.msgpack.decode(spec, type=HostSpec)
        self._spec_bytes = spec
        self._runtime: Runtime | None = None
        self._placer: RayPlacer | None = None
        self._starting = 0  # runs handed to `drive` and not yet driven
        self._tasks: anyio.abc.TaskGroup | None = None
        self._error: str | None = None
        self._ready = anyio.Event()
        self._stop = anyio.Event()
        context = ray.get_runtime_context()
        self._node = context.get_node_id()
        self._limits = RayLimits(self._spec.namespace, holder=context.current_actor)
        # Ray gives an async actor its asyncio loop and no task group: the actor's
        # lifetime task goes on that loop; everything else here is anyio
        self._task = asyncio.get_running_loop().create_task(self._serve())

    async def _serve(self) -> None:
        spec = self._spec
        try:
            import_all(spec.imports, f"host {spec.name!r}")
            store = open_store(spec.store, **spec.store_options)
            placer = RayPlacer(
                namespace=spec.namespace,
                imports=spec.imports,
                runtime_env=None,  # placed actors inherit the job's runtime_env
                start_timeout=spec.placed_start_timeout,
                milestones_to=spec.name,
            )
            self._placer = placer
            runtime = Runtime(
                store=store,
                config=decode_config(spec.config),
                adopt_orphans=spec.adoption,
                cluster=HostCluster(placer, self._limits),
                limits=spec.limits,
            )
            async with runtime, anyio.create_task_group() as tg:
                if isinstance(store, RunIndex):
                    await store.list_unfinished()  # the store answers from here
                self._runtime, self._tasks = runtime, tg
                tg.start_soon(self._watch_nodes)
                self._ready.set()
                await self._stop.wait()
                tg.cancel_scope.cancel()
        except Exception as exc:
            self._error = describe(exc)
            _log.error("host_failed", host=spec.name, error=self._error)
        finally:
            self._runtime = None
            self._ready.set()

    async def info(self) -> bytes:
        """Wait until started; a ``HostInfo`` (with ``error`` if it could not start)."""
        await self._ready.wait()
        runtime = self._runtime
        return encode(
            HostInfo(
                name=self._spec.name,
                owner=runtime.owner if runtime is not None else "",
                node_id=self._node,
                pid=os.getpid(),
                error=self._error if runtime is None else None,
                spec=self._spec_bytes,
            )
        )

    async def drive(self, run_id: str) -> tuple[int, str | None]:
        """Drive a stored run here, in the background; (this host's load, an error or None).

        The error says the run's workflow class is not importable here (the
        run is left queued for a host that has its code), or the host is down.
        """
        await self._ready.wait()
        runtime, tasks = self._runtime, self._tasks
        if runtime is None or tasks is None:
            return 0, self._error or "the host is stopping"
        manifest = await runtime.store.read_run(run_id)
        try:
            lookup(manifest.workflow, manifest.workflow_module)
        except RegistryError as exc:
            return runtime.active_runs, f"class:{manifest.workflow}:{describe(exc)}"
        if manifest.status.finished:
            return self._load(runtime), None
        self._starting += 1  # counted until the run is driven: the load answered is exact
        tasks.start_soon(self._drive, runtime, run_id)
        return self._load(runtime), None

    def _load(self, runtime: Runtime) -> int:
        return runtime.active_runs + self._starting

    async def _drive(self, runtime: Runtime, run_id: str) -> None:
        counted = True

        def started(_handle: object) -> None:
            nonlocal counted
            if counted:
                counted = False
                self._starting -= 1

        try:
            await runtime.recover(run_id, on_start=started)
        except RunLockedError:
            pass  # another host drives it (its adopter was quicker): nothing to do
        except Exception as exc:
            # the run stays in the store for the adopters; its handle follows the store
            _log.warning("host_drive_failed", run_id=run_id, error=describe(exc))
        finally:
            started(None)  # not driven here after all (another host took it, or it failed)

    async def milestone(self, token: str, data: bytes) -> bool:
        """Record a placed handler's milestone in its run's log; ``False``: the step is gone."""
        placer = self._placer
        return placer is not None and await placer.save_milestone(token, data)

    async def load(self) -> int:
        """How many runs this host drives now, and was handed and is starting."""
        runtime = self._runtime
        return self._load(runtime) if runtime is not None else 0

    async def adopt_now(self) -> None:
        """Look for orphaned runs now (a peer died)."""
        if self._runtime is not None:
            self._runtime.adopt_now()

    async def memory(self) -> int:
        """This process's resident memory, in bytes."""
        return rss()

    async def holds_limit_token(self, token: str) -> bool:
        """Whether this process took the limit slots marked ``token`` (a budget asks)."""
        return token == self._limits.token

    async def stop(self) -> None:
        """Stop the runtime: its runs are marked interrupted, for other hosts to adopt."""
        self._stop.set()
        await self._task

    async def _watch_nodes(self) -> None:
        """Wake the adopter whenever a node of the cluster dies."""
        alive: set[str] | None = None
        while True:
            now = await anyio.to_thread.run_sync(_alive_nodes)
            if alive is not None and alive - now and self._runtime is not None:
                _log.info("node_lost", nodes=sorted(alive - now))
                self._runtime.adopt_now()
            alive = now
            await anyio.sleep(self._spec.node_watch_interval)


def _alive_nodes() -> set[str]:
    return {n["NodeID"] for n in ray.nodes() if n["Alive"]}  # type: ignore[no-untyped-call]
